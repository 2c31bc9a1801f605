"""One upkeep sweep (calls/maintenance.py) in-process: spent session tokens past their expiry go, and
a failing job neither stops the others nor, in `manage.py calls_maintenance`, goes unnoticed."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from calls import maintenance
from realtime.models import UsedSessionToken
from testing.factories import CallFactory

pytestmark = pytest.mark.django_db


def spent(token_id: str, *, expired_minutes_ago: float) -> None:
    now = timezone.now()
    UsedSessionToken.objects.create(
        token_id=token_id,
        organization_id=uuid.uuid4(),
        agent_id=uuid.uuid4(),
        used_at=now - timedelta(minutes=expired_minutes_ago + 1),
        expires_at=now - timedelta(minutes=expired_minutes_ago),
    )


def test_spent_tokens_are_purged_once_expired_past_the_margin():
    spent("old", expired_minutes_ago=30)
    spent("recent", expired_minutes_ago=1)  # within the 5 minutes of margin: still refuses a reuse
    assert maintenance.run_maintenance()["purgedSessionTokens"] == 1
    assert list(UsedSessionToken.objects.values_list("token_id", flat=True)) == ["recent"]


def test_a_failing_job_does_not_stop_the_others(monkeypatch):
    spent("old", expired_minutes_ago=30)

    def broken(**kwargs):
        raise RuntimeError("database gone")

    monkeypatch.setattr("calls.services.call_close_stale", broken)
    done = maintenance.run_maintenance()
    assert done["closedCalls"] == 0 and done["purgedSessionTokens"] == 1
    with pytest.raises(RuntimeError, match="database gone"):
        maintenance.run_maintenance(strict=True)


def test_a_call_whose_process_stopped_its_heartbeat_is_failed_and_a_beating_one_is_kept(owner, make_agent, settings):
    from calls.models import Call, CallMessage

    settings.LIVENESS_EXPIRY_SECONDS = 60
    agent = make_agent(owner.organization)
    now = timezone.now()

    def call(*, heartbeat_seconds_ago: float) -> Call:
        started = now - timedelta(minutes=10)
        made = CallFactory(agent=agent, started_at=started, heartbeat_at=now - timedelta(seconds=heartbeat_seconds_ago))
        CallMessage.objects.create(
            call=made, role="assistant", content="Hello", occurred_at=started + timedelta(seconds=7), sequence=1
        )
        return made

    dead, alive = call(heartbeat_seconds_ago=90), call(heartbeat_seconds_ago=20)
    assert maintenance.run_maintenance()["closedCalls"] == 1
    dead.refresh_from_db()
    alive.refresh_from_db()
    # Well within CALLS_STALE_AFTER_SECONDS (an hour), yet the dead process's call is closed, at its last
    # sign of life: the heartbeat, later than its last message.
    assert (dead.status, dead.ended_at) == ("failed", dead.heartbeat_at)
    assert (dead.ended_reason, alive.ended_reason) == ("stale", None)
    assert dead.duration_seconds == 10 * 60 - 90
    assert alive.status == "active"
