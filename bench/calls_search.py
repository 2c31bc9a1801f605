"""Calls search benchmark (not a test): the dashboard's calls list searched with 100,000 calls.

Seeds its own database (bench/calls_bench.py's own_database: var/bench-callssearch.sqlite3, or the PostgreSQL
database named by DATABASE_URL with `_callssearch` appended, recreated) with `--calls` finished calls of
two organizations, each with a four-message transcript drawn from a pool of sentences: "order" is said in
about half of the calls, "refund" in a fifth, "zeppelin" in one call in a thousand. Then it measures,
sequentially and after a warm-up:

- the selector (calls.selectors.call_search): the first page of 100 calls, newest first, and the count of
  all matches (what the admin's paginator asks), for a rare word, a common word, two words, the start of a
  call id and an agent's name;
- the whole dashboard page: GET /admin/calls/call/?q=... through django.test.Client as a superuser.

It prints the median and 95th percentile of each, and on PostgreSQL whether the transcript search used
the GIN index of calls/migrations/0005 (EXPLAIN).

Usage: .venv/bin/python bench/calls_search.py [--calls 100000] [--runs 15]
       DATABASE_URL=postgres://postgres@127.0.0.1:5432/voiceagent .venv/bin/python bench/calls_search.py
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SENTENCES = (
    "Hello, thanks for calling, how can I help you today?",
    "I would like to know where my order is.",
    "Your order shipped yesterday and arrives on Friday.",
    "Can I get a refund for the broken lamp?",
    "I have booked you for Thursday at four in the afternoon.",
    "Could you spell your last name for me please?",
    "The technician will call you thirty minutes before arriving.",
    "Is there anything else I can help you with?",
    "My invoice shows a charge I do not recognise.",
    "I am transferring you to a colleague now.",
)
RARE = "I saw a zeppelin over the warehouse this morning."


def seed(n_calls: int) -> tuple[float, str]:
    """Calls and their messages in bulk; returns (seconds spent, one call id)."""
    from django.db import connection
    from django.utils import timezone

    from accounts.services import organization_create
    from agents.models import Agent
    from calls.models import Call, CallMessage

    started = time.perf_counter()
    rng = random.Random(7)
    now = timezone.now()
    agents = []
    for name in ("Northwind Dental", "Acme Plumbing"):
        organization, _ = organization_create(name=name, plan_code="agency")
        agents += [
            Agent.objects.create(organization=organization, name=f"{agent} of {name}", status="active", updated_at=now)
            for agent in ("Ava", "Max")
        ]
    calls: list[Call] = []
    messages: list[CallMessage] = []

    def flush() -> None:
        Call.objects.bulk_create(calls)
        CallMessage.objects.bulk_create(messages)
        calls.clear()
        messages.clear()

    sequence = 0
    for index in range(n_calls):
        agent = agents[index % len(agents)]
        at = now - timedelta(seconds=29 * index)
        call = Call(
            organization_id=agent.organization_id,
            agent=agent,
            agent_name=agent.name,
            channel="phone",
            from_number=f"+1415555{index % 10000:04d}",
            to_number="+14155550123",
            status="completed" if index % 10 else "failed",
            started_at=at,
            ended_at=at + timedelta(seconds=90),
            duration_seconds=90,
            billable_seconds=90,
            included_seconds=90,
            usage_classification="included",
        )
        calls.append(call)
        lines = rng.sample(SENTENCES, 4)
        if index % 1000 == 500:
            lines[2] = RARE
        for number, line in enumerate(lines):
            sequence += 1
            messages.append(
                CallMessage(
                    call=call,
                    role="user" if number % 2 == 0 else "assistant",
                    content=line,
                    occurred_at=at + timedelta(seconds=5 + 20 * number),
                    sequence=sequence,
                )
            )
        if len(calls) == 2000:
            flush()
    flush()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    some_call = Call.objects.order_by("started_at").values_list("pk", flat=True)[n_calls // 3]
    return time.perf_counter() - started, str(some_call)


def _timed(function: Any, runs: int) -> tuple[float, float, Any]:
    function()  # warm-up
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = function()
        times.append((time.perf_counter() - start) * 1000)
    p95 = statistics.quantiles(times, n=20)[18] if len(times) >= 2 else times[0]
    return statistics.median(times), p95, result


def run(n_calls: int, runs: int) -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "voiceagent.settings")
    django.setup()
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment

    from calls import selectors
    from calls.models import Call
    from calls.selectors import call_search

    seconds, call_id = seed(n_calls)
    print(f"{connection.vendor}: {n_calls:,} calls, {4 * n_calls:,} messages, seeded in {seconds:.0f} s")
    User.objects.create_superuser("bench", "bench@example.com", "pw-bench-1234")
    setup_test_environment()  # responses carry their template context (the page's result count)
    client = Client(SERVER_NAME="localhost")
    client.force_login(User.objects.get(username="bench"))

    searches = {
        "rare word (zeppelin)": "zeppelin",
        "common word (order)": "order",
        "two words (refund lamp)": "refund lamp",
        "start of a call id (8 characters)": call_id[:8],
        "agent name (Ava)": "Ava",
    }
    print(f"{'search':<34} {'matches':>8} {'selector p50/p95 ms':>21} {'page p50/p95 ms':>18}")
    for label, text in searches.items():

        def select(text: str = text) -> int:
            found = call_search(calls=Call.objects.all(), text=text, transcripts=True)
            list(found.order_by("-started_at", "-id")[:100])
            return found.count()

        def page(text: str = text) -> int:
            response = client.get("/admin/calls/call/", {"q": text})
            assert response.status_code == 200
            return response.context["cl"].result_count

        s50, s95, matches = _timed(select, runs)
        p50, p95, listed = _timed(page, runs)
        assert listed == matches, (label, listed, matches)
        print(f"{label:<34} {matches:>8,} {s50:>10.1f} / {s95:<8.1f} {p50:>8.1f} / {p95:<8.1f}")

    if connection.vendor == "postgresql":
        # The index serves the query that lists the calls a word was said in; with ID_LIST_MAX = 0 that
        # query is a subquery of the search, so one plan shows it.
        selectors.ID_LIST_MAX = 0
        plan = call_search(calls=Call.objects.all(), text="zeppelin", transcripts=True).explain()
        used = "callmessage_content_search" in plan
        print(f"transcript search uses the GIN index callmessage_content_search: {'yes' if used else 'NO'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()

    import calls_bench  # bench/ is on sys.path: this script's folder

    calls_bench.migrated_database("callssearch")
    run(args.calls, args.runs)


if __name__ == "__main__":
    main()
