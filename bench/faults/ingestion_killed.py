"""Fault bench (not a test): the serving process is killed (SIGKILL) during knowledge ingestion and
restarted. Prints each document's final status, error and the time it took to settle after the restart.

Starts a real Daphne on a free loopback port against its own database (a fresh SQLite file under var/,
or the PostgreSQL named by DATABASE_URL with `_faults_ingestion` appended), in the embedded default (no broker:
ingestion on the server's background worker). Uploads one small document (ready before the kill), one
large one (being embedded at the kill) and two more queued behind it, kills the server, restarts it with
KNOWLEDGE_PROCESSING_TIMEOUT_SECONDS=--timeout (default 5) and CALLS_MAINTENANCE_SECONDS=1, and waits
until no document is `processing`.

Usage: .venv/bin/python bench/faults/ingestion_killed.py [--timeout 5] [--paragraphs 3000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from testing.daphne import DaphneServer  # noqa: E402 - after the repository root is put on sys.path
from testing.servers import free_port  # noqa: E402 - after the repository root is put on sys.path
from testing.stores import bench_database_url  # noqa: E402 - after the repository root is put on sys.path


def bench_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("REDIS_URL", None)  # the embedded default: no broker, ingestion in the serving process
    env["DATABASE_URL"] = bench_database_url("faults_ingestion", ROOT / "var")
    env.setdefault("LOG_LEVEL", "WARNING")
    env["REALTIME_PRELOAD"] = "false"
    env["REALTIME_TOKEN_SECRET"] = "faults-bench-secret-0123456789abcdef"
    return env


def seed() -> tuple[str, str]:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "voiceagent.settings")
    django.setup()
    from django.utils import timezone

    from accounts.services import organization_create
    from agents.models import Agent

    organization, issued = organization_create(name="Faults", plan_code="agency")
    agent = Agent.objects.create(
        organization=organization, name="Docs", instructions="Answer from the documents.", updated_at=timezone.now()
    )
    return issued.raw_key, str(agent.pk)


def serve(env: dict[str, str], port: int, extra: dict[str, str]) -> subprocess.Popen[bytes]:
    return DaphneServer(env={**env, **extra}, port=port).start(timeout=120).process  # type: ignore[return-value]  # set once the server has started


def document(paragraphs: int, tag: str) -> str:
    return "\n\n".join(
        f"## {tag} {n}\n\nParcel {n} of {tag} leaves depot {n % 17} at {n % 24}:00 and reaches bay "
        f"{n * 7 % 101} after {n % 9 + 1} stops; drivers report delays on line {n % 13} to desk {n % 5}."
        for n in range(paragraphs)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timeout", type=int, default=5, help="KNOWLEDGE_PROCESSING_TIMEOUT_SECONDS after restart")
    parser.add_argument("--paragraphs", type=int, default=3000, help="paragraphs of the large document")
    args = parser.parse_args()

    env = bench_env()
    os.environ.update(env)
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    key, agent_id = seed()
    port = free_port()
    api = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}, timeout=60)
    path = f"/public/v1/agents/{agent_id}/knowledge"

    def statuses() -> dict[str, dict]:
        return {d["id"]: d for d in api.get(path).json()}

    server = serve(env, port, {})
    names: dict[str, str] = {}
    try:
        started = time.monotonic()
        small = api.post(path, json={"content": document(3, "small"), "name": "small (before the kill)"}).json()
        names[small["id"]] = "small (before the kill)"
        while statuses()[small["id"]]["status"] == "processing":
            time.sleep(0.1)
        print(f"small document ready {time.monotonic() - started:.1f} s after its upload (model load included)")
        for name, paragraphs in (
            ("large (embedding at the kill)", args.paragraphs),
            ("queued 1", 200),
            ("queued 2", 200),
        ):
            t0 = time.monotonic()
            created = api.post(path, json={"content": document(paragraphs, name), "name": name}).json()
            names[created["id"]] = name
            print(f"uploaded {name}: answered in {(time.monotonic() - t0) * 1000:.0f} ms")
        time.sleep(2)
        before = statuses()
        print("at the kill:", ", ".join(f"{names[i]}: {d['status']}" for i, d in before.items()))
    finally:
        server.kill()
        server.wait()
    print("server killed (SIGKILL)")

    restarted = time.monotonic()
    server = serve(
        env, port, {"CALLS_MAINTENANCE_SECONDS": "1", "KNOWLEDGE_PROCESSING_TIMEOUT_SECONDS": str(args.timeout)}
    )
    try:
        up = time.monotonic() - restarted
        print(
            f"restarted (no new upload), serving after {up:.1f} s; KNOWLEDGE_PROCESSING_TIMEOUT_SECONDS={args.timeout}"
        )
        settled: dict[str, float] = {}
        deadline = time.monotonic() + args.timeout + 60
        while time.monotonic() < deadline:
            now = statuses()
            for doc_id, item in now.items():
                if item["status"] != "processing" and doc_id not in settled:
                    settled[doc_id] = time.monotonic() - restarted
            if len(settled) == len(now):
                break
            time.sleep(0.2)
        final = statuses()
    finally:
        server.terminate()
        server.wait(timeout=15)

    print(f"{'document':32} {'final status':13} {'chunks':>6} {'settled after restart':>22}  error")
    for doc_id, item in final.items():
        when = "before the kill" if before[doc_id]["status"] != "processing" else f"{settled.get(doc_id, -1):.1f} s"
        print(f"{names[doc_id]:32} {item['status']:13} {item['chunkCount']:6} {when:>22}  {item['error'] or ''}")
    stuck = [names[i] for i, d in final.items() if d["status"] == "processing"]
    print("documents left processing:", ", ".join(stuck) if stuck else "none")


if __name__ == "__main__":
    main()
