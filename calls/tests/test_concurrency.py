"""Concurrent finishes with real threads and real database locking (PostgreSQL row locks; SQLite
IMMEDIATE transactions on a file database)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from calls import services
from calls.models import Call

pytestmark = pytest.mark.django_db(transaction=True)


def _run_together(jobs: list[Callable[[], object]]) -> list[object]:
    barrier = threading.Barrier(len(jobs))
    results: list[object] = [None] * len(jobs)

    def run(index: int) -> None:
        try:
            connection.ensure_connection()  # connect first, so that the jobs really start together
            barrier.wait(timeout=30)
            results[index] = jobs[index]()
        except Exception as exc:  # noqa: BLE001 - reported by the assertions below
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    return results


def _calls_of(agent, count: int, seconds: int) -> list[Call]:
    calls = []
    for _ in range(count):
        call = services.call_start(agent=agent, channel="phone")
        Call.objects.filter(pk=call.pk).update(started_at=timezone.now() - timedelta(seconds=seconds, milliseconds=300))
        calls.append(Call.objects.get(pk=call.pk))
    return calls


def test_calls_finishing_at_once_never_take_the_same_included_minute(owner, make_agent):
    plan = owner.organization.plan
    plan.included_minutes = 1
    plan.save(update_fields=["included_minutes"])
    agent = make_agent(owner.organization, status="active")
    calls = _calls_of(agent, 10, 25)  # each bills 30 s; the allowance holds 60 s

    results = _run_together([lambda c=c: services.call_finish(call=c, status="completed") for c in calls])

    assert not [r for r in results if isinstance(r, Exception)], results
    rows = list(Call.objects.filter(organization=owner.organization))
    assert sum(r.included_seconds for r in rows) == 60
    assert sorted(r.usage_classification for r in rows) == ["included"] * 2 + ["overage"] * 8
    assert all(r.included_seconds + r.overage_seconds == r.billable_seconds == 30 for r in rows)


def test_a_call_finished_twice_at_once_is_billed_once(owner, make_agent):
    agent = make_agent(owner.organization, status="active")
    (call,) = _calls_of(agent, 1, 45)

    results = _run_together(
        [
            lambda s=s: services.call_finish(call=Call.objects.get(pk=call.pk), status=s)
            for s in ("completed", "failed") * 2
        ]
    )

    assert not [r for r in results if isinstance(r, Exception)], results
    row = Call.objects.get(pk=call.pk)
    assert {r.status for r in results} == {row.status}
    assert {r.ended_at for r in results} == {row.ended_at}
    assert (row.billable_seconds, row.included_seconds) == (50, 50)
