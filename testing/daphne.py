"""A real server process for the tests and bench/: `python -m voiceagent.server voiceagent.asgi:application`
(Daphne) on a free loopback port against a given database.

`DaphneServer` is the process; `start_test_server`/`stop_test_server` run one on the database of the
running tests (pytest-django's test database, one per pytest-xdist worker) with the settings every test
server needs, and on PostgreSQL name its connections so that stopping it can wait until they are gone
(the test database is dropped at the end of the run).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from testing.server_forker import REPO, ForkedProcess, fork_server
from testing.servers import free_port
from testing.waiting import polled_sync

# The realtime token secret of the tests and of the servers they start (the realtime tests' settings).
SECRET = "test-realtime-secret-0123456789abcdef"


def database_url(settings_dict: dict[str, Any]) -> str:
    """A DATABASE_URL naming the database Django is using now (for example the test database)."""
    engine, name = settings_dict["ENGINE"], settings_dict["NAME"]
    if engine.endswith("sqlite3"):
        return f"sqlite:///{name}"
    user = quote(settings_dict.get("USER") or "")
    password = settings_dict.get("PASSWORD") or ""
    auth = f"{user}:{quote(password)}@" if password else (f"{user}@" if user else "")
    return f"postgres://{auth}{settings_dict.get('HOST') or '127.0.0.1'}:{settings_dict.get('PORT') or 5432}/{name}"


class DaphneServer:
    """One server process; `env` is added to this process's environment."""

    def __init__(
        self, *, env: dict[str, str], port: int | None = None, log_path: Path | None = None, args: Sequence[str] = ()
    ) -> None:
        self.port = port or free_port()
        self.args = list(args)
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **env}
        self.env.pop("DJANGO_SETTINGS_MODULE", None)
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | ForkedProcess | None = None

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0, *, forked: bool = False) -> DaphneServer:
        """Start it and wait until /livez answers; `forked`: from the tests' warm process (testing/server_forker.py)."""
        argv = ["voiceagent.server", "-b", "127.0.0.1", "-p", str(self.port), *self.args, "voiceagent.asgi:application"]
        self.process = fork_server(argv, env=self.env, cwd=REPO, log=self.log_path) if forked else None
        if self.process is None:
            output = open(self.log_path, "wb") if self.log_path else subprocess.DEVNULL
            self.process = subprocess.Popen(
                [sys.executable, "-m", *argv], cwd=REPO, env=self.env, stdout=output, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"daphne exited with {self.process.returncode}; see {self.log_path}")
            try:
                with urllib.request.urlopen(f"{self.http_url}/livez", timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("daphne did not start in time")

    def rss_bytes(self) -> int:
        """The server process's resident memory (VmRSS of /proc/<pid>/status)."""
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise LookupError(f"no VmRSS for process {self.process.pid}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> DaphneServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _application_name(port: int) -> str:
    return f"voiceagent-test-server-{port}"


def start_test_server(
    logs: Any, name: str, env: dict[str, str] | None = None, *, public: bool = False, args: Sequence[str] = ()
) -> DaphneServer:
    """A server process on the database of the running tests (pytest), its log `name`.log in a temporary
    directory (`logs`: pytest's tmp_path_factory, or a folder); `env` adds settings
    (OUTBOUND_ALLOWED_NETWORKS, LLM_PROVIDER...); `public` makes its own address PUBLIC_BASE_URL (the URL
    Twilio's webhooks and Media Streams reach); `args` adds server options (Daphne's command line).

    The database is the one Django uses now: under pytest-django the test database (one per pytest-xdist
    worker, named after it). On PostgreSQL the server's connections carry an application_name of their
    own, so that stop_test_server can wait until they are gone."""
    from django.db import connection

    port = free_port()
    url = database_url(connection.settings_dict)
    if connection.vendor == "postgresql":
        url += f"?application_name={_application_name(port)}"  # its connections, for stop_test_server
    base = {
        "DATABASE_URL": url,
        "REALTIME_TOKEN_SECRET": SECRET,
        "REALTIME_WS_URL": f"ws://127.0.0.1:{port}",
        "DATABASE_POOL": "false",
        # Background work in the server itself (kit/background.py), also with the REDIS_URL of a CI run: no
        # Celery worker runs beside the tests (a test that hands the server a broker in `env` gets the
        # server's default, below). Queued jobs (ingestion, analyses, test runs) run on its pools; its loops
        # of shared work are off unless a test asks (env), through their intervals:
        "BACKGROUND_WORK": "inprocess",
        # no upkeep sweep of its own: a module's server lives across tests, and a sweep overlapping the
        # flush between two tests could deadlock it on PostgreSQL;
        "CALLS_MAINTENANCE_AT_START": "false",
        "CALLS_MAINTENANCE_SECONDS": "0",
        # call events recorded but not sent (a test's receivers see only what it asked for: the call events
        # tests pass EVENTS_POLL_SECONDS);
        "EVENTS_POLL_SECONDS": "0",
        # no call batch scheduler (a test's batches are placed by its own ticks; the batch e2e tests pass
        # BATCH_TICK_SECONDS);
        "BATCH_TICK_SECONDS": "0",
        # no outbound dispatcher (queued calls stay queued; the outbound e2e tests pass OUTBOUND_POLL_SECONDS
        # with their own Twilio stand-in).
        "OUTBOUND_POLL_SECONDS": "0",
        # A heartbeat every second for the calls it holds: another server's upkeep sweep on the same test
        # database (the upkeep tests' expire heartbeats after a few seconds) never takes them for dead.
        "LIVENESS_HEARTBEAT_SECONDS": "1",
        "LIVENESS_EXPIRY_SECONDS": "5",
        # WebRTC sessions (a browser's talk panel or widget) on loopback only: the one host candidate the
        # server offers, no STUN or TURN server.
        "WEBRTC_HOST_ADDRESSES": "127.0.0.1",
        "WEBRTC_ICE_SERVERS": "",
    }
    if (env or {}).get("REDIS_URL"):
        del base["BACKGROUND_WORK"]  # celery: the broker the test handed over (voiceagent/settings.py)
    if public:
        base["PUBLIC_BASE_URL"] = f"http://127.0.0.1:{port}"
    folder = logs if isinstance(logs, Path) else logs.mktemp("daphne")
    # Recordings of agents that record go to the test's temporary folder, not the repository's var/media.
    base["RECORDINGS_STORAGE_URL"] = f"file://{folder / 'recordings'}"
    log = folder / f"{name}.log"
    return DaphneServer(env={**base, **(env or {})}, port=port, log_path=log, args=args).start(forked=True)


@contextmanager
def sipserver_process(logs: Path, bind: str, rtp_ports: str, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """`manage.py sipserver` on the database of the running tests (as start_test_server's servers), bound to
    `bind`, until the block ends (SIGTERM); its output in `logs`/sipserver.log. `env` adds settings."""
    from django.db import connection

    log_path = logs / "sipserver.log"
    base = {"DATABASE_URL": database_url(connection.settings_dict), "REALTIME_TOKEN_SECRET": SECRET}
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "sipserver", "--bind", bind, "--rtp-ports", rtp_ports],
            cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1", **base, **env}, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:

        def started() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"sipserver exited: {log_path.read_text()[-2000:]}")
            return b"SIP endpoint on udp" in log_path.read_bytes()

        polled_sync(started, what="sipserver serving SIP", timeout=60)
        yield process
    finally:
        process.terminate()
        process.wait(20)


def stop_test_server(server: DaphneServer) -> None:
    """Stop it and, on PostgreSQL, wait until its connections are gone (the test database is dropped
    at the end of the run)."""
    from django.db import connection

    server.stop()
    if connection.vendor != "postgresql":
        return
    for _ in range(100):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = %s",
                [_application_name(server.port)],
            )
            if cursor.fetchone()[0] == 0:
                return
        time.sleep(0.05)


@contextmanager
def shared_test_server(
    django_db_blocker: Any,
    logs: Any,
    name: str,
    env: dict[str, str] | None = None,
    *,
    public: bool = False,
    args: Sequence[str] = (),
) -> Iterator[DaphneServer]:
    """start_test_server for a fixture wider than a test (a module's server, started once for all its
    tests): pytest-django lets such a fixture reach the database only inside django_db_blocker.unblock(),
    which starting and stopping need (the database settings, the wait for its connections)."""
    with django_db_blocker.unblock():
        started = start_test_server(logs, name, env, public=public, args=args)
    try:
        yield started
    finally:
        with django_db_blocker.unblock():
            stop_test_server(started)


def in_thread(function: Any) -> Any:
    """Runs a database call outside the thread that Playwright's event loop runs in (Django refuses
    synchronous queries in a thread with a running loop), closing that thread's connection after."""
    from django.db import connections

    def run() -> Any:
        try:
            return function()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(run).result()


def wait_until_indexed(
    list_documents: Callable[[], list[dict[str, Any]]], document_id: str, *, timeout: float = 120
) -> dict[str, Any]:
    """Poll an agent's knowledge list (a callable that GETs it through the API) until the document is no
    longer `processing` (ingestion runs after the upload answers); its list item. AssertionError past
    `timeout` (testing/waiting.py), LookupError when the document is not listed."""

    def done() -> dict[str, Any] | None:
        item = next((d for d in list_documents() if d["id"] == document_id), None)
        if item is None:
            raise LookupError(f"document {document_id} is not listed")
        return item if item["status"] != "processing" else None

    return polled_sync(done, what=f"document {document_id} to leave processing", timeout=timeout, every=0.1)
