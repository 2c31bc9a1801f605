"""Phone calls end to end through the project's ASGI application in the test's process
(testing/inprocess.py): Twilio's side of the Media Stream played by a script (testing/twilio_stream.py)
with eSpeak NG speech as mu-law, the real offline engine, a loopback stand-in for Twilio's REST API
(TWILIO_API_BASE_URL), signed webhooks over ASGI, and the call record in the database.

One test keeps a real server: two processes sharing stream tokens and call control (the test's own
process, serving the application in-process, and a Daphne process beside it: testing/daphne.py)."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any
from xml.etree import ElementTree

import httpx
import pytest
from asgiref.sync import sync_to_async
from twilio.request_validator import RequestValidator

from calls.logging import flush_agent_logs
from calls.models import AgentLog, Call
from telephony import audio
from telephony import consumers as media_stream
from telephony.services.accounts import telephony_account_set
from telephony.services.numbers import phone_number_assign, phone_number_claim
from telephony.streams import stream_token_issue
from testing.calls import wait_call
from testing.daphne import DaphneServer, start_test_server, stop_test_server
from testing.inprocess import InProcessServer, serving
from testing.twilio_stream import TwilioStream, from_phone, greeted, is_event, to_phone
from testing.twilio_webhooks import twilio_api_fixture  # noqa: F401 - the fixture
from testing.voice import recognize, record_voice, rms, words
from testing.waiting import polled

# Slow, and about server processes sharing the database and Redis: the PostgreSQL suite runs it too.
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    pytest.mark.processes,
    pytest.mark.usefixtures("close_db_threads"),
]

GREETING = "Hello, this is Ava from Acme. How can I help you today?"
INSTRUCTIONS = (
    "You take table reservations for the Acme restaurant. "
    "When a caller asks for an operator or a human, transfer the call."
)
SENTENCE = "I would like to book a table for four people tomorrow evening."
SECOND = "Please book it for dinner at seven."
# Offline recognition of phone-band speech is rough; these are heard as a request for a person.
ASK_FOR_PERSON = ("Operator.", "I want to speak to a human.")
NUMBER = "+14155550100"
CALLER = "+14155550199"
HANDOFF = "+14155550142"
ACCOUNT_SID = "AC" + "3" * 32
AUTH_TOKEN = "f" * 32


def server_env(twilio_api: str) -> dict[str, str]:
    """A server reachable at PUBLIC_BASE_URL (`public`), with Twilio's REST API at the loopback
    stand-in: as environment variables (a real server), or as settings (`server_values`, in-process)."""
    return {"TWILIO_API_BASE_URL": twilio_api, "TELEPHONY_CALL_END_GRACE_SECONDS": "10"}


def server_values(twilio_api: str) -> dict[str, Any]:
    return {"TWILIO_API_BASE_URL": twilio_api, "TELEPHONY_CALL_END_GRACE_SECONDS": 10}


@pytest.fixture
def server(
    engine_loaded: None, realtime_settings: Any, settings: Any, twilio_api: Any, tmp_path: Any
) -> Iterator[InProcessServer]:
    """The application (after realtime_settings, which the agents' fixtures use: its REALTIME_WS_URL wins)."""
    with serving(settings, server_values(twilio_api.base), public=True, folder=tmp_path) as started:
        yield started


@pytest.fixture(scope="module")
def voice(tmp_path_factory: Any) -> dict[str, bytes]:
    """The caller's sentences as a phone line carries them (mu-law 8 kHz)."""
    recorded = record_voice((SENTENCE, SECOND, *ASK_FOR_PERSON), tmp_path_factory.mktemp("voice"))
    return {text: to_phone(pcm) for text, pcm in recorded.items()}


@pytest.fixture
def ava(owner: Any, make_agent: Any, realtime_settings: Any) -> Any:
    agent = make_agent(
        owner.organization,
        name="Ava",
        status="active",
        identity="Ava, the reservation assistant of Acme",
        instructions=INSTRUCTIONS,
        greeting_type="static",
        static_greeting=GREETING,
    )
    telephony_account_set(organization=owner.organization, account_sid=ACCOUNT_SID, auth_token=AUTH_TOKEN)
    number = phone_number_claim(organization=owner.organization, number=NUMBER)
    phone_number_assign(
        organization=owner.organization, agent=agent, phone_number_id=number.pk, handoff_phone_number=HANDOFF
    )
    agent.number_id = number.pk
    return agent


def token_for(agent: Any, call_sid: str, **kwargs: Any) -> str:
    return stream_token_issue(
        organization_id=agent.organization_id,
        agent_id=agent.pk,
        phone_number_id=agent.number_id,
        call_sid=call_sid,
        from_number=CALLER,
        to_number=NUMBER,
        **kwargs,
    )


Server = InProcessServer | DaphneServer


def stream_url(server: Server) -> str:
    return f"{server.ws_url}/telephony/twilio/stream"


async def signed_post(server: Server, path: str, params: dict[str, str]) -> tuple[int, str]:
    """A webhook as Twilio sends it: form-encoded, signed over PUBLIC_BASE_URL + path (the application
    in this process over ASGI, or a real server over HTTP)."""
    url = server.http_url + path
    headers = {"X-Twilio-Signature": RequestValidator(AUTH_TOKEN).compute_signature(url, params)}
    if isinstance(server, InProcessServer):
        async with server.ahttp() as client:
            response = await client.post(path, data=params, headers=headers)
    else:
        async with httpx.AsyncClient(base_url=server.http_url, timeout=30) as client:
            response = await client.post(path, data=params, headers=headers)
    return response.status_code, response.text


def call_params(call_sid: str, **extra: str) -> dict[str, str]:
    return {
        "CallSid": call_sid,
        "AccountSid": ACCOUNT_SID,
        "From": CALLER,
        "To": NUMBER,
        "Direction": "inbound",
        "ApiVersion": "2010-04-01",
        **extra,
    }


async def transcript(call: Call) -> list[tuple[str, str]]:
    return await sync_to_async(
        lambda: list(call.messages.order_by("occurred_at", "sequence").values_list("role", "content"))
    )()


def keys_logged(agent: Any) -> list[AgentLog]:
    """The agent's "caller pressed a key" log lines (each look writes the lines buffered so far: the tests'
    settings run no log writer thread)."""
    flush_agent_logs()
    return list(AgentLog.objects.filter(agent=agent, content__message="caller pressed a key"))


# --- tokens ------------------------------------------------------------------------------------


async def refused(server: Server, token: str | None, call_sid: str, **kwargs: Any) -> int | None:
    """The stream is closed at once, nothing is sent to it; returns the close code (a refusal's own: not
    4408, the close of a socket that presented no valid start within START_TIMEOUT_SECONDS)."""
    async with TwilioStream(stream_url(server), token, call_sid=call_sid, **kwargs) as twilio:
        await twilio.start()
        await twilio.send_media(bytes(160))
        code = await twilio.wait_closed(timeout=30)
        assert not twilio.messages
        return code


async def test_the_stream_refuses_missing_bad_expired_and_reused_tokens(server, ava):
    call_sid = "CA" + "1" * 32
    assert await refused(server, None, call_sid, parameters={}) == 4401
    assert await refused(server, "not-a-token", call_sid) == 4401
    assert await refused(server, await sync_to_async(token_for)(ava, call_sid, now=time.time() - 61), call_sid) == 4401
    good = await sync_to_async(token_for)(ava, call_sid)
    forged = good[:-3] + ("xyz" if not good.endswith("xyz") else "abc")
    assert await refused(server, forged, call_sid) == 4401
    # A token is for one call: another callSid presenting it is refused (and spends it).
    assert await refused(server, await sync_to_async(token_for)(ava, call_sid), "CA" + "2" * 32) == 4401
    assert not await sync_to_async(Call.objects.exists)()

    async with TwilioStream(stream_url(server), good, call_sid=call_sid) as twilio:
        await twilio.start()
        await twilio.wait_for(is_event("media"), timeout=60)
        assert await refused(server, good, call_sid) == 4409  # reused while the first stream is live
        await twilio.stop()
        await twilio.wait_closed()
    call = await wait_call(call_sid, status="completed")
    assert await sync_to_async(Call.objects.count)() == 1 and call.channel == "phone"


async def test_a_socket_without_a_start_is_closed_and_messages_before_it_are_ignored(server, ava, monkeypatch):
    # The application runs in this process: its wait for a `start` is shortened (10 s in production).
    monkeypatch.setattr(media_stream, "START_TIMEOUT_SECONDS", 1.0)
    async with TwilioStream(stream_url(server), None) as twilio:
        await twilio.send({"event": "connected", "protocol": "Call", "version": "1.0.0"})
        await twilio.send_media(bytes(160))
        await twilio.send_raw("not json")
        await twilio.send_raw(b"\x00\x01")
        code = await twilio.wait_closed(timeout=30)
        assert code == 4408 and not twilio.messages
    assert not await sync_to_async(Call.objects.exists)()


async def test_a_start_with_text_that_cannot_be_stored_is_ignored_and_the_right_one_opens_the_call(server, ava):
    """A NUL or a lone surrogate in any string of a frame makes it malformed (ignored, like a frame that
    is not JSON): the token is not spent, no call record gets the value, and the next start is taken."""
    call_sid = "CA" + "5" * 32
    token = await sync_to_async(token_for)(ava, call_sid)
    async with TwilioStream(stream_url(server), token, call_sid=call_sid) as twilio:
        for bad_sid in (call_sid + "\\u0000", call_sid[:-1] + "\\ud800"):  # JSON escapes
            start = {"streamSid": twilio.stream_sid, "callSid": "CALLSID", "customParameters": {"token": token}}
            message = json.dumps({"event": "start", "streamSid": twilio.stream_sid, "start": start})
            await twilio.send_raw(message.replace("CALLSID", bad_sid))
        await twilio.start()
        await twilio.wait_for(is_event("media"), timeout=60)
        await twilio.stop()
        assert await twilio.wait_closed() == 1000
    call = await wait_call(call_sid, status="completed")
    assert call.provider_call_id == call_sid
    assert await sync_to_async(Call.objects.count)() == 1


# --- a call -----------------------------------------------------------------------------------


async def test_a_phone_call_end_to_end(server, ava, voice):
    call_sid = "CA" + "a" * 32
    token = await sync_to_async(token_for)(ava, call_sid)
    async with TwilioStream(stream_url(server), token, call_sid=call_sid) as twilio:
        await twilio.start()
        after_greeting = await greeted(twilio)
        call = await wait_call(call_sid)
        assert (call.channel, call.from_number, call.to_number, call.status) == ("phone", CALLER, NUMBER, "active")

        # The greeting: 20 ms mu-law frames on this stream, a mark after each chunk, all echoed.
        sent = [item.message for item in twilio.messages[:after_greeting]]
        media = [m for m in sent if m["event"] == "media"]
        assert {m["streamSid"] for m in sent} == {twilio.stream_sid}
        assert {len(base64.b64decode(m["media"]["payload"])) for m in media} == {160}
        marks = [m["mark"]["name"] for m in sent if m["event"] == "mark"]
        assert marks and len(set(marks)) == len(marks) and twilio.echoed == marks
        greeting = from_phone(twilio.audio(0, after_greeting))
        seconds = len(greeting) / 32000
        assert 3 < seconds < 15 and rms(greeting) > 300
        heard = await sync_to_async(recognize)(ava, greeting)
        assert len(words(heard) & words("Hello this is Ava from Acme How can I help you today")) >= 3, heard

        # Bad messages are ignored and the call goes on.
        for raw in (
            "not json",
            "[1, 2]",
            '{"event": "media", "streamSid": null}',
            json.dumps({"event": "dance", "streamSid": twilio.stream_sid}),
            b"\x00",
        ):
            await twilio.send_raw(raw)
        await twilio.send({"event": "media", "streamSid": twilio.stream_sid, "media": {"payload": "%%%"}})
        await twilio.send({"event": "media", "streamSid": "MZother", "media": {"payload": "AAAA"}})

        # The caller speaks; once a second of the answer has played (earlier, speech goes on with the
        # caller's turn) the caller speaks again: Twilio is told to clear.
        await twilio.stream(voice[SENTENCE] + bytes([audio.SILENCE_BYTE]) * 8000)
        answer = await twilio.wait_for(is_event("media"), after=after_greeting + 1, timeout=30)
        while len(twilio.audio(answer)) < 8000:
            await twilio.wait_for(is_event("media"), after=len(twilio.messages), timeout=30)
        barge_in = asyncio.create_task(twilio.stream(voice[SECOND] + bytes([audio.SILENCE_BYTE]) * 12000))
        cleared = await twilio.wait_for(is_event("clear"), after=answer, timeout=30)
        assert twilio.messages[cleared].message == {"event": "clear", "streamSid": twilio.stream_sid}
        await barge_in

        # A key pressed: after the keypad's timeoutMs the brain answers the turn "the caller entered 1".
        before = len(twilio.messages)
        await twilio.dtmf("1")
        line = asyncio.create_task(twilio.silence(4))
        await twilio.wait_for(is_event("media"), after=before, timeout=30)
        await line
        await twilio.stop()
        assert await twilio.wait_closed() == 1000

    call = await wait_call(call_sid, status="completed")
    assert call.ended_at is not None and call.channel == "phone"
    rows = await transcript(call)
    assert rows[0][0] == "assistant" and rows[0][1].endswith(GREETING)
    assert ("user", "the caller entered 1") in rows
    users = [text for role, text in rows if role == "user"]
    # Phone-band speech reaches the recognizer (its words are rough: the offline acoustic model is
    # wideband, see bench/voice_latency.py --scenario phone for the word error rate).
    assert len(users) == 3 and users[0] and users[1] and users[2] == "the caller entered 1"
    # The key is in the agent log.
    keys = await polled(sync_to_async(lambda: keys_logged(ava)), what="the key in the agent log", timeout=10)
    assert [entry.content.get("digit") for entry in keys] == ["1"]
    # The answer cut by the barge-in keeps only what was heard: a part of it.
    cut = rows[rows.index(("user", users[0])) + 1]
    assert cut[0] == "assistant" and cut[1]


async def test_a_transfer_goes_through_twilios_rest_api(server, ava, voice, twilio_api):
    call_sid = "CA" + "b" * 32
    twilio_api.requests.clear()
    token = await sync_to_async(token_for)(ava, call_sid)
    async with TwilioStream(stream_url(server), token, call_sid=call_sid) as twilio:
        await twilio.start()
        await greeted(twilio)
        # The caller asks for a person (again, as a caller would, when not understood the first time).
        silence = bytes([audio.SILENCE_BYTE]) * 8000
        for attempt in range(4):
            await twilio.stream(voice[ASK_FOR_PERSON[attempt % 2]] + silence * 2)
            # The line goes on (silence) until the transfer request arrives, or for two seconds.
            await twilio.stream(silence * 2, stop_when=lambda: bool(twilio_api.requests))
            if twilio_api.requests:
                break
        assert twilio_api.requests, await transcript(await wait_call(call_sid))
        await twilio.stop()  # Twilio ends the stream when the call's TwiML is replaced
        await twilio.wait_closed()
    request = twilio_api.requests[0]
    assert request.method == "POST" and request.path == f"/2010-04-01/Accounts/{ACCOUNT_SID}/Calls/{call_sid}.json"
    assert (
        request.headers["authorization"] == "Basic " + base64.b64encode(f"{ACCOUNT_SID}:{AUTH_TOKEN}".encode()).decode()
    )
    twiml = urllib.parse.parse_qs(request.body.decode())["Twiml"][0]
    dial = ElementTree.fromstring(twiml).find("Dial")  # noqa: S314 - the service's own TwiML
    assert dial is not None and dial.get("callerId") == NUMBER and dial.findtext("Number") == HANDOFF
    call = await wait_call(call_sid, status="completed")
    rows = await transcript(call)
    assert ("system", f"Call transferred to {HANDOFF}") in rows


async def test_a_status_callback_ends_the_call(server, ava):
    call_sid = "CA" + "c" * 32
    token = await sync_to_async(token_for)(ava, call_sid)
    async with TwilioStream(stream_url(server), token, call_sid=call_sid) as twilio:
        await twilio.start()
        await twilio.wait_for(is_event("media"), timeout=60)
        line = asyncio.create_task(twilio.silence(20))
        status, _ = await signed_post(
            server, "/telephony/twilio/status", call_params(call_sid, CallStatus="completed", CallDuration="3")
        )
        assert status == 204
        assert await twilio.wait_closed(timeout=10) == 1000
        line.cancel()
        await asyncio.gather(line, return_exceptions=True)
    call = await wait_call(call_sid, status="completed", timeout=5)
    assert call.ended_at is not None


# --- two processes, one service ---------------------------------------------------------------


async def test_two_processes_share_stream_tokens_and_call_control(server, ava, tmp_path_factory, twilio_api, settings):
    """A token minted by the voice webhook of one process (this one, serving the application in-process)
    opens a stream on the other (a real Daphne process: it needs a process of its own), once. With Redis,
    a status callback received by one process ends the call held by the other; on the in-memory channel
    layer (no Redis) each process only reaches its own calls, so the callback goes to the process holding
    the call."""
    server.share_layer(settings)  # with REDIS_URL, the layer the other process shares
    second = await sync_to_async(start_test_server)(tmp_path_factory, "b", server_env(twilio_api.base), public=True)
    try:
        call_sid = "CA" + "d" * 32
        status, twiml = await signed_post(server, "/telephony/twilio/voice", call_params(call_sid))
        assert status == 200
        stream = ElementTree.fromstring(twiml).find("Connect/Stream")  # noqa: S314 - the service's own TwiML
        assert stream is not None and stream.get("url") == f"{server.ws_url}/telephony/twilio/stream"
        token = {p.get("name"): p.get("value") for p in stream.findall("Parameter")}["token"]

        async with TwilioStream(stream_url(second), token, call_sid=call_sid) as twilio:
            await twilio.start()
            await twilio.wait_for(is_event("media"), timeout=60)
            assert await refused(server, token, call_sid) == 4409  # spent: refused by either process
            assert await refused(second, token, call_sid) == 4409
            line = asyncio.create_task(twilio.silence(20))
            callback_to: Server = server if settings.REDIS_URL else second
            status, _ = await signed_post(
                callback_to, "/telephony/twilio/status", call_params(call_sid, CallStatus="completed")
            )
            assert status == 204
            assert await twilio.wait_closed(timeout=8) == 1000
            line.cancel()
            await asyncio.gather(line, return_exceptions=True)
        call = await wait_call(call_sid, status="completed", timeout=5)
        assert call.provider_call_id == call_sid and call.from_number == CALLER and call.to_number == NUMBER
    finally:
        await sync_to_async(stop_test_server)(second)
