"""Answering machines on outbound calls end to end, through the project's ASGI application in the test's
process (testing/inprocess.py): an outbound call made with telephony.outbound (its variables with it), its
media stream played by Twilio's side (testing/twilio_stream.py) with a stream token naming that call, the
real offline engine, and Twilio's asynchronous AMD verdict POSTed signed to /telephony/twilio/amd (over
ASGI) at the moment a test chooses.

These are outcome checks (who hears what, what is logged, how the call ends). How soon (the greeting
exactly GREETING_HOLD_SECONDS after the start without a verdict, at the verdict with `human`, at once for an
inbound call; a machine with `hang-up` ending the call at its verdict; the greeting cut and the message
started at a machine's verdict) is checked on the session's hand-moved clock, where it is exact:
realtime/tests/test_voicemail_session.py. The figures in docs/guides/voicemail.md are
bench/voicemail_amd.py's, against a real server.

A test that posts its verdict during the hold makes the hold long (`long_hold`: the application runs in
this process): the verdict must come before the hold runs out, and on a loaded machine a POST may come
later than 1.5 s after the start. With a long hold only the verdict can end it."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from twilio.request_validator import RequestValidator

from calls.logging import flush_agent_logs
from calls.models import AgentLog, Call
from realtime.engine.session import voicemail as session_voicemail
from realtime.engine.session.voicemail import GREETING_HOLD_SECONDS
from telephony import audio
from telephony.outbound.services import outbound_call_create
from telephony.services.accounts import telephony_account_set
from telephony.services.numbers import phone_number_assign, phone_number_claim
from telephony.streams import stream_token_issue
from telephony.voicemail import AMD_PATH
from testing.calls import wait_call
from testing.inprocess import InProcessServer, serving
from testing.twilio_stream import TwilioStream, from_phone, is_event, quiet
from testing.twilio_webhooks import amd_params
from testing.waiting import polled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

GREETING = "Hello, this is Ava from Acme Dental about your appointment."
INSTRUCTIONS = "You remind patients of their dental appointments and answer their questions."
MESSAGE = "Hello {{first_name}}, this is Acme Dental. Your cleaning is on {{day}} morning. Please call us back."
FILLED = "Hello Robert, this is Acme Dental. Your cleaning is on Tuesday morning. Please call us back."
VARIABLES = {"first_name": "Robert", "day": "Tuesday"}
NUMBER = "+14155550100"
CALLEE = "+14155550177"
ACCOUNT_SID = "AC" + "7" * 32
AUTH_TOKEN = "e" * 32
SILENCE = bytes([audio.SILENCE_BYTE])
LONG_HOLD_SECONDS = 120.0  # longer than any wait of these tests


@pytest.fixture
def server(engine_loaded: None, realtime_settings: Any, settings: Any, tmp_path: Any) -> Iterator[InProcessServer]:
    """The application (after realtime_settings, which the agents' fixtures use: its REALTIME_WS_URL wins)."""
    with serving(settings, {"TELEPHONY_CALL_END_GRACE_SECONDS": 10}, public=True, folder=tmp_path) as started:
        yield started


@pytest.fixture
def long_hold(monkeypatch: Any) -> float:
    """The greeting waits LONG_HOLD_SECONDS for a verdict (see the module's docstring)."""
    monkeypatch.setattr(session_voicemail, "GREETING_HOLD_SECONDS", LONG_HOLD_SECONDS)
    return LONG_HOLD_SECONDS


def make_agent_with(owner: Any, make_agent: Any, voicemail: dict[str, str]) -> Any:
    agent = make_agent(
        owner.organization,
        name="Ava",
        status="active",
        instructions=INSTRUCTIONS,
        greeting_type="static",
        static_greeting=GREETING,
        voicemail=voicemail,
    )
    telephony_account_set(organization=owner.organization, account_sid=ACCOUNT_SID, auth_token=AUTH_TOKEN)
    number = phone_number_claim(organization=owner.organization, number=NUMBER)
    phone_number_assign(organization=owner.organization, agent=agent, phone_number_id=number.pk)
    agent.number = number
    return agent


@pytest.fixture
def leaves_message(owner: Any, make_agent: Any, realtime_settings: Any) -> Any:
    return make_agent_with(owner, make_agent, {"detection": "provider", "action": "leave-message", "message": MESSAGE})


@pytest.fixture
def hangs_up(owner: Any, make_agent: Any, realtime_settings: Any) -> Any:
    return make_agent_with(owner, make_agent, {"detection": "provider", "action": "hang-up", "message": ""})


def answered_call(agent: Any, call_sid: str) -> tuple[Call, str]:
    """An outbound call as placing it leaves it (queued, the carrier's CallSid kept), and the stream token
    of its <Connect><Stream> naming it."""
    call = outbound_call_create(agent=agent, phone_number=agent.number, to=CALLEE, variables=VARIABLES)
    call.provider_call_id = call_sid
    call.save(update_fields=["provider_call_id"])
    token = stream_token_issue(
        organization_id=agent.organization_id,
        agent_id=agent.pk,
        phone_number_id=agent.number.pk,
        call_sid=call_sid,
        from_number=NUMBER,
        to_number=CALLEE,
        call_id=call.pk,
    )
    return call, token


async def post_verdict(server: InProcessServer, call_sid: str, answered_by: str, duration_ms: int = 2400) -> int:
    """Twilio's AsyncAmdStatusCallback: form-encoded, signed over PUBLIC_BASE_URL + path."""
    params = amd_params(sid=call_sid, answered_by=answered_by, duration_ms=duration_ms, account_sid=ACCOUNT_SID)
    signature = RequestValidator(AUTH_TOKEN).compute_signature(server.http_url + AMD_PATH, params)
    async with server.ahttp() as client:
        response = await client.post(AMD_PATH, data=params, headers={"X-Twilio-Signature": signature})
    return response.status_code


def stream_url(server: InProcessServer) -> str:
    return f"{server.ws_url}/telephony/twilio/stream"


def sid(letter: str) -> str:
    return "CA" + letter * 32


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z']+", text.lower()))


def recognize(agent: Any, pcm16_16k: bytes, vocabulary: str) -> str:
    from realtime.engine.speech.pocketsphinx import recognizer_for_agent

    recognizer = recognizer_for_agent(agent, vocabulary_texts=[vocabulary], workers=0)
    assert recognizer is not None
    recognizer.start()
    for offset in range(0, len(pcm16_16k), 640):
        recognizer.feed(pcm16_16k[offset : offset + 640])
    return recognizer.finish()


async def transcript(call: Call) -> list[tuple[str, str]]:
    return await sync_to_async(
        lambda: list(call.messages.order_by("occurred_at", "sequence").values_list("role", "content"))
    )()


class Line:
    """The callee's side of the line: silence at real time (a phone line always carries audio)."""

    def __init__(self, twilio: TwilioStream, seconds: float = 90) -> None:
        self.done = asyncio.Event()
        self.task = asyncio.create_task(twilio.stream(SILENCE * int(8000 * seconds), stop_when=self.done.is_set))

    async def close(self) -> None:
        self.done.set()
        await asyncio.gather(self.task, return_exceptions=True)


async def first_media_after(twilio: TwilioStream, started: float, timeout: float = 30) -> float:
    """Seconds from `started` (loop time) to the agent's first audio on the stream."""
    index = await twilio.wait_for(is_event("media"), timeout=timeout)
    return twilio.messages[index].at - started


async def log_line(agent: Any, message: str, timeout: float = 10) -> dict[str, Any]:
    """The agent-log line `message` of the agent's call (each look writes the lines buffered so far: the
    tests' settings run no log writer thread)."""

    def read() -> dict[str, Any] | None:
        flush_agent_logs()
        found = AgentLog.objects.filter(agent=agent, content__message=message).values_list("content", flat=True).first()
        return None if found is None else dict(found)

    try:
        return await polled(sync_to_async(read), what=f"the log line {message!r}", timeout=timeout)
    except AssertionError:
        lines = await sync_to_async(
            lambda: list(
                AgentLog.objects.filter(agent=agent).order_by("timestamp", "sequence").values_list("content", flat=True)
            )
        )()
        raise AssertionError(f"no {message!r} in {lines}") from None


def session_lines(call: Call) -> list[str] | None:
    """The messages of the agent-log lines of the session that carries `call` (its "session started" line
    names the call), once that line is written (the lines buffered so far are written first)."""
    flush_agent_logs()
    started = AgentLog.objects.filter(content__message="session started", content__callId=str(call.pk)).first()
    if started is None:
        return None
    lines = AgentLog.objects.filter(agent_id=started.agent_id, session_id=started.session_id)
    return [line["message"] for line in lines.values_list("content", flat=True)]


async def call_log_line(call: Call, message: str, timeout: float = 20) -> dict[str, Any]:
    """The agent-log line `message` of the session that carries `call` (its "session started" line names
    the call; each look writes the lines buffered so far: the tests' settings run no log writer thread)."""

    def read() -> dict[str, Any] | None:
        flush_agent_logs()
        started = AgentLog.objects.filter(content__message="session started", content__callId=str(call.pk)).first()
        if started is None:
            return None
        found = (
            AgentLog.objects.filter(agent_id=started.agent_id, session_id=started.session_id, content__message=message)
            .values_list("content", flat=True)
            .first()
        )
        return None if found is None else dict(found)

    return await polled(sync_to_async(read), what=f"the log line {message!r} of call {call.pk}", timeout=timeout)


# --- an inbound call ----------------------------------------------------------------------------


async def test_an_inbound_call_is_not_held(server, leaves_message):
    """Detection concerns outbound calls only: an inbound call to the same agent is greeted, never held
    (at once: realtime/tests/test_voicemail_session.py, on the session's clock)."""
    call_sid = sid("a")
    token = await sync_to_async(stream_token_issue)(
        organization_id=leaves_message.organization_id,
        agent_id=leaves_message.pk,
        phone_number_id=leaves_message.number.pk,
        call_sid=call_sid,
        from_number=CALLEE,
        to_number=NUMBER,
    )
    async with TwilioStream(stream_url(server), token, call_sid=call_sid) as twilio:
        await twilio.start()
        line = Line(twilio)
        await twilio.wait_for(is_event("media"), timeout=30)  # greeted
        await line.close()
        await twilio.stop()
        await twilio.wait_closed()
    row = await wait_call(call_sid, status="completed")
    assert row.direction == "inbound" and row.ended_reason == "caller-hung-up"
    lines = await polled(sync_to_async(lambda: session_lines(row)), what="the session's log lines", timeout=10)
    assert "greeting held for answering-machine detection" not in lines, lines


# --- a person -----------------------------------------------------------------------------------


async def test_a_human_verdict_ends_the_hold_and_the_agent_greets(server, leaves_message, long_hold):
    """The greeting does not wait out the hold: the verdict ends it (at the verdict: the session's clock,
    realtime/tests/test_voicemail_session.py; how soon after the POST is a figure of
    bench/voicemail_amd.py)."""
    call_sid = sid("1")
    call, token = await sync_to_async(answered_call)(leaves_message, call_sid)
    async with TwilioStream(stream_url(server), token, call_sid=call_sid) as twilio:
        await twilio.start()
        line = Line(twilio)
        await call_log_line(call, "session started")  # the session holds the greeting now
        before = len(twilio.messages)
        assert await post_verdict(server, call_sid, "human", 900) == 204
        await twilio.wait_for(is_event("media"), timeout=30)
        assert not any(item.message["event"] == "media" for item in twilio.messages[:before])  # held until then
        # The verdict ended the hold (a hold that runs out names no verdict).
        held = await log_line(leaves_message, "greeting held for answering-machine detection")
        assert held["answeredBy"] == "human" and held["greeting"] == "played"
        assert held["heldMs"] < long_hold * 1000
        # The greeting plays out (its audio ends and every mark is echoed): it was never cut.
        await quiet(twilio)
        assert not any(item.message["event"] == "clear" for item in twilio.messages)
        await line.close()
        await twilio.stop()
        await twilio.wait_closed()
    row = await wait_call(call_sid, status="completed")
    assert row.pk == call.pk and row.direction == "outbound"  # the stream took the outbound call over
    assert (row.answered_by, row.ended_reason) == ("human", "caller-hung-up")
    rows = await transcript(row)
    assert rows and rows[0][0] == "assistant"


async def test_no_verdict_within_the_hold_lets_the_greeting_play(server, leaves_message):
    """The hold runs out and the agent greets (exactly GREETING_HOLD_SECONDS after the start: the
    session's clock, realtime/tests/test_voicemail_session.py)."""
    call_sid = sid("2")
    _, token = await sync_to_async(answered_call)(leaves_message, call_sid)
    loop = asyncio.get_running_loop()
    async with TwilioStream(stream_url(server), token, call_sid=call_sid) as twilio:
        started = loop.time()
        await twilio.start()
        line = Line(twilio)
        heard = await first_media_after(twilio, started)
        held = await log_line(leaves_message, "greeting held for answering-machine detection")
        # The hold ran out (no verdict named), and nothing was heard before it had.
        assert held["answeredBy"] is None and held["greeting"] == "played"
        assert held["heldMs"] >= GREETING_HOLD_SECONDS * 1000 and heard >= GREETING_HOLD_SECONDS
        await line.close()
        await twilio.stop()
        await twilio.wait_closed()
    row = await wait_call(call_sid, status="completed")
    assert (row.answered_by, row.ended_reason) == ("", "caller-hung-up")


# --- a machine ----------------------------------------------------------------------------------


async def test_a_machine_hears_the_message_with_the_calls_variables_and_the_call_ends(server, leaves_message):
    """The verdict comes after the hold (Twilio's detection takes seconds): the greeting already plays;
    it is cut (Twilio is told to clear), the disclosure and the message are spoken, the call ends."""
    call_sid = sid("3")
    call, token = await sync_to_async(answered_call)(leaves_message, call_sid)
    async with TwilioStream(stream_url(server), token, call_sid=call_sid) as twilio:
        await twilio.start()
        line = Line(twilio)
        first = await twilio.wait_for(is_event("media"), timeout=30)  # the greeting (no verdict in time)
        await twilio.wait_for(is_event("media"), after=first + 1, timeout=30)  # and it goes on playing
        before = len(twilio.messages)
        assert await post_verdict(server, call_sid, "machine_end_beep", 6100) == 204
        cleared = await twilio.wait_for(is_event("clear"), after=before, timeout=10)
        message_start = await twilio.wait_for(is_event("media"), after=cleared, timeout=30)
        assert await twilio.wait_closed(timeout=90) == 1000
        await line.close()
        spoken = from_phone(twilio.audio(message_start))
    row = await wait_call(call_sid, status="completed")
    assert row.pk == call.pk
    assert (row.status, row.ended_reason, row.answered_by) == ("completed", "voicemail", "machine_end_beep")
    assert row.billable_seconds is not None and row.billable_seconds > 0  # billed like any call
    rows = await transcript(row)
    last_role, last_text = rows[-1]
    assert last_role == "assistant" and last_text.endswith(FILLED), rows
    assert "{{" not in last_text
    # What the machine recorded: the message, its variables filled.
    heard = await sync_to_async(recognize)(leaves_message, spoken, FILLED)
    assert {"robert", "tuesday", "dental"} <= words(heard) or len(words(heard) & words(FILLED)) >= 6, heard


async def test_a_machine_verdict_during_the_hold_skips_the_greeting(server, leaves_message, long_hold):
    call_sid = sid("4")
    call, token = await sync_to_async(answered_call)(leaves_message, call_sid)
    async with TwilioStream(stream_url(server), token, call_sid=call_sid) as twilio:
        await twilio.start()
        line = Line(twilio)
        await call_log_line(call, "session started")  # the session holds the greeting now
        assert await post_verdict(server, call_sid, "machine_end_silence") == 204
        await twilio.wait_for(is_event("media"), timeout=30)  # the message
        assert await twilio.wait_closed(timeout=90) == 1000
        await line.close()
        assert not any(item.message["event"] == "clear" for item in twilio.messages)
    row = await wait_call(call_sid, status="completed")
    assert row.ended_reason == "voicemail"
    rows = await transcript(row)
    assert [role for role, _ in rows] == ["assistant"]  # no greeting: only the message
    assert rows[0][1].endswith(FILLED) and GREETING not in rows[0][1]


async def test_machine_start_waits_for_the_beep_then_leaves_the_message(server, leaves_message, long_hold):
    call_sid = sid("5")
    call, token = await sync_to_async(answered_call)(leaves_message, call_sid)
    async with TwilioStream(stream_url(server), token, call_sid=call_sid) as twilio:
        await twilio.start()
        line = Line(twilio)
        await call_log_line(call, "session started")  # the session holds the greeting now
        assert await post_verdict(server, call_sid, "machine_start", 1200) == 204
        # The machine's greeting: the hold ends without the agent's greeting, and the agent stays quiet.
        held = await call_log_line(call, "greeting held for answering-machine detection")
        assert held["answeredBy"] == "machine_start" and held["greeting"] == "not played", held
        assert not any(item.message["event"] == "media" for item in twilio.messages)
        beep = len(twilio.messages)
        assert await post_verdict(server, call_sid, "machine_end_beep", 4800) == 204
        first = await twilio.wait_for(is_event("media"), timeout=30)
        assert first >= beep  # the agent said nothing before the beep
        assert await twilio.wait_closed(timeout=90) == 1000
        await line.close()
    row = await wait_call(call_sid, status="completed")
    assert (row.ended_reason, row.answered_by) == ("voicemail", "machine_end_beep")
    assert (await transcript(row))[-1][1].endswith(FILLED)


@pytest.mark.parametrize("verdict", ["machine_start", "machine_end_beep", "fax"])
async def test_with_hang_up_a_machine_ends_the_call_at_once(server, hangs_up, verdict, long_hold):
    """The call ends with nothing said (at the verdict: the session's clock,
    realtime/tests/test_voicemail_session.py)."""
    call_sid = sid("6" if verdict == "machine_start" else "7" if verdict == "fax" else "8")
    call, token = await sync_to_async(answered_call)(hangs_up, call_sid)
    async with TwilioStream(stream_url(server), token, call_sid=call_sid) as twilio:
        await twilio.start()
        line = Line(twilio)
        await call_log_line(call, "session started")  # the session holds the greeting now
        assert await post_verdict(server, call_sid, verdict) == 204
        assert await twilio.wait_closed(timeout=10) == 1000
        await line.close()
        assert not any(item.message["event"] == "media" for item in twilio.messages)  # nothing said
    row = await wait_call(call_sid, status="completed")
    assert (row.status, row.ended_reason, row.answered_by) == ("completed", "voicemail", verdict)


async def test_with_hang_up_a_machine_verdict_after_the_greeting_ends_the_call(server, hangs_up):
    call_sid = sid("9")
    _, token = await sync_to_async(answered_call)(hangs_up, call_sid)
    async with TwilioStream(stream_url(server), token, call_sid=call_sid) as twilio:
        await twilio.start()
        line = Line(twilio)
        await twilio.wait_for(is_event("media"), timeout=30)
        assert await post_verdict(server, call_sid, "machine_start") == 204
        assert await twilio.wait_closed(timeout=10) == 1000
        await line.close()
    row = await wait_call(call_sid, status="completed")
    assert row.ended_reason == "voicemail"
