"""Telnyx end to end through the project's ASGI application in the test's process (testing/inprocess.py):
Telnyx's signed Call Control events, a loopback stand-in for its REST API (TELNYX_API_BASE_URL) that
records every command, and its bidirectional media stream (testing/telnyx.py: Telnyx's field names),
talking to the engine with a scripted OpenAI-compatible brain (testing/chat_server.py).

- an incoming call is answered with a bidirectional RTP stream (without `stream_bidirectional_mode: rtp`
  the caller would hear nothing) whose token comes back in the stream's `start`; the agent greets and
  answers; the caller's hang-up ends the call `completed` / `caller-hung-up`;
- the agent's transfer is Telnyx's transfer command, and the agent does not hang up the transferred call;
- the agent ending the call, and POST /calls/{id}/hang-up, hang it up at Telnyx (its call outlives the
  stream);
- an outbound call dials with the stream and its webhook URL, rings, is answered, ends; busy ends `busy`;
- events that Telnyx's key did not sign, stale ones and other connections' are refused; a number nobody
  answers and a full organization hear a sorry, then are hung up.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.management import CommandError

from accounts.models import Plan
from calls.models import Call
from realtime.tokens import CLOSE_ENGINE_ERROR
from telephony.models import SetupStatus
from telephony.outbound.dispatcher import outbound_dispatch
from telephony.services.numbers import phone_number_assign, phone_number_claim
from testing.calls import wait_call
from testing.chat_server import Call as ScriptedCall
from testing.chat_server import ChatServer, Text, Tools
from testing.commands import settelephony
from testing.inprocess import InProcessServer, serving
from testing.telnyx import (
    API_KEY,
    CONNECTION_ID,
    PUBLIC_KEY,
    Command,
    TelnyxStream,
    command_done,
    commands,
    control_id,
    dialed,
    event,
    hangup,
    incoming,
    make_telnyx_account,
    signed,
    stream_token,
    telnyx_error,
)
from testing.twilio_stream import greeted, is_event, quiet
from testing.waiting import polled
from testing.webhooks import LoopbackReceiver, Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

NUMBER, CALLER, HANDOFF = "+14155550100", "+14155550199", "+14155550177"
EVENTS = "/telephony/telnyx/events"
GREETING = "Thanks for calling Acme."


def answers(body: dict[str, Any]) -> Any:
    """The brain: a key pressed asks for a person (0), to end (9), or a question (anything else)."""
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        return Text("One moment please.")
    turn = messages[-1].get("content") or ""
    if turn.endswith("0"):
        return Tools(ScriptedCall("transfer_call", {"reason": "asked for a person"}))
    if turn.endswith("9"):
        return Tools(ScriptedCall("end_call", {}))
    return Text("We open at nine.")


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    with ChatServer(fallback=answers) as scripted:
        yield scripted


@pytest.fixture
def telnyx_api() -> Iterator[LoopbackReceiver]:
    with LoopbackReceiver(default=command_done()) as api:
        yield api


@pytest.fixture
def server(
    settings: Any, chat: ChatServer, telnyx_api: LoopbackReceiver, realtime_settings: Any
) -> Iterator[InProcessServer]:
    values = {
        "LLM_PROVIDER": "openai",
        "LLM_BASE_URL": chat.base_url,
        "LLM_MODEL": "scripted-model",
        "LLM_API_KEY": "x",
        "TELNYX_API_BASE_URL": telnyx_api.base,
        "TELEPHONY_CALL_END_GRACE_SECONDS": 10,
    }
    with serving(settings, values, public=True) as started:
        yield started


@pytest.fixture
def ava(owner: Any, make_agent: Any, realtime_settings: Any) -> Any:
    agent = make_agent(
        owner.organization,
        name="Ava",
        status="active",
        instructions="You answer the callers of Acme.",
        greeting_type="static",
        static_greeting=GREETING,
        keypad={"enabled": True, "timeoutMs": 300},
    )
    make_telnyx_account(owner.organization)
    agent.number = phone_number_claim(organization=owner.organization, number=NUMBER)
    phone_number_assign(
        organization=owner.organization, agent=agent, phone_number_id=agent.number.pk, handoff_phone_number=HANDOFF
    )
    return agent


async def post_event(server: InProcessServer, body: dict[str, Any], *, query: str = "", **signing: Any) -> int:
    raw, headers = signed(body, **signing)
    async with server.ahttp() as client:
        response = await client.post(EVENTS + query, content=raw, headers=headers)
    return response.status_code


async def sent(api: LoopbackReceiver, action: str, count: int = 1, timeout: float = 15) -> list[Command]:
    """The `action` commands the service sent Telnyx, once there are `count`."""
    await api.until(
        lambda: len([c for c in commands(api.requests) if c.action == action]) >= count,
        what=f"{count} {action} commands",
        timeout=timeout,
    )
    return [c for c in commands(api.requests) if c.action == action]


async def answered_call(server: InProcessServer, api: LoopbackReceiver, call_control_id: str) -> TelnyxStream:
    """Telnyx's incoming call event, the service's answer, and the stream Telnyx opens for it."""
    assert await post_event(server, incoming(call_control_id, to=NUMBER)) == 200
    [answer] = [c for c in await sent(api, "answer") if c.call_control_id == call_control_id]
    return TelnyxStream(answer.body["stream_url"], stream_token(answer.body), call_sid=call_control_id)


async def detail(owner: Any, call: Call) -> dict[str, Any]:
    response = await sync_to_async(owner.client.get)(f"/public/v1/calls/{call.pk}")
    assert response.status_code == 200, response.content
    result: dict[str, Any] = response.json()
    return result


# --- incoming calls ------------------------------------------------------------------------------


async def test_an_incoming_call_is_answered_with_a_bidirectional_stream_and_the_agent_talks(
    server, owner, ava, telnyx_api, chat
):
    call_control_id = control_id()
    stream = await answered_call(server, telnyx_api, call_control_id)
    [answer] = commands(telnyx_api.requests)
    assert answer.request.headers["authorization"] == f"Bearer {API_KEY}"
    assert answer.body["stream_url"] == f"{server.ws_url}/telephony/telnyx/stream"
    assert (answer.body["stream_bidirectional_mode"], answer.body["stream_bidirectional_codec"]) == ("rtp", "PCMU")
    assert (answer.body["stream_track"], answer.body["stream_codec"]) == ("inbound_track", "PCMU")

    async with stream:
        await stream.start()
        greeting_end = await greeted(stream)
        media = [item.message for item in stream.messages if item.message["event"] == "media"]
        assert media and all(set(message) == {"event", "media"} for message in media)  # Telnyx's shape
        assert len(stream.played) > 8000  # more than a second of the greeting reached the caller
        call = await wait_call(call_control_id)
        assert (call.status, call.channel, call.direction) == ("active", "phone", "inbound")
        await stream.dtmf("4")
        line = asyncio.create_task(stream.silence(20))
        await quiet(stream, after=greeting_end)  # the answer to the key
        # The caller hangs up: Telnyx stops the stream and sends the call's hang-up event.
        await stream.stop()
        assert await stream.wait_closed() == 1000
        line.cancel()
        await asyncio.gather(line, return_exceptions=True)
    assert await post_event(server, hangup(call_control_id)) == 200

    call = await wait_call(call_control_id, status="completed")
    assert call.ended_reason == "caller-hung-up"
    messages = [(m["role"], m["content"]) for m in (await detail(owner, call))["messages"]]
    assert ("user", "the caller entered 4") in messages and ("assistant", "We open at nine.") in messages
    # The caller hung up: the service sent Telnyx nothing more than the answer.
    assert [c.action for c in commands(telnyx_api.requests)] == ["answer"]


async def test_the_agent_transfers_the_call_through_telnyx_and_leaves_it_up(server, owner, ava, telnyx_api):
    call_control_id = control_id()
    async with await answered_call(server, telnyx_api, call_control_id) as stream:
        await stream.start()
        await greeted(stream)
        line = asyncio.create_task(stream.silence(30))
        await stream.dtmf("0")
        [transfer] = await sent(telnyx_api, "transfer", timeout=30)
        await stream.stop()  # Telnyx bridges the caller to the person and stops the stream
        assert await stream.wait_closed() == 1000
        line.cancel()
        await asyncio.gather(line, return_exceptions=True)

    assert transfer.call_control_id == call_control_id
    assert transfer.body == {"to": HANDOFF, "from": NUMBER}
    call = await wait_call(call_control_id, status="completed")
    assert call.ended_reason == "transferred"
    # The transferred call goes on between the caller and the person: never hung up by the agent.
    assert [c.action for c in commands(telnyx_api.requests)] == ["answer", "transfer"]


async def test_the_agent_ending_the_call_hangs_it_up_at_telnyx(server, owner, ava, telnyx_api):
    call_control_id = control_id()
    async with await answered_call(server, telnyx_api, call_control_id) as stream:
        await stream.start()
        await greeted(stream)
        line = asyncio.create_task(stream.silence(30))
        await stream.dtmf("9")
        [hung_up] = await sent(telnyx_api, "hangup", timeout=30)
        assert await stream.wait_closed() == 1000
        line.cancel()
        await asyncio.gather(line, return_exceptions=True)
    assert hung_up.call_control_id == call_control_id
    call = await wait_call(call_control_id, status="completed")
    assert call.ended_reason == "agent-ended-call"
    # Telnyx's hang-up event that follows changes nothing, and asks for nothing more.
    assert await post_event(server, hangup(call_control_id, source="callee")) == 200
    assert [c.action for c in commands(telnyx_api.requests)] == ["answer", "hangup"]
    assert (await sync_to_async(Call.objects.get)(pk=call.pk)).ended_reason == "agent-ended-call"


async def test_hang_up_through_the_api_hangs_up_at_telnyx(server, owner, ava, telnyx_api):
    call_control_id = control_id()
    # Telnyx answers a hang-up of a call that has already ended with error 90018: nothing is left to do.
    telnyx_api.reply(command_done(), telnyx_error(422, "90018", "Call has already ended"))
    async with await answered_call(server, telnyx_api, call_control_id) as stream:
        await stream.start()
        line = asyncio.create_task(stream.silence(30))
        await stream.wait_for(is_event("media"), timeout=60)
        call = await wait_call(call_control_id)
        response = await server.arequest("POST", f"/public/v1/calls/{call.pk}/hang-up", api_key=owner.api_key)
        assert response.status_code == 200, response.content
        assert await stream.wait_closed(timeout=10) == 1000
        line.cancel()
        await asyncio.gather(line, return_exceptions=True)
    call = await wait_call(call_control_id, status="completed")
    assert call.ended_reason == "agent-ended-call"
    hang_ups = [c for c in commands(telnyx_api.requests) if c.action == "hangup"]
    assert hang_ups and {c.call_control_id for c in hang_ups} == {call_control_id}


async def test_a_number_without_an_agent_and_a_full_organization_hear_a_sorry_then_are_hung_up(
    server, owner, ava, telnyx_api
):
    other = await sync_to_async(phone_number_claim)(organization=owner.organization, number="+14155550111")
    assert other.provider == "telnyx"  # the organization's carrier
    nobody = control_id()
    assert await post_event(server, incoming(nobody, to="+14155550111")) == 200
    answer, speak = commands(telnyx_api.requests)
    assert (answer.action, speak.action) == ("answer", "speak")
    assert "cannot take your call" in speak.body["payload"] and speak.body["language"] == "en-US"
    assert "stream_url" not in answer.body
    ended = event("call.speak.ended", nobody, client_state=speak.body["client_state"], status="completed")
    assert await post_event(server, ended) == 200
    assert commands(telnyx_api.requests)[-1].action == "hangup"

    await sync_to_async(Plan.objects.filter(pk=owner.organization.plan_id).update)(max_concurrent_calls=1)
    async with await answered_call(server, telnyx_api, control_id()) as stream:
        await stream.start()
        await stream.wait_for(is_event("media"), timeout=60)
        full = control_id()
        telnyx_api.requests.clear()
        assert await post_event(server, incoming(full, to=NUMBER)) == 200
        answer, speak = commands(telnyx_api.requests)
        assert (answer.call_control_id, speak.action) == (full, "speak")
        assert "all our lines are busy" in speak.body["payload"]
        await stream.stop()
        await stream.wait_closed()
    assert await sync_to_async(Call.objects.filter(provider_call_id__in=[nobody, full]).count)() == 0


async def test_events_not_signed_by_the_accounts_key_are_refused_and_nothing_is_done(server, owner, ava, telnyx_api):
    body = incoming(control_id(), to=NUMBER)
    assert await post_event(server, body, key=Ed25519PrivateKey.generate()) == 403
    assert await post_event(server, body, timestamp=1_700_000_000) == 403  # replayed: years old
    other = event("call.initiated", control_id(), direction="incoming", to=NUMBER, **{"from": CALLER})
    other["data"]["payload"]["connection_id"] = "999999"
    assert await post_event(server, other) == 403
    async with server.ahttp() as client:
        raw, headers = signed(body)
        tampered = raw.replace(NUMBER.encode(), b"+14155550111")
        assert (await client.post(EVENTS, content=tampered, headers=headers)).status_code == 403
        assert (await client.post(EVENTS, content=b"[]", headers=signed({})[1])).status_code == 400
        assert (await client.get(EVENTS)).status_code == 405
    assert await post_event(server, incoming(control_id() + "\x00", to=NUMBER)) == 400  # cannot be stored
    assert not telnyx_api.requests
    assert await sync_to_async(Call.objects.count)() == 0


async def test_a_stream_in_another_encoding_is_hung_up_without_a_call(server, owner, ava, telnyx_api):
    call_control_id = control_id()
    stream = await answered_call(server, telnyx_api, call_control_id)
    stream.encoding = "L16"  # not what the answer asked for
    async with stream:
        await stream.start()
        assert await stream.wait_closed(timeout=10) == CLOSE_ENGINE_ERROR
    assert not [item for item in stream.messages if item.message.get("event") == "media"]
    assert await sync_to_async(Call.objects.filter(provider_call_id=call_control_id).count)() == 0
    assert [(c.action, c.call_control_id) for c in commands(telnyx_api.requests)][-1] == ("hangup", call_control_id)


# --- outbound calls -------------------------------------------------------------------------------


async def dial(server: InProcessServer, owner: Any, ava: Any, telnyx_api: LoopbackReceiver, call_control_id: str):
    telnyx_api.reply(dialed(call_control_id))
    body = {"agentId": str(ava.pk), "phoneNumberId": str(ava.number.pk), "to": CALLER}
    response = await server.arequest("POST", "/public/v1/calls", api_key=owner.api_key, body=body)
    assert response.status_code == 201, response.content
    assert await sync_to_async(outbound_dispatch)() == 1
    [placed] = [r for r in telnyx_api.requests if (r.method, r.path.rsplit("/", 1)[-1]) == ("POST", "calls")]
    return response.json()["id"], placed.json()


async def status_of(call_id: str, wanted: str) -> Call:
    async def reached() -> Call | None:
        call = await sync_to_async(Call.objects.get)(pk=call_id)
        return call if call.status == wanted else None

    return await polled(reached, what=f"call {call_id} {wanted}", timeout=15)


async def test_an_outbound_call_dials_with_its_stream_rings_is_answered_and_ends(
    server, owner, ava, telnyx_api, settings
):
    settings.OUTBOUND_PLACE_THREADS = 1
    call_control_id = control_id()
    call_id, placed = await dial(server, owner, ava, telnyx_api, call_control_id)
    assert (placed["connection_id"], placed["to"], placed["from"]) == (CONNECTION_ID, CALLER, NUMBER)
    assert (placed["stream_bidirectional_mode"], placed["stream_url"]) == (
        "rtp",
        f"{server.ws_url}/telephony/telnyx/stream",
    )
    assert placed["webhook_url"] == f"{server.http_url}{EVENTS}?callId={call_id}"
    assert placed["timeout_secs"] == settings.OUTBOUND_RING_TIMEOUT_SECONDS
    assert (await status_of(call_id, "ringing")).provider_call_id == call_control_id

    query = f"?callId={call_id}"
    initiated = event("call.initiated", call_control_id, direction="outgoing", to=CALLER, **{"from": NUMBER})
    assert await post_event(server, initiated, query=query) == 200
    assert await post_event(server, event("call.answered", call_control_id), query=query) == 200
    async with TelnyxStream(placed["stream_url"], stream_token(placed), call_sid=call_control_id) as stream:
        await stream.start()
        await greeted(stream)
        call = await status_of(call_id, "active")
        assert (call.direction, call.provider_call_id) == ("outbound", call_control_id)
        await stream.stop()
        assert await stream.wait_closed() == 1000
    assert await post_event(server, hangup(call_control_id, source="callee"), query=query) == 200
    call = await status_of(call_id, "completed")
    assert call.ended_reason == "caller-hung-up"


@pytest.mark.parametrize(
    ("cause", "status", "reason"),
    [
        ("user_busy", "busy", "busy"),
        ("timeout", "no-answer", "no-answer"),
        ("call_rejected", "failed", "provider-error"),
    ],
)
async def test_an_outbound_call_not_answered_ends_with_telnyxs_cause(
    server, owner, ava, telnyx_api, settings, cause, status, reason
):
    settings.OUTBOUND_PLACE_THREADS = 1
    call_control_id = control_id()
    call_id, _ = await dial(server, owner, ava, telnyx_api, call_control_id)
    assert (
        await post_event(server, hangup(call_control_id, cause=cause, source="callee"), query=f"?callId={call_id}")
        == 200
    )
    call = await status_of(call_id, status)
    assert call.ended_reason == reason


# --- the account ----------------------------------------------------------------------------------


def test_a_telnyx_account_is_its_connection_api_key_and_public_key(owner: Any) -> None:
    org = str(owner.organization.pk)
    base = ["--org", org, "--provider", "telnyx", "--connection-id", CONNECTION_ID]
    for extra, message in [
        (["--api-key", API_KEY, "--public-key", "not-a-key"], "32 bytes in base64"),
        (["--api-key", API_KEY], "32 bytes in base64"),
        (["--public-key", PUBLIC_KEY], "Telnyx API key is required"),
        (
            ["--api-key", API_KEY, "--public-key", PUBLIC_KEY, "--api-base-url", "https://api.example.com"],
            "Only for Twilio",
        ),
    ]:
        with pytest.raises(CommandError, match=message):
            settelephony(*base, *extra)
    printed = settelephony(*base, "--api-key", API_KEY, "--public-key", PUBLIC_KEY)
    assert printed == {"organizationId": org, "provider": "telnyx"} and API_KEY not in json.dumps(printed)
    # An edit keeps the stored API key.
    assert settelephony(*base, "--public-key", PUBLIC_KEY)["provider"] == "telnyx"
    with pytest.raises(CommandError, match="Only for Telnyx"):
        settelephony(
            "--org", org, "--account-sid", "AC" + "1" * 32, "--auth-token", "t" * 32, "--public-key", PUBLIC_KEY
        )


def test_pointing_a_number_assigns_it_to_the_connection_and_the_application_to_this_service(
    dashboard: Any, owner: Any, telnyx_api: LoopbackReceiver, settings: Any
) -> None:
    settings.TELNYX_API_BASE_URL, settings.PUBLIC_BASE_URL = telnyx_api.base, "https://voice.example.test"
    make_telnyx_account(owner.organization)
    number = phone_number_claim(organization=owner.organization, number=NUMBER, setup_status=SetupStatus.PENDING)
    missing = phone_number_claim(
        organization=owner.organization, number="+14155550111", setup_status=SetupStatus.PENDING
    )
    telnyx_api.reply(Reply(json={"data": [{"id": "1293384261075731499", "phone_number": NUMBER}]}))
    telnyx_api.reply(command_done(), command_done(), Reply(json={"data": []}))

    dashboard.post(
        "/admin/telephony/phonenumber/",
        {"action": "point_at_this_service", "_selected_action": [str(number.pk), str(missing.pk)]},
        follow=True,
    )

    number.refresh_from_db()
    missing.refresh_from_db()
    assert (number.setup_status, number.setup_error) == (SetupStatus.READY, "")
    assert missing.setup_status == SetupStatus.ERROR and "is not a number of the Telnyx account" in missing.setup_error
    lookup, assign, application = [
        r for r in telnyx_api.requests if r.query.get("filter[phone_number]") == NUMBER or r.method == "PATCH"
    ]
    assert (lookup.method, lookup.path, lookup.query["filter[phone_number]"]) == ("GET", "/phone_numbers", NUMBER)
    assert (assign.path, assign.json()) == ("/phone_numbers/1293384261075731499", {"connection_id": CONNECTION_ID})
    assert application.path == f"/call_control_applications/{CONNECTION_ID}"
    assert application.json()["webhook_event_url"] == f"https://voice.example.test{EVENTS}"
    assert {r.headers["authorization"] for r in telnyx_api.requests} == {f"Bearer {API_KEY}"}
