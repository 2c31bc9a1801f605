"""Twilio's call status callbacks: a final status ends the call's live session through the channel
layer (wherever its process is), and a call whose session is gone is finished here, exactly once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.test import AsyncClient, Client

from agents.models import AgentStatus
from calls.models import Call, CallChannel, CallStatus
from calls.services import call_finish, call_start
from telephony.groups import call_group
from testing.twilio_webhooks import (
    PUBLIC_BASE_URL,
    call_sid,
    make_account,
    public_settings,  # noqa: F401 - fixture
    sign,
    status_params,
)

STATUS = "/telephony/twilio/status"

pytestmark = pytest.mark.usefixtures("public_settings")


@pytest.fixture
def open_call(owner: Any, make_agent: Any, settings: Any) -> Call:
    settings.TELEPHONY_CALL_END_GRACE_SECONDS = 0.3
    make_account(owner.organization)
    agent = make_agent(owner.organization, status=AgentStatus.ACTIVE)
    return call_start(
        agent=agent,
        channel=CallChannel.PHONE,
        from_number="+14155550199",
        to_number="+14155550123",
        provider_call_id=call_sid(),
    )


def _headers(params: dict[str, str]) -> dict[str, str]:
    return {"X-Twilio-Signature": sign(PUBLIC_BASE_URL + STATUS, params)}


def test_a_completed_call_whose_session_is_gone_is_finished_once(client: Client, open_call: Call) -> None:
    params = status_params(sid=open_call.provider_call_id, status="completed")

    response = client.post(STATUS, params, headers=_headers(params))

    assert response.status_code == 204
    open_call.refresh_from_db()
    assert open_call.status == CallStatus.COMPLETED
    assert open_call.ended_reason == "caller-hung-up"
    finished = (open_call.ended_at, open_call.billable_seconds, open_call.duration_seconds)
    assert open_call.ended_at is not None

    # Twilio retries, or sends the same final status again: nothing changes, nothing is billed twice.
    again = client.post(STATUS, params, headers=_headers(params))
    assert again.status_code == 204
    open_call.refresh_from_db()
    assert (open_call.ended_at, open_call.billable_seconds, open_call.duration_seconds) == finished
    assert Call.objects.filter(organization=open_call.organization).exclude(status=CallStatus.ACTIVE).count() == 1


@pytest.mark.parametrize(
    ("twilio_status", "reason"),
    [("busy", "busy"), ("failed", "provider-error"), ("no-answer", "no-answer"), ("canceled", "caller-hung-up")],
)
def test_other_final_statuses_finish_an_open_call_as_failed(
    client: Client, open_call: Call, twilio_status: str, reason: str
) -> None:
    params = status_params(sid=open_call.provider_call_id, status=twilio_status)
    assert client.post(STATUS, params, headers=_headers(params)).status_code == 204
    open_call.refresh_from_db()
    assert open_call.status == CallStatus.FAILED
    assert open_call.ended_reason == reason


@pytest.mark.parametrize("twilio_status", ["ringing", "in-progress", "queued"])
def test_a_status_that_is_not_final_changes_nothing(client: Client, open_call: Call, twilio_status: str) -> None:
    params = status_params(sid=open_call.provider_call_id, status=twilio_status)
    assert client.post(STATUS, params, headers=_headers(params)).status_code == 204
    open_call.refresh_from_db()
    assert open_call.status == CallStatus.ACTIVE


def test_an_unsigned_or_mis_signed_callback_is_refused_and_the_call_stays_open(client: Client, open_call: Call) -> None:
    params = status_params(sid=open_call.provider_call_id, status="completed")
    assert client.post(STATUS, params).status_code == 403
    forged = {"X-Twilio-Signature": sign(PUBLIC_BASE_URL + STATUS, params, token="0" * 32)}
    assert client.post(STATUS, params, headers=forged).status_code == 403
    open_call.refresh_from_db()
    assert open_call.status == CallStatus.ACTIVE


def test_a_callback_for_another_organizations_call_sid_does_not_touch_it(
    client: Client, open_call: Call, outsider: Any
) -> None:
    other_sid, other_token = "AC" + "3d" * 16, "c" * 32
    make_account(outsider.organization, account_sid=other_sid, auth_token=other_token)
    params = status_params(sid=open_call.provider_call_id, status="completed")
    params["AccountSid"] = other_sid
    headers = {"X-Twilio-Signature": sign(PUBLIC_BASE_URL + STATUS, params, token=other_token)}
    assert client.post(STATUS, params, headers=headers).status_code == 204
    open_call.refresh_from_db()
    assert open_call.status == CallStatus.ACTIVE


@pytest.mark.django_db(transaction=True)
async def test_a_live_stream_is_told_the_call_ended_and_ends_it_itself(open_call: Call, settings: Any) -> None:
    """The media-stream consumer holding the call (any process) is a member of call_group(CallSid)."""
    settings.TELEPHONY_CALL_END_GRACE_SECONDS = 5
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(call_group(open_call.provider_call_id), channel)
    received: list[dict[str, Any]] = []

    async def live_stream() -> None:
        received.append(await layer.receive(channel))
        # The consumer's database work runs in its own context (here: not on the thread the test
        # client's sync middleware chain holds while the view runs).
        await sync_to_async(call_finish, thread_sensitive=False)(call=open_call, status=CallStatus.COMPLETED)

    stream = asyncio.create_task(live_stream())
    params = status_params(sid=open_call.provider_call_id, status="completed")
    loop = asyncio.get_running_loop()
    started = loop.time()
    response = await AsyncClient().post(STATUS, params, headers=_headers(params))
    elapsed = loop.time() - started
    await stream

    assert response.status_code == 204
    assert received == [{"type": "call.ended", "status": "completed"}]
    assert elapsed < 4  # answered as soon as the session closed the call, not after the grace period
    row = await Call.objects.aget(pk=open_call.pk)
    assert row.status == CallStatus.COMPLETED and row.ended_at == open_call.ended_at


def test_call_group_names_are_valid_channel_layer_group_names() -> None:
    import re

    assert call_group("CA" + "a1" * 16) == "call.CA" + "a1" * 16
    odd = call_group("CA x/y:z" + "9" * 200)
    assert re.fullmatch(r"[A-Za-z0-9._-]{1,99}", odd)
