"""Answering-machine detection on the telephony side: the `calls.create` parameters an agent asks for, and
Twilio's signed asynchronous AMD callback (the verdict kept on the call, logged, and told to the call's
live stream through the channel layer)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.layers import get_channel_layer
from django.test import AsyncClient, Client

from agents.models import AgentStatus
from calls.logging import flush_agent_logs
from calls.models import AgentLog, Call
from telephony.groups import call_group
from telephony.models import PhoneNumber
from telephony.outbound.services import outbound_call_create
from telephony.voicemail import AMD_PATH, amd_callback_url, amd_params
from testing.twilio_webhooks import (
    PUBLIC_BASE_URL,
    call_sid,
    make_account,
    public_settings,  # noqa: F401 - fixture
    sign,
)
from testing.twilio_webhooks import (
    amd_params as amd_callback,
)

pytestmark = pytest.mark.usefixtures("public_settings", "close_db_threads")

CALLBACK = PUBLIC_BASE_URL + AMD_PATH


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ({"detection": "off", "action": "hang-up", "message": ""}, {}),
        ({"detection": "off", "action": "leave-message", "message": "Hi."}, {}),
        (
            {"detection": "provider", "action": "hang-up", "message": ""},
            {
                "machine_detection": "Enable",
                "async_amd": "true",
                "async_amd_status_callback": CALLBACK,
                "async_amd_status_callback_method": "POST",
            },
        ),
        (
            {"detection": "provider", "action": "leave-message", "message": "Hi, call us back."},
            {
                "machine_detection": "DetectMessageEnd",
                "async_amd": "true",
                "async_amd_status_callback": CALLBACK,
                "async_amd_status_callback_method": "POST",
            },
        ),
    ],
)
def test_amd_params_are_the_calls_create_arguments_of_the_agents_setting(owner, make_agent, setting, expected):
    agent = make_agent(owner.organization, voicemail=setting)
    assert amd_callback_url() == CALLBACK
    assert amd_params(agent, amd_callback_url()) == expected


def test_amd_params_take_twilios_own_argument_names():
    """Every key is an argument of twilio's CallList.create (a typo would be a TypeError at placement)."""
    import inspect

    from twilio.rest.api.v2010.account.call import CallList

    accepted = set(inspect.signature(CallList.create).parameters)
    assert {"machine_detection", "async_amd", "async_amd_status_callback", "async_amd_status_callback_method"} <= (
        accepted
    )


@pytest.fixture
def outbound_call(owner: Any, make_agent: Any) -> Call:
    make_account(owner.organization)
    agent = make_agent(
        owner.organization,
        status=AgentStatus.ACTIVE,
        voicemail={"detection": "provider", "action": "hang-up", "message": ""},
    )
    number = PhoneNumber.objects.create(organization=owner.organization, phone_number="+14155550100")
    call = outbound_call_create(agent=agent, phone_number=number, to="+14155550177")
    call.provider_call_id = call_sid()  # what placing the call keeps (the outbound part)
    call.save(update_fields=["provider_call_id"])
    return call


def _post(client: Client, params: dict[str, str], token: str | None = None) -> Any:
    signature = sign(PUBLIC_BASE_URL + AMD_PATH, params, **({"token": token} if token else {}))
    return client.post(AMD_PATH, params, headers={"X-Twilio-Signature": signature})


def test_a_verdict_is_kept_on_the_call_and_logged(client: Client, outbound_call: Call) -> None:
    params = amd_callback(sid=outbound_call.provider_call_id, answered_by="machine_end_beep", duration_ms=4210)
    response = _post(client, params)
    assert response.status_code == 204
    outbound_call.refresh_from_db()
    assert outbound_call.answered_by == "machine_end_beep"
    flush_agent_logs()
    line = AgentLog.objects.get(content__message="answering-machine detection")
    assert line.agent_id == outbound_call.agent_id
    assert line.content["answeredBy"] == "machine_end_beep"
    assert line.content["detectionMs"] == 4210
    assert line.content["callId"] == str(outbound_call.pk)


def test_unsigned_forged_unknown_and_other_organizations_callbacks_change_nothing(
    client: Client, outbound_call: Call, outsider: Any
) -> None:
    params = amd_callback(sid=outbound_call.provider_call_id, answered_by="human")
    assert client.post(AMD_PATH, params).status_code == 403
    assert _post(client, params, token="0" * 32).status_code == 403
    assert client.get(AMD_PATH).status_code == 405
    # An AnsweredBy Twilio does not send, and a CallSid of no call: accepted (Twilio would retry), ignored.
    assert _post(client, {**params, "AnsweredBy": "robot"}).status_code == 204
    assert _post(client, {**params, "CallSid": call_sid()}).status_code == 204
    # Another organization's account naming this CallSid does not reach it.
    other_sid, other_token = "AC" + "3d" * 16, "c" * 32
    make_account(outsider.organization, account_sid=other_sid, auth_token=other_token)
    foreign = amd_callback(sid=outbound_call.provider_call_id, answered_by="machine_start", account_sid=other_sid)
    assert _post(client, foreign, token=other_token).status_code == 204
    outbound_call.refresh_from_db()
    assert outbound_call.answered_by == ""


@pytest.mark.django_db(transaction=True)
async def test_the_live_stream_of_the_call_is_told_the_verdict(outbound_call: Call) -> None:
    """The media-stream consumer holding the call (any process) is a member of call_group(CallSid)."""
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(call_group(outbound_call.provider_call_id), channel)
    params = amd_callback(sid=outbound_call.provider_call_id, answered_by="machine_start", duration_ms=1800)
    signature = sign(PUBLIC_BASE_URL + AMD_PATH, params)
    response = await AsyncClient().post(AMD_PATH, params, headers={"X-Twilio-Signature": signature})
    assert response.status_code == 204
    received = await asyncio.wait_for(layer.receive(channel), 5)
    assert received == {"type": "call.answered_by", "answered_by": "machine_start", "duration_ms": 1800}
    row = await Call.objects.aget(pk=outbound_call.pk)
    assert row.answered_by == "machine_start"


def test_a_stream_token_may_name_the_outbound_call_the_stream_takes_over(outbound_call: Call) -> None:
    from telephony.streams import stream_token_issue, stream_token_redeem

    common = {
        "organization_id": outbound_call.organization_id,
        "agent_id": outbound_call.agent_id,
        "phone_number_id": outbound_call.outbound.phone_number_id,
        "call_sid": outbound_call.provider_call_id,
        "from_number": outbound_call.from_number,
        "to_number": outbound_call.to_number,
    }
    assert stream_token_redeem(stream_token_issue(**common, call_id=outbound_call.pk)).call_id == outbound_call.pk
    assert stream_token_redeem(stream_token_issue(**common)).call_id is None  # an inbound call's token
