"""Why a call ended (endedReason), end to end through the project's ASGI application in the test's
process (testing/inprocess.py): every way a call ends today
leaves its reason on the call as GET /public/v1/calls/{id} returns it.

- a browser that closes its socket, and a phone stream that Twilio stops: caller-hung-up;
- a caller who asks for a person: transferred; a caller who says nothing: silence-timeout;
- an agent's maxDurationSeconds (a few seconds here), on a browser and a phone call: the agent says its
  closing line, max-duration-reached;
- a caller who says "no, that's all, thank you, goodbye" to the embedded brain: the agent says goodbye and
  ends the call with end_call, agent-ended-call; with the OpenAI brain (the scripted Chat Completions
  server) end_call is offered to the model, and its call without words gets the default goodbye; an agent
  that turns end_call off does not offer it;
- Twilio's status callbacks busy and no-answer: the live stream's call, and a call no stream holds;
- a server stopped (SIGTERM) under a live call: server-shutdown (a real process to stop:
  test_socket_exits.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from calls import services as calls
from calls.models import Call
from realtime.engine.phrases import phrase
from telephony import audio
from testing.chat_server import Call as ScriptedCall
from testing.chat_server import ChatServer, Text, Tools
from testing.clients import VoiceClient, is_type
from testing.conversations import Caller, agent_for, issue, silence, socket_url
from testing.inprocess import InProcessServer, serving
from testing.twilio_stream import PHONE_NUMBER, is_event, phone_agent, phone_stream
from testing.twilio_webhooks import (
    PUBLIC_BASE_URL,
    sign,
    status_params,
    twilio_api_fixture,  # noqa: F401 - the fixture
)
from testing.voice import record_voice
from testing.waiting import polled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

IDLE_SECONDS = 10
HANDOFF = "+15557654321"
LLM_MODEL = "scripted-model"

FAREWELL = "No, that's all, thank you. Goodbye."
REAL_PERSON = "Can I speak to a real person please?"
CAPABILITIES = "What can you do?"


@pytest.fixture(scope="module")
def voice(tmp_path_factory: Any) -> dict[str, bytes]:
    return record_voice((FAREWELL, REAL_PERSON, CAPABILITIES), tmp_path_factory.mktemp("voice"))


def server_values(twilio_api: Any) -> dict[str, Any]:
    return {
        "OUTBOUND_ALLOWED_NETWORKS": ["127.0.0.0/8"],
        "REALTIME_INPUT_IDLE_SECONDS": IDLE_SECONDS,
        "PUBLIC_BASE_URL": PUBLIC_BASE_URL,
        "TWILIO_API_BASE_URL": twilio_api.base,
        # A status callback finishes a call that no live stream ends within a second.
        "TELEPHONY_CALL_END_GRACE_SECONDS": 1,
    }


@pytest.fixture
def server(settings: Any, twilio_api: Any) -> Iterator[InProcessServer]:
    with serving(settings, server_values(twilio_api)) as started:
        yield started


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    with ChatServer() as scripted:
        yield scripted


@pytest.fixture
def openai_server(settings: Any, chat: ChatServer) -> Iterator[InProcessServer]:
    values = {"LLM_PROVIDER": "openai", "LLM_BASE_URL": chat.base_url, "LLM_MODEL": LLM_MODEL, "LLM_API_KEY": "sk-x"}
    with serving(settings, values) as started:
        yield started


# --- helpers -------------------------------------------------------------------------------------


async def ended(call_id: str, owner: Any, *, timeout: float = 20) -> dict[str, Any]:
    """The call detail of GET /public/v1/calls/{id} once the call has left `active`."""

    async def left_active() -> dict[str, Any] | None:
        response = await sync_to_async(owner.client.get)(f"/public/v1/calls/{call_id}")
        assert response.status_code == 200, response.content
        detail: dict[str, Any] = response.json()
        return detail if detail["status"] != "active" else None

    return await polled(left_active, what=f"call {call_id} leaving active", timeout=timeout, every=0.1)


def make(owner: Any, make_agent: Any, name: str, **fields: Any) -> Any:
    return agent_for(owner, make_agent, name=name, instructions="You help callers.", **fields)


def pia(owner: Any, make_agent: Any) -> Any:
    return phone_agent(owner, make(owner, make_agent, "Pia"))


async def status_callback(server: InProcessServer, call_sid: str, status: str) -> int:
    """Twilio's call status callback to the application, signed over PUBLIC_BASE_URL + path."""
    path = "/telephony/twilio/status"
    params = status_params(sid=call_sid, status=status, to=PHONE_NUMBER)
    async with server.ahttp() as http:
        response = await http.post(
            path, data=params, headers={"X-Twilio-Signature": sign(PUBLIC_BASE_URL + path, params)}
        )
    return response.status_code


# --- the caller ends the call --------------------------------------------------------------------


async def test_a_browser_that_closes_its_socket_hung_up(server, voice, owner, make_agent, realtime_settings):
    agent = await sync_to_async(make)(owner, make_agent, "Cleo")
    async with VoiceClient(socket_url(server, agent, issue(agent))) as client:
        caller = await Caller(client, voice).answered()
    # Leaving the block closes the socket (a close frame, as a browser tab that is closed sends).
    detail = await ended(caller.call_id, owner)
    assert (detail["status"], detail["endedReason"]) == ("completed", "caller-hung-up")
    listed = await sync_to_async(owner.client.get)("/public/v1/calls")
    assert [item["endedReason"] for item in listed.json()] == ["caller-hung-up"]


async def test_twilio_stopping_the_stream_is_the_caller_hanging_up(server, owner, make_agent, realtime_settings):
    agent = await sync_to_async(pia)(owner, make_agent)
    call_sid = "CA" + "1" * 32
    async with await phone_stream(server, agent, call_sid) as twilio:
        await twilio.start()
        await twilio.wait_for(is_event("media"), timeout=60)
        await twilio.stop()
        assert await twilio.wait_closed() == 1000
    call = await sync_to_async(Call.objects.get)(provider_call_id=call_sid)
    detail = await ended(str(call.pk), owner)
    assert (detail["status"], detail["endedReason"]) == ("completed", "caller-hung-up")


# --- the conversation ends it --------------------------------------------------------------------


async def test_asking_for_a_person_is_transferred(server, voice, owner, make_agent, realtime_settings):
    agent = await sync_to_async(make)(owner, make_agent, "Tess", handoff_phone_number=HANDOFF)
    async with VoiceClient(socket_url(server, agent, issue(agent))) as client:
        caller = await Caller(client, voice).answered()
        await client.stream(voice[REAL_PERSON] + silence(1000))
        await client.wait_for(is_type("transfer"), timeout=45)
        assert await client.wait_closed() == 1000
    detail = await ended(caller.call_id, owner)
    assert (detail["status"], detail["endedReason"]) == ("completed", "transferred")


async def test_a_caller_who_sends_no_audio_is_a_silence_timeout(server, voice, owner, make_agent, realtime_settings):
    agent = await sync_to_async(make)(owner, make_agent, "Ida")
    async with VoiceClient(socket_url(server, agent, issue(agent))) as client:
        caller = await Caller(client, voice).answered()
        assert await client.wait_closed(timeout=IDLE_SECONDS + 15) == 4408
    detail = await ended(caller.call_id, owner)
    assert (detail["status"], detail["endedReason"]) == ("completed", "silence-timeout")


async def test_a_call_that_reaches_the_agents_max_duration_is_closed_politely(
    server, voice, owner, make_agent, realtime_settings
):
    # The API accepts 30 s at least; a few seconds keep the test short.
    agent = await sync_to_async(make)(owner, make_agent, "Max", max_duration_seconds=5)
    async with VoiceClient(socket_url(server, agent, issue(agent))) as client:
        caller = await Caller(client, voice).answered()
        done = asyncio.Event()
        line = asyncio.create_task(client.stream(silence(30_000), stop_when=done.is_set))  # the caller listens
        try:
            await client.wait_for(
                is_type("transcript", role="assistant", text=phrase("max_duration", "en-US")), timeout=30
            )
            assert await client.wait_closed() == 1000
        finally:
            done.set()
            await asyncio.gather(line, return_exceptions=True)
    detail = await ended(caller.call_id, owner)
    assert (detail["status"], detail["endedReason"]) == ("completed", "max-duration-reached")
    assert 5 <= detail["durationSeconds"] <= 15
    assert detail["messages"][-1]["content"] == phrase("max_duration", "en-US")


async def test_the_embedded_brain_ends_the_call_when_the_caller_says_goodbye(
    server, voice, owner, make_agent, realtime_settings
):
    agent = await sync_to_async(make)(owner, make_agent, "Bea")
    async with VoiceClient(socket_url(server, agent, issue(agent))) as client:
        caller = await Caller(client, voice).answered()
        exchange = await caller.say(FAREWELL)
        assert exchange.said == "Thank you for calling. Goodbye!", exchange.heard
        # Closed by the agent, after its goodbye: the caller sent no stop.
        assert await client.wait_closed() == 1000
        assert ("tool.started", "end_call") in [(e["type"], e.get("name")) for e in exchange.events]
    detail = await ended(caller.call_id, owner)
    assert (detail["status"], detail["endedReason"]) == ("completed", "agent-ended-call")
    assert [t["toolName"] for t in detail["toolInvocationsLog"]] == ["end_call"]
    last = detail["messages"][-1]
    assert (last["role"], last["content"]) == ("assistant", exchange.said)


# --- end_call and the OpenAI brain ---------------------------------------------------------------


async def test_the_model_is_offered_end_call_and_its_call_ends_after_a_default_goodbye(
    openai_server, voice, chat, owner, make_agent, realtime_settings
):
    agent = await sync_to_async(make)(owner, make_agent, "Olga")
    first = len(chat.requests)
    chat.script(Tools(ScriptedCall("end_call", {}, id="call_end_1")))
    async with VoiceClient(socket_url(openai_server, agent, issue(agent))) as client:
        caller = await Caller(client, voice).answered()
        exchange = await caller.say(CAPABILITIES)
        assert exchange.said == phrase("goodbye", "en-US")  # the model said nothing: the default goodbye
        assert await client.wait_closed() == 1000
    (asked,) = chat.requests[first:]  # the call ended: the model is not asked again
    assert [tool["function"]["name"] for tool in asked.tools] == ["end_call"]
    detail = await ended(caller.call_id, owner)
    assert (detail["status"], detail["endedReason"]) == ("completed", "agent-ended-call")


async def test_an_agent_that_turns_end_call_off_does_not_offer_it(
    openai_server, voice, chat, owner, make_agent, realtime_settings
):
    agent = await sync_to_async(make)(owner, make_agent, "Otto", end_call_enabled=False)
    first = len(chat.requests)
    chat.script(Text("I can answer your questions."))
    async with VoiceClient(socket_url(openai_server, agent, issue(agent))) as client:
        caller = await Caller(client, voice).answered()
        exchange = await caller.say(CAPABILITIES)
        assert exchange.said == "I can answer your questions."
        await caller.hang_up()
    (asked,) = chat.requests[first:]
    assert "end_call" not in [tool["function"]["name"] for tool in asked.tools]
    detail = await ended(caller.call_id, owner)
    assert (detail["status"], detail["endedReason"]) == ("completed", "caller-hung-up")


async def test_a_phone_call_that_reaches_the_max_duration_is_closed_by_the_service(
    server, owner, make_agent, realtime_settings
):
    agent = await sync_to_async(pia)(owner, make_agent)
    await sync_to_async(type(agent).objects.filter(pk=agent.pk).update)(max_duration_seconds=4)
    call_sid = "CA" + "4" * 32
    async with await phone_stream(server, agent, call_sid) as twilio:
        await twilio.start()
        await twilio.wait_for(is_event("media"), timeout=60)
        line = asyncio.create_task(twilio.stream(bytes([audio.SILENCE_BYTE]) * 8000 * 30))
        try:
            assert await twilio.wait_closed(timeout=30) == 1000  # the service ends the stream (and so the call)
        finally:
            line.cancel()
            await asyncio.gather(line, return_exceptions=True)
    call = await sync_to_async(Call.objects.get)(provider_call_id=call_sid)
    detail = await ended(str(call.pk), owner)
    assert (detail["status"], detail["endedReason"]) == ("completed", "max-duration-reached")
    assert detail["messages"][-1]["content"] == phrase("max_duration", "en-US")


# --- the carrier ends it -------------------------------------------------------------------------


async def test_a_busy_status_callback_ends_the_live_stream_with_busy(server, owner, make_agent, realtime_settings):
    agent = await sync_to_async(pia)(owner, make_agent)
    call_sid = "CA" + "2" * 32
    async with await phone_stream(server, agent, call_sid) as twilio:
        await twilio.start()
        await twilio.wait_for(is_event("media"), timeout=60)
        line = asyncio.create_task(twilio.stream(bytes([audio.SILENCE_BYTE]) * 8000 * 30))
        try:
            assert await status_callback(server, call_sid, "busy") == 204
            assert await twilio.wait_closed(timeout=10) == 1000
        finally:
            line.cancel()
            await asyncio.gather(line, return_exceptions=True)
    call = await sync_to_async(Call.objects.get)(provider_call_id=call_sid)
    assert (await ended(str(call.pk), owner))["endedReason"] == "busy"


async def test_a_no_answer_status_callback_finishes_a_call_no_stream_holds(
    server, owner, make_agent, realtime_settings
):
    agent = await sync_to_async(pia)(owner, make_agent)
    call_sid = "CA" + "3" * 32
    # A call record left open by a process that is gone (no live stream ends it).
    call = await sync_to_async(calls.call_start)(agent=agent, channel="phone", provider_call_id=call_sid)
    assert await status_callback(server, call_sid, "no-answer") == 204
    detail = await ended(str(call.pk), owner)
    assert (detail["status"], detail["endedReason"]) == ("failed", "no-answer")
