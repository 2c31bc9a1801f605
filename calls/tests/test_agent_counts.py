"""callsToday and successRate in the agent list."""

from __future__ import annotations

from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from calls import services
from calls.models import Call


def _call(agent, *, status: str, started_ago: timedelta) -> Call:
    call = services.call_start(agent=agent, channel="web")
    if status != "active":
        services.call_finish(call=call, status=status)
    Call.objects.filter(pk=call.pk).update(started_at=timezone.now() - started_ago)
    return call


def _items(persona) -> dict[str, dict]:
    response = persona.client.get("/public/v1/agents")
    assert response.status_code == 200
    return {item["name"]: item for item in response.json()}


def test_calls_today_counts_calls_started_since_midnight_utc(owner, agent, make_agent):
    make_agent(owner.organization, name="Quiet")
    midnight = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    since_midnight = timezone.now() - midnight
    _call(agent, status="active", started_ago=timedelta(0))
    _call(agent, status="completed", started_ago=since_midnight - timedelta(microseconds=1))
    _call(agent, status="failed", started_ago=since_midnight + timedelta(seconds=1))  # yesterday

    items = _items(owner)

    assert items["Support"]["callsToday"] == 2
    assert items["Quiet"]["callsToday"] == 0


def test_success_rate_is_the_percentage_of_finished_calls_completed_in_7_days(owner, agent, make_agent):
    make_agent(owner.organization, name="Quiet")
    for _ in range(3):
        _call(agent, status="completed", started_ago=timedelta(days=1))
    _call(agent, status="failed", started_ago=timedelta(days=6))
    _call(agent, status="active", started_ago=timedelta(minutes=1))  # not finished: not counted
    _call(agent, status="failed", started_ago=timedelta(days=8))  # outside the window

    items = _items(owner)

    assert items["Support"]["successRate"] == 75.0
    assert items["Quiet"]["successRate"] == 0


def test_the_counts_do_not_add_queries_per_agent(owner, make_agent):
    for index in range(5):
        agent = make_agent(owner.organization, name=f"Agent {index}")
        _call(agent, status="completed", started_ago=timedelta(hours=1))
    _items(owner)  # the key's first use of the test also records last_used_at
    with CaptureQueriesContext(connection) as few:
        _items(owner)
    for index in range(5, 15):
        make_agent(owner.organization, name=f"Agent {index}")
    with CaptureQueriesContext(connection) as many:
        items = _items(owner)

    assert len(many) == len(few)
    assert items["Agent 0"]["successRate"] == 100.0 and items["Agent 0"]["callsToday"] in (0, 1)
