"""Schemathesis against the public API (not a test): a larger run than the suite's, with every phase.

Seeds a fresh database (a SQLite file under a temporary folder, or with DATABASE_URL=postgres://... a
PostgreSQL database of that name plus `_schemathesis`, dropped and made again) with the world of
testing/schema_fuzzing.py,
serves the API on a free loopback port (Django's WSGI handler in a thread, or Daphne with --daphne, as
`make run` serves it), and runs `schemathesis run` in this process against /public/v1/openapi.json: the
examples, coverage, fuzzing and stateful phases, all checks (positive_data_acceptance with the exceptions
schema_fuzzing.py explains), N examples per operation. Prints operations, test cases, failures and time;
exits 1 when there are failures.

Usage: .venv/bin/python bench/schemathesis_run.py [--examples 40] [--seed 1] [--no-stateful] [--daphne]
       [--report-dir DIR]   (Schemathesis' JSON report and its console output are kept there)
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database_url(folder: Path) -> str:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        return f"sqlite:///{folder / 'schemathesis.sqlite3'}"
    import psycopg

    base, _, name = url.rpartition("/")
    name = f"{name or 'voiceagent'}_schemathesis"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    return f"{base}/{name}"


def prepare(folder: Path) -> dict[str, str]:
    """Environment of the bench (this process and a Daphne server): its own database, no broker."""
    env = {
        "DATABASE_URL": database_url(folder),
        "DJANGO_SETTINGS_MODULE": "voiceagent.settings",
        "LOG_LEVEL": "ERROR",
        "REALTIME_PRELOAD": "false",
        "CALLS_MAINTENANCE_SECONDS": "0",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
    }
    os.environ.update(env)
    os.environ.pop("REDIS_URL", None)
    import logging

    import django

    django.setup()
    logging.getLogger("django.request").setLevel(logging.ERROR)  # every 4xx would be a warning line
    from django.conf import settings
    from django.core.management import call_command

    from testing import schema_fuzzing

    call_command("migrate", verbosity=0)
    schema_fuzzing.seed_world()
    settings.REALTIME_WS_URL = schema_fuzzing.WS_URL
    settings.REALTIME_TOKEN_SECRET = schema_fuzzing.TOKEN_SECRET
    return {**env, "REALTIME_WS_URL": schema_fuzzing.WS_URL, "REALTIME_TOKEN_SECRET": schema_fuzzing.TOKEN_SECRET}


def serve_in_thread(port: int) -> None:
    from django.core.handlers.wsgi import WSGIHandler
    from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler

    class QuietHandler(WSGIRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    class Server(ThreadedWSGIServer):
        def get_request(self) -> tuple[socket.socket, object]:
            connection, address = super().get_request()
            # Small keep-alive responses otherwise wait ~40 ms for delayed ACKs (Nagle).
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return connection, address

    server = Server(("127.0.0.1", port), QuietHandler, allow_reuse_address=True)
    server.set_app(WSGIHandler())
    threading.Thread(target=server.serve_forever, daemon=True).start()


def serve_with_daphne(port: int, env: dict[str, str], log: Path) -> subprocess.Popen:
    process = subprocess.Popen(  # as `make run` serves it: Daphne, through voiceagent.server
        [sys.executable, "-m", "voiceagent.server", "-b", "127.0.0.1", "-p", str(port), "voiceagent.asgi:application"],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 120  # a busy machine takes a while to import the application
    while time.monotonic() < deadline and process.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit(f"The server (python -m voiceagent.server) did not start; see {log}")


def run_schemathesis(url: str, *, examples: int, seed: int, stateful: bool, report: Path, output: Path) -> int:
    from schemathesis.cli.commands import schemathesis as cli

    from testing import schema_fuzzing

    schema_fuzzing.register_formats()
    config = schema_fuzzing.config(max_examples=examples, seed=seed, stateful=stateful)
    args = [url, "--report", "json", "--report-json-path", str(report), "--no-color"]
    with output.open("w") as out:
        saved = sys.stdout
        sys.stdout = out  # the console report goes to the file; the figures are printed below
        try:
            # The `run` command itself, given the configuration the CLI would read from schemathesis.toml.
            cli.commands["run"].main(args=args, obj=config, standalone_mode=False)
        except SystemExit as exit_:
            return int(exit_.code or 0)
        finally:
            sys.stdout = saved
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=40, help="examples per operation (fuzzing phase)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-stateful", action="store_true", help="skip the stateful phase")
    parser.add_argument("--daphne", action="store_true", help="serve with Daphne instead of a WSGI thread")
    parser.add_argument("--report-dir", type=Path, default=None)
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="voiceagent-schemathesis-"))
    report_dir = args.report_dir or folder
    report_dir.mkdir(parents=True, exist_ok=True)
    env = prepare(folder)
    port = free_port()
    daphne = serve_with_daphne(port, env, report_dir / "daphne.log") if args.daphne else None
    if daphne is None:
        serve_in_thread(port)
    report, output = report_dir / "schemathesis.json", report_dir / "schemathesis.txt"
    started = time.perf_counter()
    try:
        run_schemathesis(
            f"http://127.0.0.1:{port}/public/v1/openapi.json",
            examples=args.examples,
            seed=args.seed,
            stateful=not args.no_stateful,
            report=report,
            output=output,
        )
    finally:
        if daphne is not None:
            daphne.terminate()
            daphne.wait(timeout=10)
    elapsed = time.perf_counter() - started

    result = json.loads(report.read_text())
    operations, cases = result["operations"], result["test_cases"]
    failures = sum(failure["count"] for failure in result["failures"])
    server = "Daphne" if daphne else "a WSGI thread"
    database = "PostgreSQL" if os.environ["DATABASE_URL"].startswith("postgres") else "SQLite"
    print(f"Schemathesis {result['schemathesis_version']} against {server} on {database}")
    print(f"  examples per operation  {args.examples} (seed {args.seed})")
    print("  phases                  " + ", ".join(f"{name} {p['status']}" for name, p in result["phases"].items()))
    print(f"  operations              {operations['tested']} tested of {operations['total']}")
    print(f"  test cases              {cases['generated']} generated")
    print(f"  failures                {failures} ({cases['unique_failures']} unique), errors {len(result['errors'])}")
    for failure in result["failures"]:
        print(f"    {failure['code']} {failure['title']}: {failure['count']} in {', '.join(failure['operations'])}")
    for error in result["errors"]:
        print(f"    error: {json.dumps(error)[:300]}")
    print(f"  time                    {elapsed:.1f} s")
    print(f"  report                  {report} (console output: {output})")
    sys.exit(1 if failures or result["errors"] else 0)


if __name__ == "__main__":
    main()
