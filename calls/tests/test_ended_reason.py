"""endedReason on GET /public/v1/calls and /public/v1/calls/{id}: null while a call is active, the
reason call_finish was given once it ended (the first one: finishing twice changes nothing), by default
caller-hung-up for a completed call and error for a failed one; the stale-call sweep
(`manage.py calls_maintenance`) closes a call whose process died with `stale`."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from calls import services
from calls.models import Call, EndedReason
from testing.factories import CallFactory


def summaries(owner) -> dict[str, dict]:
    response = owner.client.get("/public/v1/calls")
    assert response.status_code == 200
    return {item["id"]: item for item in response.json()}


def detail(owner, call: Call) -> dict:
    response = owner.client.get(f"/public/v1/calls/{call.pk}")
    assert response.status_code == 200
    return response.json()


def test_an_active_call_has_no_ended_reason_and_a_finished_one_has_the_reason_given(owner, agent):
    active = services.call_start(agent=agent, channel="web")
    transferred = services.call_start(agent=agent, channel="phone")
    services.call_finish(call=transferred, status="completed", ended_reason="transferred")

    listed = summaries(owner)
    assert listed[str(active.pk)]["endedReason"] is None
    assert listed[str(transferred.pk)]["endedReason"] == "transferred"
    assert detail(owner, active)["endedReason"] is None
    assert detail(owner, transferred)["endedReason"] == "transferred"


def test_the_first_reason_stays_when_a_call_is_finished_twice(owner, agent):
    call = services.call_start(agent=agent, channel="web")
    services.call_finish(call=call, status="completed", ended_reason="silence-timeout")
    services.call_finish(call=call, status="failed", ended_reason="connection-lost")
    assert (detail(owner, call)["status"], detail(owner, call)["endedReason"]) == ("completed", "silence-timeout")


@pytest.mark.parametrize(("status", "reason"), [("completed", "caller-hung-up"), ("failed", "error")])
def test_without_a_reason_a_call_ends_with_the_default_of_its_status(owner, agent, status, reason):
    call = services.call_finish(call=services.call_start(agent=agent, channel="web"), status=status)
    assert call.ended_reason == reason
    assert detail(owner, call)["endedReason"] == reason


def test_a_reason_outside_the_closed_list_is_refused(agent):
    call = services.call_start(agent=agent, channel="web")
    with pytest.raises(ValueError, match="ended_reason must be one of"):
        services.call_finish(call=call, status="completed", ended_reason="hung-up-by-cat")
    assert Call.objects.get(pk=call.pk).status == "active"


def test_the_list_is_the_documented_one():
    assert set(EndedReason.values) == {
        "caller-hung-up",
        "agent-ended-call",
        "transferred",
        "silence-timeout",
        "max-duration-reached",
        "assistant-request-failed",
        "provider-error",
        "connection-lost",
        "no-answer",
        "busy",
        "canceled",
        "voicemail",
        "server-shutdown",
        "stale",
        "error",
    }


def test_the_stale_sweep_closes_a_call_whose_process_died_as_stale(owner, agent, settings):
    settings.LIVENESS_EXPIRY_SECONDS = 60
    now = timezone.now()
    dead = CallFactory(agent=agent, started_at=now - timedelta(minutes=5), heartbeat_at=now - timedelta(minutes=2))
    out = StringIO()
    call_command("calls_maintenance", stdout=out)
    assert '"closedCalls": 1' in out.getvalue()
    assert (detail(owner, dead)["status"], detail(owner, dead)["endedReason"]) == ("failed", "stale")
