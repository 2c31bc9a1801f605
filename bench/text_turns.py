"""Text turns benchmark (not a test): how many typed turns per second one Daphne process runs through
the real runtime with the embedded brain, over N concurrent text sessions on the browser socket (docs/guides/typed-sessions.md). This is the cost of an agent test run: the same sessions, the same brain, the same
call records.

Two processes: Daphne (testing/daphne.py DaphneServer, the embedded default) and this one, whose single
asyncio loop plays every client.

  1. open: --sessions text sessions are created through POST /public/v1/agents/{id}/realtime-sessions
     (`"modality": "text"`, `"events": ["tool"]`) and their sockets opened; each waits for its greeting;
  2. type: every client types --turns turns one after the other (`input_text`), each as soon as the answer
     to the previous one has arrived (`transcript`, role assistant): the server is never idle. Half of the
     turns ask the agent's knowledge (the embedded brain calls search_knowledge), half do not;
  3. stop: each sends `stop`; the server then gets up to 60 s to close the call records.

It prints: sessions started / completed, errors (any `error` message, unexpected close, REST failure or
timeout: must be 0), turns answered, the wall time of the typing phase and the turns per second over it,
the latency of a turn (input_text sent -> the assistant transcript received: p50, p95, max), the server's
CPU over the typing phase (and per turn), and the call records (status and modality).

Database: a fresh SQLite file under var/, or the PostgreSQL database named by DATABASE_URL with `_textturns`
appended; the server runs without REDIS_URL (its own worker indexes the knowledge upload). The bench organization is on the "agency" plan with
its limits lifted (bench/api_load.py bench_organization). Bounded: everything stops after --deadline-s.

Usage: .venv/bin/python bench/text_turns.py [--sessions 20] [--turns 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.api_load import bench_organization  # noqa: E402 - after the repository root is put on sys.path
from bench.voice_latency import cpu_seconds, percentile  # noqa: E402 - after the repository root is put on sys.path
from testing.stores import bench_database_url  # noqa: E402 - after the repository root is put on sys.path

SECRET = "text-turns-bench-secret-0123456789abcdef"
KNOWLEDGE = """# Riverside Clinic

## Parking

Patients park for free in the car park behind the clinic, on Mill Street.

## Opening hours

The clinic is open from Monday to Friday, from eight in the morning to six in the evening.
"""
TURNS = ("When is the clinic open?", "What can you do?", "Where can I park?", "Thank you, that helps.")


def bench_env() -> dict[str, str]:
    database_url = bench_database_url("textturns", ROOT / "var")
    # No REDIS_URL: the knowledge upload is indexed by the serving process's own worker (no Celery worker here).
    # Each client types its next turn as soon as the answer arrives, faster than a person: the typed-input
    # budget (docs/reference/realtime-protocol.md) is lifted, as the plans' limits are.
    return {
        "LOG_LEVEL": "WARNING",
        "REALTIME_TOKEN_SECRET": SECRET,
        "DATABASE_URL": database_url,
        "REDIS_URL": "",
        "REALTIME_TEXT_PER_SECOND": "1000000",
        "REALTIME_TEXT_BURST": "1000000",
        "REALTIME_TEXT_MAX_MESSAGES_PER_CALL": "1000000",
        "REALTIME_TEXT_MAX_BYTES_PER_CALL": "1000000000",
    }


def seed(env: dict[str, str]) -> tuple[str, str]:
    """Migrate the bench database; an organization on the agency plan with one active agent whose
    knowledge is the clinic's page (indexed here, before the server starts)."""
    organization, api_key = bench_organization(env, "Text turns bench")
    from django.utils import timezone

    from agents.models import Agent

    agent = Agent.objects.create(
        organization=organization,
        name="Clara",
        status="active",
        identity="",
        instructions="You answer questions about the Riverside Clinic.",
        ai_identity_disclosure_template_id="named_agent",
        greeting_type="none",
        updated_at=timezone.now(),
    )
    return str(agent.pk), api_key


def upload_knowledge(http_url: str, api_key: str, agent_id: str) -> None:
    from testing.daphne import wait_until_indexed

    path = f"/public/v1/agents/{agent_id}/knowledge"
    with httpx.Client(base_url=http_url, headers={"Authorization": f"Bearer {api_key}"}, timeout=60) as http:
        response = http.post(path, json={"content": KNOWLEDGE})
        response.raise_for_status()
        wait_until_indexed(lambda: http.get(path).json(), response.json()["id"])


def call_records() -> dict[str, int]:
    from django.db import connection
    from django.db.models import Count

    from calls.models import Call

    connection.close()  # the server wrote them: a fresh connection
    rows = (
        Call.objects.filter(organization__name="Text turns bench").values("status", "modality").annotate(n=Count("id"))
    )
    return {f"{row['status']}/{row['modality']}": row["n"] for row in rows}


@dataclass
class Typist:
    index: int
    greeted: bool = False
    completed: bool = False
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


async def type_turns(
    typist: Typist, http: httpx.AsyncClient, ws_base: str, agent_id: str, args: argparse.Namespace, go: asyncio.Event
) -> None:
    from testing.clients import VoiceClient, is_type

    response = await http.post(
        f"/public/v1/agents/{agent_id}/realtime-sessions", json={"modality": "text", "events": ["tool"]}
    )
    if response.status_code != 200:
        typist.errors.append(f"realtime-sessions {response.status_code}: {response.text[:100]}")
        return
    token = response.json()["token"]

    def on_message(item: object) -> None:
        message = getattr(item, "message", {})
        if message.get("type") == "error":
            typist.errors.append(f"error {message.get('code')}: {message.get('message')}")

    async with VoiceClient(f"{ws_base}/ws/agents/{agent_id}/realtime?token={token}", on_message=on_message) as client:
        try:
            started = await client.wait_for(is_type("session.started"), timeout=60)
            # The disclosure is the greeting here (greeting_type none): it arrives as the first transcript.
            await client.wait_for(is_type("transcript", role="assistant"), after=started, timeout=60)
            typist.greeted = True
            await go.wait()
            for turn in range(args.turns):
                before = len(client.messages)
                sent = time.monotonic()
                await client.send_text(TURNS[(typist.index + turn) % len(TURNS)])
                said = await client.wait_for(is_type("transcript", role="user"), after=before, timeout=60)
                await client.wait_for(is_type("transcript", role="assistant"), after=said, timeout=60)
                typist.latencies.append((time.monotonic() - sent) * 1000)
            await client.send({"type": "stop"})
            typist.completed = await client.wait_closed(30) == 1000
        except (TimeoutError, ConnectionError) as exc:
            typist.errors.append(f"{type(exc).__name__}: {exc}")


async def main_async(args: argparse.Namespace) -> None:
    from testing.daphne import DaphneServer
    from testing.servers import free_port

    env = bench_env()
    agent_id, api_key = await asyncio.to_thread(seed, env)
    port = free_port()
    server = DaphneServer(
        env={**env, "REALTIME_WS_URL": f"ws://127.0.0.1:{port}"},
        port=port,
        log_path=ROOT / "var" / "bench-text-turns-daphne.log",
    )
    await asyncio.to_thread(server.start)
    try:
        assert server.process is not None
        pid = server.process.pid
        engine = "PostgreSQL" if env["DATABASE_URL"].startswith("postgres") else "SQLite"
        print(
            f"one Daphne process ({engine}), the embedded brain, "
            f"{args.sessions} concurrent text sessions x {args.turns} typed turns; {os.cpu_count()} CPUs"
        )
        await asyncio.to_thread(upload_knowledge, server.http_url, api_key, agent_id)
        typists = [Typist(index) for index in range(args.sessions)]
        go = asyncio.Event()
        headers = {"Authorization": f"Bearer {api_key}"}
        async with httpx.AsyncClient(base_url=server.http_url, headers=headers, timeout=60) as http:
            tasks = [
                asyncio.create_task(type_turns(typist, http, server.ws_url, agent_id, args, go)) for typist in typists
            ]
            deadline = time.monotonic() + 120
            while sum(t.greeted for t in typists) + sum(task.done() for task in tasks) < args.sessions:
                if time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.05)
            cpu_before, wall_before = cpu_seconds([pid]), time.monotonic()
            go.set()
            done, pending = await asyncio.wait(tasks, timeout=args.deadline_s)
            cpu, wall = cpu_seconds([pid]) - cpu_before, time.monotonic() - wall_before
            for task in pending:
                task.cancel()
            failures = [f"{type(t.exception()).__name__}: {t.exception()}" for t in done if t.exception()]
        for _ in range(120):  # the server closes each call record after its socket
            if not any(key.startswith("active/") for key in (await asyncio.to_thread(call_records))):
                break
            await asyncio.sleep(0.5)
    finally:
        await asyncio.to_thread(server.stop)
    report(
        args, typists, failures + [f"{len(pending)} sessions still typing at the deadline"] * bool(pending), wall, cpu
    )
    print(f"call records after the run: {await asyncio.to_thread(call_records)}")


def report(args: argparse.Namespace, typists: list[Typist], failures: list[str], wall: float, cpu: float) -> None:
    latencies = [value for typist in typists for value in typist.latencies]
    errors = [error for typist in typists for error in typist.errors] + failures
    print(
        f"sessions started {sum(t.greeted for t in typists)}, completed {sum(t.completed for t in typists)}, "
        f"errors {len(errors)}"
    )
    kinds: dict[str, int] = {}
    for error in errors:
        kinds[error[:120]] = kinds.get(error[:120], 0) + 1
    for kind, count in sorted(kinds.items(), key=lambda item: -item[1])[:10]:
        print(f"  {count} x {kind}")
    turns = len(latencies)
    print(f"turns answered {turns} of {args.sessions * args.turns} in {wall:.1f} s: {turns / wall:.1f} turns/s")
    if latencies:
        print(
            f"  turn latency (input_text sent -> assistant transcript received): p50 "
            f"{statistics.median(latencies):.1f} ms, p95 {percentile(latencies, 95):.1f} ms, max {max(latencies):.1f} ms"
        )
    print(
        f"server CPU: {cpu:.1f} s over {wall:.1f} s ({100 * cpu / max(wall, 1e-9):.0f} % of one core; "
        f"{1000 * cpu / max(turns, 1):.1f} ms per turn); load average at the end {os.getloadavg()[0]:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20, help="concurrent text sessions")
    parser.add_argument("--turns", type=int, default=20, help="typed turns per session")
    parser.add_argument("--deadline-s", type=float, default=300.0, help="stop after this, whatever happens")
    args = parser.parse_args()
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
