"""Calls listing benchmark (not a test): GET /public/v1/calls?agentId=...&limit=100 with 100,000 calls.

Seeds one organization whose agent has `n_calls` calls (bulk_create), then measures the latency of
listing that agent's 100 newest calls through the whole Django stack (URL routing, middleware, API-key
authentication, query validation, SQL, JSON rendering) with django.test.Client, sequentially.

- `run(n_calls=100_000) -> dict` uses the database Django is configured with.
- `seed(n_calls)` only seeds (bench/api_load.py uses it, then measures the same listing over HTTP through
  its Daphne server).
- `main()` (this script) first points Django at its own database: a fresh SQLite file var/bench-callsbench.sqlite3,
  or, when DATABASE_URL names PostgreSQL, that server's database with `_callsbench` appended, recreated.

Usage: .venv/bin/python bench/calls_bench.py [--calls 100000] [--requests 300]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TARGET_P50_MS = 30.0


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def seed(n_calls: int) -> tuple[str, str, float]:
    """One organization, one agent with n_calls finished calls, a second agent with a few; returns
    (api key, agent id, seconds spent seeding)."""
    from django.db import connection
    from django.utils import timezone

    from accounts.services import organization_create
    from agents.models import Agent
    from calls.models import Call

    started = time.perf_counter()
    organization, issued = organization_create(name="Calls bench", plan_code="agency")
    now = timezone.now()
    agent, other = (
        Agent.objects.create(organization=organization, name=name, status="active", updated_at=now)
        for name in ("Busy agent", "Other agent")
    )
    batch: list[Call] = []
    for index in range(n_calls + 1000):
        target = agent if index < n_calls else other
        started_at = now - timedelta(seconds=37 * index)
        duration = index % 300
        batch.append(
            Call(
                organization=organization,
                agent=target,
                agent_name=target.name,
                channel="phone" if index % 2 else "web",
                from_number="+14155550100" if index % 2 else "web-client",
                to_number="+14155550199" if index % 2 else "web-agent",
                status="completed" if index % 10 else "failed",
                started_at=started_at,
                ended_at=started_at + timedelta(seconds=duration),
                duration_seconds=duration,
                tool_invocation_count=index % 3,
                summary="Caller asked about an order; the agent looked it up.",
                billable_seconds=-(-duration // 10) * 10,
                overage_seconds=-(-duration // 10) * 10,
                usage_classification="overage",
            )
        )
        if len(batch) == 5000:
            Call.objects.bulk_create(batch)
            batch.clear()
    Call.objects.bulk_create(batch)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return issued.raw_key, str(agent.id), time.perf_counter() - started


def run(n_calls: int = 100_000, requests: int = 300) -> dict:
    """Seed and measure; Django must be set up (this function calls django.setup() if it is not)."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "voiceagent.settings")
    django.setup()
    from django.db import connection
    from django.test import Client

    key, agent_id, seed_seconds = seed(n_calls)
    client = Client(SERVER_NAME="localhost", HTTP_AUTHORIZATION=f"Bearer {key}")
    path = f"/public/v1/calls?agentId={agent_id}&limit=100"
    for _ in range(20):  # warm-up: imports, caches, connection
        response = client.get(path)
    assert response.status_code == 200 and len(response.json()) == 100, response.content[:200]
    latencies = []
    for _ in range(requests):
        start = time.perf_counter()
        response = client.get(path)
        latencies.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200
    body = response.json()
    assert body[0]["startedAt"] > body[-1]["startedAt"]  # newest first
    return {
        "engine": connection.vendor,
        "calls_in_table": n_calls + 1000,
        "calls_of_agent": n_calls,
        "listed": len(body),
        "requests": requests,
        "p50_ms": round(statistics.median(latencies), 2),
        "p95_ms": round(_pct(latencies, 95), 2),
        "seed_seconds": round(seed_seconds, 1),
        "target_p50_ms": TARGET_P50_MS,
        "met": statistics.median(latencies) < TARGET_P50_MS,
    }


def own_database(name: str = "callsbench") -> None:
    """Point DATABASE_URL at a fresh database of the bench's own: PostgreSQL's database with `_<name>`
    appended (recreated) when DATABASE_URL names PostgreSQL, else the SQLite file var/bench-<name>.sqlite3."""
    from testing.stores import bench_database

    bench_database(name, ROOT / "var")
    os.environ.setdefault("LOG_LEVEL", "WARNING")


def migrated_database(name: str = "callsbench") -> None:
    """own_database(name), then Django set up and that database migrated: ready to seed."""
    own_database(name)
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "voiceagent.settings")
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()

    migrated_database()
    figures = run(args.calls, args.requests)
    print(
        f"GET /public/v1/calls?agentId=...&limit=100 ({figures['engine']}, {figures['calls_in_table']:,} calls in the "
        f"table, {figures['calls_of_agent']:,} of the agent, {figures['requests']} sequential requests via "
        f"django.test.Client): p50 {figures['p50_ms']:.2f} ms, p95 {figures['p95_ms']:.2f} ms "
        f"(target p50 < {TARGET_P50_MS:.0f} ms: {'met' if figures['met'] else 'NOT met'}); "
        f"seeding took {figures['seed_seconds']} s"
    )


if __name__ == "__main__":
    main()
