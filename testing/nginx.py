"""Debian's nginx in front of a test server, configured by the shipped deploy/nginx.conf.

The shipped file is used as it is but for the lines that name where it listens, where the service is and
where it logs (127.0.0.1 ports and a temporary folder instead of port 80, `web:8000` and /var/log): the
tests check the configuration that is deployed. nginx runs as a foreground process with a temporary
prefix (no root paths, no daemon); a test skips when nginx is missing (make setup installs it as root;
.ci/run does).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from testing.server_forker import REPO
from testing.servers import free_port

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
SHIPPED = REPO / "deploy" / "nginx.conf"

# The only lines rewritten: (pattern, what it becomes); each must match the shipped file exactly once.
_LISTEN = re.compile(r"^(\s*)listen 80;$", re.MULTILINE)
_BACKEND = re.compile(r"^(\s*)set \$backend http://web:8000;$", re.MULTILINE)
_ACCESS_LOG = re.compile(r"^(\s*)access_log /var/log/nginx/access\.log (\w+);$", re.MULTILINE)


def nginx_or_skip() -> str:
    if not os.access(NGINX, os.X_OK):
        pytest.skip("nginx is not installed (make setup installs Debian's nginx as root; .ci/run does)")
    return NGINX


def derived_config(*, port: int, upstream_port: int, folder: Path) -> str:
    """deploy/nginx.conf with its listen, upstream and access-log lines pointed at loopback and `folder`."""
    text = SHIPPED.read_text()
    for pattern, replacement in (
        (_LISTEN, rf"\g<1>listen 127.0.0.1:{port};"),
        (_BACKEND, rf"\g<1>set $backend http://127.0.0.1:{upstream_port};"),
        (_ACCESS_LOG, rf"\g<1>access_log {folder / 'access.log'} \g<2>;"),
    ):
        text, count = pattern.subn(replacement, text)
        # Without an access_log line of its own the site logs to nginx's (here: the same file, combined).
        assert count == 1 or (count == 0 and pattern is _ACCESS_LOG), f"deploy/nginx.conf: no {pattern.pattern}"
    return text


class Nginx:
    def __init__(self, *, port: int, folder: Path, process: subprocess.Popen[bytes]) -> None:
        self.port, self.folder, self.process = port, folder, process

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def access_log(self) -> Path:
        return self.folder / "access.log"


@contextmanager
def nginx_in_front(upstream_port: int, folder: Path, timeout: float = 30.0) -> Iterator[Nginx]:
    """nginx on a free loopback port, proxying to the service on `upstream_port` with the shipped config."""
    binary = nginx_or_skip()
    folder.mkdir(parents=True, exist_ok=True)
    # Run as root (CI), nginx's workers become `nobody`: they write request bodies to these folders.
    folder.chmod(0o777)
    port = free_port()
    (folder / "site.conf").write_text(derived_config(port=port, upstream_port=upstream_port, folder=folder))
    temp = "\n".join(
        f"    {kind}_temp_path {folder / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    (folder / "nginx.conf").write_text(
        f"daemon off;\nworker_processes 1;\npid {folder / 'nginx.pid'};\nerror_log {folder / 'error.log'} warn;\n"
        f"events {{ worker_connections 256; }}\nhttp {{\n{temp}\n    access_log {folder / 'access.log'};\n"
        f"    include {folder / 'site.conf'};\n}}\n"
    )
    output = open(folder / "stdout.log", "wb")
    process = subprocess.Popen(
        [binary, "-p", str(folder), "-e", str(folder / "error.log"), "-c", str(folder / "nginx.conf")],
        stdout=output,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"nginx exited with {process.returncode}: {(folder / 'error.log').read_text()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("nginx did not start in time") from None
                time.sleep(0.05)
        yield Nginx(port=port, folder=folder, process=process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        output.close()
