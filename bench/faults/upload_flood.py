"""Fault: one organization floods the knowledge upload with large files at once.

One Daphne process in the embedded default (ingestion on its own background worker), on its own
database, with the documented bounds (or those given): organization A sends --uploads concurrent uploads
of --mib MiB of text each, in --waves waves; meanwhile organization B, in a typed session, types a turn
after each answer, and uploads one small document in the middle of the flood (retrying after the
Retry-After it is given, if any). Prints what A's uploads got (status, time to answer, the documents'
final status), what B's live work saw (its typed turns' answer times, its small upload's status and time
to `ready`), and the server's resident memory before, at its peak and after.

Usage: .venv/bin/python bench/faults/upload_flood.py [--uploads 8] [--mib 19] [--waves 2]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from common import ROOT, bench_env

MIB = 1024 * 1024
LINE = "Guests may borrow an umbrella at the front desk; please bring it back when you leave. "
SMALL = "# Parking\n\nVisitors park in bay 12 behind the office; the barrier opens when you press the bell."
TURNS = ["What are your opening hours?", "Can I park at the office?", "Do you take walk-ins?"]


def organization(env: dict[str, str], name: str) -> tuple[Any, str]:
    from bench.api_load import bench_organization

    return bench_organization(env, name, lift_limits=False)


def text_agent(org: Any, name: str) -> Any:
    from django.utils import timezone

    from agents.models import Agent

    return Agent.objects.create(
        organization=org,
        name=name,
        status="active",
        instructions="You answer questions about the office.",
        greeting_type="static",
        static_greeting="Hello.",
        updated_at=timezone.now(),
    )


class Memory:
    """The server's VmRSS, sampled every 0.2 s on a thread of its own until stopped."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.peak = server.rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            self.peak = max(self.peak, self.server.rss_bytes())

    def __enter__(self) -> Memory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


async def typed_turns(
    server: Any, key: str, agent: Any, flooding: threading.Event, greeted: asyncio.Event
) -> list[float]:
    """B's typed session: a turn after each answer while A floods; each turn's answer time in ms."""
    from testing.clients import VoiceClient, is_type

    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=server.http_url, headers=headers, timeout=60) as http:
        response = await http.post(f"/public/v1/agents/{agent.pk}/realtime-sessions", json={"modality": "text"})
        response.raise_for_status()
        token = response.json()["token"]
    latencies: list[float] = []
    async with VoiceClient(f"{server.ws_url}/ws/agents/{agent.pk}/realtime?token={token}") as client:
        started = await client.wait_for(is_type("session.started"), timeout=60)
        await client.wait_for(is_type("transcript", role="assistant"), after=started, timeout=60)
        greeted.set()
        while not flooding.is_set():
            await asyncio.sleep(0.05)
        turn = 0
        while flooding.is_set():
            before = len(client.messages)
            sent = time.monotonic()
            await client.send_text(TURNS[turn % len(TURNS)])
            said = await client.wait_for(is_type("transcript", role="user"), after=before, timeout=120)
            await client.wait_for(is_type("transcript", role="assistant"), after=said, timeout=120)
            latencies.append((time.monotonic() - sent) * 1000)
            turn += 1
        await client.send({"type": "stop"})
        await client.wait_closed(30)
    return latencies


def small_upload(server: Any, key: str, agent: Any) -> str:
    """B's small upload during the flood, retried after Retry-After when refused: what it got."""
    from testing.daphne import wait_until_indexed

    path = f"/public/v1/agents/{agent.pk}/knowledge"
    refusals = []
    start = time.monotonic()
    with httpx.Client(base_url=server.http_url, headers={"Authorization": f"Bearer {key}"}, timeout=120) as http:
        for _ in range(10):
            response = http.post(path, json={"content": SMALL})
            if response.status_code != 429:
                break
            refusals.append(response.headers.get("Retry-After"))
            time.sleep(int(response.headers.get("Retry-After", "1")))
        answered = time.monotonic() - start
        if response.status_code != 200:
            return f"{response.status_code} after {answered:.1f} s: {response.text[:120]}"
        item = wait_until_indexed(lambda: http.get(path).json(), response.json()["id"], timeout=600)
    refused = f" after {len(refusals)} refusal(s) (Retry-After {', '.join(refusals)})" if refusals else " at once"
    return (
        f"{response.status_code}{refused}, answered {answered:.1f} s after it was first sent; "
        f"{item['status']} {time.monotonic() - start:.1f} s after"
    )


def flood(server: Any, key: str, agent: Any, args: argparse.Namespace) -> list[tuple[int, float, str]]:
    body = (LINE * (args.mib * MIB // len(LINE))).encode()
    path = f"/public/v1/agents/{agent.pk}/knowledge"

    def upload(n: int) -> tuple[int, float, str]:
        start = time.monotonic()
        with httpx.Client(base_url=server.http_url, headers={"Authorization": f"Bearer {key}"}, timeout=600) as http:
            response = http.post(path, files={"file": (f"flood-{n}.txt", body, "text/plain")})
        return response.status_code, time.monotonic() - start, response.json().get("code") or ""

    results = []
    with ThreadPoolExecutor(max_workers=args.uploads) as pool:
        for _ in range(args.waves):
            results += list(pool.map(upload, range(args.uploads)))
    return results


def settle(agent: Any) -> None:
    """Until the agent's accepted documents are no longer `processing` (indexed or failed)."""
    from django.db import connections

    from knowledge.models import KnowledgeDocument

    try:
        for _ in range(1200):
            if not KnowledgeDocument.objects.filter(agent=agent, status="processing").exists():
                return
            time.sleep(0.5)
    finally:
        connections.close_all()


def report(agent_a: Any, results: list[tuple[int, float, str]]) -> None:
    """What A's uploads got, and its documents' final status."""
    from django.db import connections

    from knowledge.models import KnowledgeDocument

    for status in sorted({r[0] for r in results}):
        times = [r[1] for r in results if r[0] == status]
        codes = sorted({r[2] for r in results if r[0] == status} - {""})
        print(
            f"  {status}{' ' + ','.join(codes) if codes else ''}: {len(times)}, answered in "
            f"{min(times):.1f}-{max(times):.1f} s"
        )
    statuses = list(KnowledgeDocument.objects.filter(agent=agent_a).values_list("status", "error"))
    for status in sorted({s for s, _ in statuses}):
        errors = {e[:90] for s, e in statuses if s == status and e}
        print(f"  documents {status}: {sum(1 for s, _ in statuses if s == status)} {sorted(errors)}")
    connections.close_all()


async def run(server: Any, orgs: dict[str, Any], args: argparse.Namespace) -> None:
    (_, key_a, agent_a), (_, key_b, agent_b) = orgs["A"], orgs["B"]
    before = server.rss_bytes()
    flooding = threading.Event()
    with Memory(server) as memory:
        greeted = asyncio.Event()
        turns = asyncio.create_task(typed_turns(server, key_b, agent_b, flooding, greeted))
        await asyncio.wait_for(greeted.wait(), 60)  # B's session is live before the flood starts
        loop = asyncio.get_running_loop()
        flooding.set()
        flood_started = time.monotonic()
        floods = loop.run_in_executor(None, flood, server, key_a, agent_a, args)
        await asyncio.sleep(1.0)  # the flood is under way
        small = await loop.run_in_executor(None, small_upload, server, key_b, agent_b)
        results = await floods
        flood_seconds = time.monotonic() - flood_started
        await loop.run_in_executor(None, settle, agent_a)
        flooding.clear()
        latencies = await turns
    after = server.rss_bytes()

    sent = args.uploads * args.waves
    print(
        f"organization A: {sent} uploads of {args.mib} MiB ({args.waves} waves of {args.uploads}) in {flood_seconds:.1f} s"
    )
    await loop.run_in_executor(None, report, agent_a, results)
    print("organization B (live work during the flood):")
    if latencies:
        p50, worst = statistics.median(latencies), max(latencies)
        print(f"  typed turns: {len(latencies)}, answer time p50 {p50:.0f} ms, max {worst:.0f} ms")
    print(f"  small upload: {small}")
    print(
        f"server memory (VmRSS): before {before / MIB:.0f} MiB, peak {memory.peak / MIB:.0f} MiB, "
        f"after {after / MIB:.0f} MiB ({sent * args.mib} MiB sent)"
    )


OPTIONS = {
    "--uploads": (8, "concurrent uploads of organization A per wave"),
    "--mib": (19, "size of each upload in MiB"),
    "--waves": (2, "waves of concurrent uploads, one after the other"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for option, (default, help_text) in OPTIONS.items():
        parser.add_argument(option, type=int, default=default, help=help_text)
    args = parser.parse_args()

    from testing.daphne import DaphneServer
    from testing.servers import free_port

    env = {**bench_env("upload_flood"), "REALTIME_PRELOAD": "false", "REDIS_URL": ""}
    orgs: dict[str, Any] = {}
    for label in ("A", "B"):
        org, key = organization(env, f"Upload flood {label}")
        orgs[label] = (org, key, text_agent(org, f"Agent {label}"))
    log = ROOT / "var" / "bench-faults-upload-flood-daphne.log"
    port = free_port()
    env["REALTIME_WS_URL"] = f"ws://127.0.0.1:{port}"
    with DaphneServer(env=env, port=port, log_path=log) as server:
        # A first small document loads the embedding model (memory the server keeps whatever follows).
        _, key_b, agent_b = orgs["B"]
        print(f"warm-up upload of organization B: {small_upload(server, key_b, agent_b)}")
        asyncio.run(run(server, orgs, args))


if __name__ == "__main__":
    main()
