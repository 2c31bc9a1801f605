"""Test servers forked from a warm process: `python -m testing.server_forker` imports once the libraries every
server imports, then forks a server for each request, which runs `python -m voiceagent.server ...` as a process
started afresh would. A server took 1.3-1.5 s of CPU to start and warm its models this way, against 2.3 s as a
process of its own (the suite starts about a hundred per run).

What the warm process imports is settings-free library code only: nothing of the project (its modules read the
settings, made from each server's own environment), no Twisted reactor (Daphne installs one with its own event
loop, which forked servers must not share) and nothing that starts a thread or reads the environment when
imported (prometheus-client picks its multiprocess mode then; torch must stay out of a server that never
embeds: realtime/tests/test_socket_e2e.py). ONNX Runtime is left out too: a server forked from a process that
had imported it crashed as it exited (SIGSEGV). It stays single-threaded: forking a threaded process is unsafe.

Protocol, one JSON object per line on stdin and stdout: `{"start": {"argv", "env", "cwd", "log"}}` answers
`{"pid"}`; `{"status": pid}` answers `{"returncode"}` (null while it runs; negative for a signal, as
subprocess reports it). The servers are this process's children: it reaps them and keeps their exit codes.
The requester signals them itself (`ForkedProcess`). The process exits when its stdin closes.

`fork_server` is the requester's side (testing/daphne.py: start_test_server): one warm process per test
process, started on its first server. TEST_SERVERS_FORKED=false starts each server as a process of its own.
"""

from __future__ import annotations

import importlib
import json
import os
import random
import runpy
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

# The libraries a server imports while it starts or warms its engine, heaviest first, that import without the
# settings (DRF's views and drf-spectacular read them when imported: the server imports those itself). One that
# fails to import is left to the server.
WARM = (
    "django.db.models",
    "django.contrib.postgres.fields",
    "django.core.handlers.asgi",
    "django.http",
    "django.urls",
    "django.template.defaulttags",
    "django.forms",
    "django.contrib.admin",
    "rest_framework.serializers",
    "celery",
    "celery.app.base",
    "kombu",
    "psycopg",
    "psycopg_pool",
    "cryptography.fernet",
    "cryptography.x509",
    "numpy",
    "httpx",
    "requests",
    "jsonschema",
    "jinja2",
    "phonenumbers",
    "num2words",
    "snowballstemmer",
    "yaml",
    "OpenSSL",
    "openai",
    "soxr",
    "twilio.rest",
    "channels.generic.websocket",
    "autobahn.websocket.protocol",
    "twisted.internet.tcp",
    "asgiref.sync",
)
# Never in the warm process (see the module's docstring).
REFUSED = ("twisted.internet.reactor", "prometheus_client", "torch", "onnxruntime", "voiceagent", "kit")


def warm() -> None:
    for name in WARM:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - a module that needs the settings is imported by the server itself
            continue
    loaded = [name for name in REFUSED if name in sys.modules]
    if loaded or threading.active_count() != 1:
        raise SystemExit(
            f"server_forker: the warm process must not hold {loaded} or threads ({threading.active_count()})"
        )


class Forker:
    def __init__(self) -> None:
        self.running: set[int] = set()
        self.ended: dict[int, int] = {}

    def reap(self) -> None:
        for pid in list(self.running):
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done, status = pid, 0
            if done:
                self.running.discard(pid)
                self.ended[pid] = os.waitstatus_to_exitcode(status)

    def serve(self) -> dict[str, Any] | None:
        """Answer requests until stdin closes (None); in a forked child, return its job."""
        stdin = sys.stdin.buffer
        pending = b""
        while True:
            readable, _, _ = select.select([stdin.fileno()], [], [], 0.05)
            self.reap()
            if not readable:
                continue
            chunk = os.read(stdin.fileno(), 65536)
            if not chunk:
                return None
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                if "status" in request:
                    self.reap()
                    pid = int(request["status"])
                    self.answer({"returncode": self.ended.get(pid)})
                    continue
                job = request["start"]
                pid = os.fork()
                if pid == 0:
                    return job
                self.running.add(pid)
                self.answer({"pid": pid})

    @staticmethod
    def answer(reply: dict[str, Any]) -> None:
        os.write(sys.stdout.fileno(), json.dumps(reply).encode() + b"\n")


def become_server(job: dict[str, Any]) -> None:
    """In the forked child: the server's own files, directory and environment, then its module as __main__."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    log = os.open(job["log"] or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(null)
    os.close(log)
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    random.seed()

    module, *args = job["argv"]
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


class ForkedProcess:
    """A server forked by the warm process: what the tests use of subprocess.Popen."""

    def __init__(self, forker: Forkers, pid: int) -> None:
        self.forker = forker
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.forker.request({"status": self.pid})["returncode"]
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"forked server {self.pid}", timeout or 0)
            time.sleep(0.02)
        return code

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:  # ended (not yet reaped) since the poll
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Forkers:
    """The requester's side: one warm process, started on the first request and again if it has died."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.process: subprocess.Popen[bytes] | None = None

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            if self.process is None or self.process.poll() is not None:
                self.process = subprocess.Popen(
                    [sys.executable, "-m", "testing.server_forker"],
                    cwd=REPO,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                )
                self.read()  # its "ready" line
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps(message).encode() + b"\n")
            self.process.stdin.flush()
            return self.read()

    def read(self) -> dict[str, Any]:
        assert self.process is not None and self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the server forker exited with {self.process.wait()}")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def start(self, argv: list[str], *, env: dict[str, str], cwd: Path, log: Path | None) -> ForkedProcess:
        """`python -m argv...` with `env` as its whole environment, forked from the warm process."""
        reply = self.request({"start": {"argv": argv, "env": env, "cwd": str(cwd), "log": str(log) if log else None}})
        return ForkedProcess(self, int(reply["pid"]))


_forkers = Forkers()


def fork_server(argv: list[str], *, env: dict[str, str], cwd: Path, log: Path | None) -> ForkedProcess | None:
    """A forked server, or None where TEST_SERVERS_FORKED=false asks for processes of their own."""
    if os.environ.get("TEST_SERVERS_FORKED", "true").lower() in ("false", "0", "no"):
        return None
    return _forkers.start(argv, env=env, cwd=cwd, log=log)


def main() -> None:
    started = time.process_time()
    # Under pytest-django the tests' settings module is named in the environment: a library touching the
    # settings would load them here (the servers' settings come from their own environment).
    os.environ.pop("DJANGO_SETTINGS_MODULE", None)
    warm()
    print(json.dumps({"ready": round(time.process_time() - started, 3)}), flush=True)
    job = Forker().serve()
    if job is not None:
        become_server(job)


if __name__ == "__main__":
    main()
