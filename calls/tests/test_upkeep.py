"""One upkeep sweep (calls/maintenance.py) in-process: spent session tokens past their expiry go, and
a failing job neither stops the others nor, in `manage.py calls_maintenance`, goes unnoticed."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connection
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


@pytest.mark.skipif(connection.vendor == "postgresql", reason="PostgreSQL cannot hold the poisoned row")
def test_a_call_that_cannot_be_ended_does_not_stop_another_organizations_upkeep(owner, outsider, make_agent, caplog):
    """Organization A's stuck outbound call holds text stored before the edge refused it (a lone surrogate
    in its variables: its `call.ended` event cannot be written); organization B's unanswered call is past
    its ring limit. One sweep through `manage.py calls_maintenance` ends B's call and leaves A's for later."""
    import io
    import json

    from django.core.management import call_command

    from calls.models import Call, WebhookEndpoint
    from telephony.models import OutboundCall

    def stuck(persona, **fields):
        agent = make_agent(persona.organization)
        call = CallFactory(
            agent=agent, channel="phone", direction="outbound", status="ringing", to_number="+14155550142", **fields
        )
        OutboundCall.objects.create(call=call, placed_at=timezone.now() - timedelta(hours=2))
        return call

    poisoned = stuck(owner, variables={"name": "\ud800"})  # as an old row holds it (SQLite kept the escape)
    WebhookEndpoint.objects.create(
        organization=owner.organization,
        url="https://hooks.example.test/a",
        events=["call.ended"],
        secret="s" * 32,
        created_at=timezone.now(),
        updated_at=timezone.now(),
    )
    OutboundCall.objects.filter(pk=poisoned.pk).update(placed_at=timezone.now() - timedelta(hours=3))  # first
    unanswered = stuck(outsider)

    out = io.StringIO()
    call_command("calls_maintenance", stdout=out)

    assert json.loads(out.getvalue())["failedOutboundCalls"] == 1
    assert Call.objects.get(pk=unanswered.pk).status == "failed"
    assert Call.objects.get(pk=poisoned.pk).status == "ringing"  # left as it was, for the next sweep
    [line] = [record.getMessage() for record in caplog.records if record.levelname == "ERROR"]
    assert f"upkeep job failedOutboundCalls: row {poisoned.pk} failed" in line and "\n" not in line
    assert outsider.client.get("/public/v1/calls").status_code == 200
