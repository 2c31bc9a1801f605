"""Call analytics benchmark (not a test): GET /public/v1/analytics/calls with 100,000 calls.

Seeds its own database (bench/calls_bench.py's own_database: var/bench-analytics.sqlite3, or the PostgreSQL
database named by DATABASE_URL with `_analytics` appended, recreated) with `--calls` calls of one
organization (bulk_create), spread evenly over the last 90 days: five agents, a tenth outbound, each with a
`customerId` variable among 1,000 customers and metadata `{"plan": one of four, "region": one of twelve,
"ref": a value of its own}`, ended and priced in USD (the last hundred still open); and 1,000 calls of a
second organization, never counted. Then it measures each grouping through the whole Django stack (URL
routing, middleware, API-key authentication, query validation, the one grouped SQL query, JSON rendering)
with django.test.Client, sequentially and after a warm-up, over the default range (the last 30 days: a third
of the calls) and over 90 days (all of them), the worst case too (metadata.ref: every call a group of its
own, 1,000 listed), and the dashboard's cost figures (calls.analytics.selectors.organization_costs, the usage
page's two queries). It prints the median and 95th percentile of each, and on PostgreSQL the scans of the
query plans (the (organization, started_at) index, call_org_started, or the whole table).

Usage: .venv/bin/python bench/analytics.py [--calls 100000] [--runs 30]
       DATABASE_URL=postgres://postgres@127.0.0.1:5432/voiceagent .venv/bin/python bench/analytics.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

AGENTS = ("Ava", "Max", "Reception", "Billing", "Sales")
PLANS = ("basic", "plus", "gold", "enterprise")
CUSTOMERS = 1000
REGIONS = 12
DAYS = 90
GROUPINGS = ("agent", "day", "direction", "variable.customerId", "metadata.plan")
# The worst case: a key whose value is new on every call (every call a group; the answer lists 1,000).
WORST = "metadata.ref"


def seed(n_calls: int) -> tuple[float, str, str]:
    """The calls in bulk; returns (seconds spent, the organization's API key, one agent's id)."""
    from django.db import connection
    from django.utils import timezone

    from accounts.services import organization_create
    from agents.models import Agent
    from calls.models import Call

    started = time.perf_counter()
    now = timezone.now()
    organization, issued = organization_create(name="Analytics bench", plan_code="agency")
    other, _ = organization_create(name="Another organization", plan_code="agency")
    agents = [
        Agent.objects.create(organization=organization, name=name, status="active", updated_at=now) for name in AGENTS
    ]
    stranger = Agent.objects.create(organization=other, name="Stranger", status="active", updated_at=now)
    spacing = timedelta(days=DAYS) / n_calls
    batch: list[Call] = []

    def call(index: int, agent: Agent, open_: bool) -> Call:
        at = now - spacing * (index + 1)
        seconds = 20 + index % 400
        return Call(
            organization_id=agent.organization_id,
            agent=agent,
            agent_name=agent.name,
            channel="phone",
            from_number=f"+1415555{index % 10000:04d}",
            to_number="+14155550123",
            direction="outbound" if index % 10 == 0 else "inbound",
            status="active" if open_ else "completed",
            started_at=at,
            ended_at=None if open_ else at + timedelta(seconds=seconds),
            duration_seconds=0 if open_ else seconds,
            variables={"customerId": f"cust-{index % CUSTOMERS:04d}", "firstName": "Sam"},
            metadata={"plan": PLANS[index % len(PLANS)], "region": f"r{index % REGIONS}", "ref": f"ref-{index}"},
            cost_total=None if open_ else Decimal(seconds) * Decimal("0.0021"),
            cost_currency="" if open_ else "USD",
        )

    for index in range(n_calls):
        batch.append(call(index, agents[index % len(agents)], open_=index < 100))
        if len(batch) == 5000:
            Call.objects.bulk_create(batch)
            batch.clear()
    batch += [call(index, stranger, open_=False) for index in range(1000)]
    Call.objects.bulk_create(batch)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return time.perf_counter() - started, issued.raw_key, str(agents[0].pk)


def _timed(function: Any, runs: int) -> tuple[float, float, Any]:
    function()  # warm-up
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = function()
        times.append((time.perf_counter() - start) * 1000)
    p95 = statistics.quantiles(times, n=20)[18] if len(times) >= 2 else times[0]
    return statistics.median(times), p95, result


def _plan(grouping: str, organization_id: Any, days: int) -> str:
    """PostgreSQL's plan of the grouped query (EXPLAIN): which index it reads the calls with."""
    from django.db.models import Count
    from django.utils import timezone

    from calls.analytics.serializers import grouping_of
    from calls.models import Call

    end = timezone.now()
    calls = Call.objects.filter(organization_id=organization_id, started_at__gte=end - timedelta(days=days))
    calls = calls.filter(started_at__lt=end).order_by()
    found = calls.annotate(key=grouping_of(grouping).expression()).values("key", "cost_currency")
    plan = found.annotate(calls=Count("pk")).explain()
    scans = [line.strip().removeprefix("->  ").split("  (")[0] for line in plan.splitlines() if "Scan" in line]
    return "; ".join(scans)


def run(n_calls: int, runs: int) -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "voiceagent.settings")
    django.setup()
    from django.db import connection
    from django.test import Client
    from django.utils import timezone

    from accounts.models import Organization

    seconds, key, agent_id = seed(n_calls)
    organization_id = Organization.objects.get(name="Analytics bench").pk
    print(
        f"{connection.vendor}: {n_calls:,} calls over {DAYS} days (+1,000 of another organization), seeded in {seconds:.0f} s"
    )
    client = Client(SERVER_NAME="localhost", HTTP_AUTHORIZATION=f"Bearer {key}")
    ninety = f"&from={(timezone.now() - timedelta(days=DAYS)).date()}"
    ranges = {"30 days (default)": "", f"{DAYS} days": ninety}
    print(f"{'groupBy':<22} {'range':<18} {'calls':>7} {'rows':>5} {'p50 ms':>8} {'p95 ms':>8}")
    queries = [(grouping, label, extra) for grouping in GROUPINGS for label, extra in ranges.items()]
    queries.append((f"agent&agentId={agent_id}", f"{DAYS} days", ranges[f"{DAYS} days"]))
    queries += [(WORST, label, extra) for label, extra in ranges.items()]
    for grouping, label, extra in queries:

        def get(grouping: str = grouping, extra: str = extra) -> dict[str, Any]:
            response = client.get(f"/public/v1/analytics/calls?groupBy={grouping}{extra}")
            assert response.status_code == 200, response.content[:300]
            body: dict[str, Any] = response.json()
            return body

        p50, p95, body = _timed(get, runs)
        shown = grouping.replace("&agentId=", " agentId=")[:22]
        print(f"{shown:<22} {label:<18} {body['total']['calls']:>7,} {len(body['rows']):>5} {p50:>8.1f} {p95:>8.1f}")
    from calls.analytics.selectors import organization_costs

    organizations = list(Organization.objects.values_list("pk", flat=True))
    p50, p95, _ = _timed(lambda: organization_costs(organization_ids=organizations, days=30), runs)
    print(f"{'usage page cost figures (organization_costs, 30 days)':<57} {p50:>8.1f} {p95:>8.1f}")
    if connection.vendor == "postgresql":
        # Over a third of a table that is nearly all this organization's, PostgreSQL may rather scan it whole.
        for days in (30, 1):
            for grouping in GROUPINGS:
                print(f"plan of groupBy={grouping} over {days} days: {_plan(grouping, organization_id, days)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()

    import calls_bench  # bench/ is on sys.path: this script's folder

    calls_bench.migrated_database("analytics")
    run(args.calls, args.runs)


if __name__ == "__main__":
    main()
