"""The session's answering-machine handling on a hand-driven clock (the cascade pipeline with stand-in speech
parts, the call record in memory): the paths the end-to-end tests (telephony/tests/test_voicemail_e2e.py)
cannot wait for in real time: machine_start with no end verdict, the exact hold, a verdict that arrives
before the session has started, unknown variables in the message."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from realtime.engine.contracts import Ending
from realtime.engine.session.voicemail import GREETING_HOLD_SECONDS, MACHINE_END_WAIT_SECONDS
from testing import pipeline
from testing.fakes import silence
from testing.recording import MemoryRecorder, RecordedCall

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_db_threads")]

GREETING = "Hello, this is Ava from Acme Dental."
MESSAGE = "Hi {{first_name}}, this is Acme Dental {{branch}}. Please call us back."


class OutboundRecorder(MemoryRecorder):
    """A call record in memory for an answered outbound call with its variables."""

    def __init__(self, answered_by: str = "") -> None:
        super().__init__(channel="phone")
        self.answered_by = answered_by

    async def start(self) -> RecordedCall:
        call = await super().start()
        call.direction = "outbound"  # type: ignore[attr-defined]
        call.variables = {"first_name": "Robert"}  # type: ignore[attr-defined]
        call.answered_by = self.answered_by  # type: ignore[attr-defined]
        return call


class Harness(pipeline.Harness):
    def __init__(self, agent: Any, recorder: MemoryRecorder) -> None:
        super().__init__(agent, recorder=recorder)

    def said(self) -> list[str]:
        return [text for role, text in self.transport.transcripts() if role == "assistant"]

    async def ended(self) -> Any:
        assert self.task is not None
        await asyncio.wait_for(self.task, 10)
        return self.recorder.call


@pytest.fixture
def agent(active_agent: Any) -> Any:
    active_agent.greeting_type = "static"
    active_agent.static_greeting = GREETING
    active_agent.voicemail = {"detection": "provider", "action": "leave-message", "message": MESSAGE}
    active_agent.save()
    return active_agent


def fields_of(recorder: MemoryRecorder, message: str) -> dict[str, Any]:
    return next(fields for _, logged, fields in recorder.logs if logged == message)


async def test_the_greeting_waits_exactly_the_hold_without_a_verdict(agent):
    h = Harness(agent, OutboundRecorder())
    await h.start()
    began = h.clock.now()
    await h.feed(silence(int(GREETING_HOLD_SECONDS * 1000) - 100))
    assert h.transport.audio_ms() == 0  # held
    await h.feed(silence(2500))
    first = min(at for at, kind, _ in h.transport.events if kind == "audio")
    assert GREETING_HOLD_SECONDS - 0.01 <= first - began < GREETING_HOLD_SECONDS + 0.2
    held = fields_of(h.recorder, "greeting held for answering-machine detection")
    assert held == {"heldMs": 1500, "answeredBy": None, "greeting": "played"}
    call = await h.stop()
    assert call.ended_reason == "caller-hung-up"


async def test_machine_start_keeps_the_agent_quiet_and_without_an_end_verdict_the_message_is_left(agent):
    recorder = OutboundRecorder()
    h = Harness(agent, recorder)
    await h.start()
    await h.feed(silence(300))
    await h.conversation.answered_by("machine_start", detection_ms=1200)
    # The machine's greeting: nothing said, nothing answered, for MACHINE_END_WAIT_SECONDS.
    await h.feed(silence(int(MACHINE_END_WAIT_SECONDS * 1000) - 500))
    assert h.transport.audio_ms() == 0 and not h.said()
    await h.feed(silence(15000))
    call = await h.ended()
    assert (call.status, call.ended_reason) == ("completed", "voicemail")
    assert h.transport.ended == (Ending.COMPLETED, "")
    disclosure = h.conversation.context.disclosure
    assert h.said() == [f"{disclosure} Hi Robert, this is Acme Dental . Please call us back."]
    assert "no end of the machine's greeting was detected; leaving the message" in recorder.logged("warn")
    # {{branch}} is not a variable of the call: spoken as nothing, noted once.
    assert fields_of(recorder, "unknown variables in the voicemail message") == {"names": ["branch"]}
    verdict = fields_of(recorder, "answering-machine verdict")
    assert verdict["answeredBy"] == "machine_start" and verdict["detectionMs"] == 1200
    assert verdict["sinceAnswerMs"] >= 300


async def test_a_verdict_kept_on_the_call_before_the_stream_started_is_applied_at_once(agent):
    agent.voicemail = {"detection": "provider", "action": "hang-up", "message": ""}
    h = Harness(agent, OutboundRecorder(answered_by="machine_end_beep"))
    await h.start()
    await h.feed(silence(200))
    call = await h.ended()
    assert (call.status, call.ended_reason) == ("completed", "voicemail")
    assert h.transport.audio_ms() == 0
    assert "an answering machine answered; the call is ended" in h.recorder.logged("info")


async def test_a_human_verdict_after_the_greeting_changes_nothing_and_inbound_calls_are_not_armed(agent):
    h = Harness(agent, OutboundRecorder())
    await h.start()
    await h.feed(silence(2500))
    await h.conversation.answered_by("human")
    await h.conversation.answered_by("machine_end_beep")  # a second verdict after a person: acted on
    await h.feed(silence(8000))
    call = await h.ended()
    assert call.ended_reason == "voicemail"

    inbound = Harness(agent, MemoryRecorder(channel="phone"))
    await inbound.start()
    await inbound.conversation.answered_by("machine_end_beep")  # not armed: ignored
    await inbound.feed(silence(3000))
    assert inbound.transport.audio_ms() > 0
    call = await inbound.stop()
    assert call.ended_reason == "caller-hung-up"


# --- how soon, on the session's clock (the end-to-end tests, telephony/tests/test_voicemail_e2e.py, check
# the outcomes; bench/voicemail_amd.py measures a real server) ----------------------------------------


def first_audio(h: Harness, since: float = float("-inf")) -> float:
    return min(at for at, kind, _ in h.transport.events if kind == "audio" and at >= since)


async def test_a_human_verdict_during_the_hold_ends_it_and_the_agent_greets_at_once(agent):
    h = Harness(agent, OutboundRecorder())
    await h.start()
    began = h.clock.now()
    await h.feed(silence(900))
    assert h.transport.audio_ms() == 0  # held
    await h.conversation.answered_by("human", detection_ms=900)
    await h.feed(silence(2500))
    # The greeting starts at the verdict, not at the end of the hold.
    assert 0.9 - 0.01 <= first_audio(h) - began < 0.9 + 0.2
    held = fields_of(h.recorder, "greeting held for answering-machine detection")
    assert (held["answeredBy"], held["greeting"]) == ("human", "played")
    assert 900 <= held["heldMs"] <= 920, held  # the verdict ended it (within a frame of the clock)
    assert not any(kind == "clear" for _, kind, _ in h.transport.events)  # never cut
    call = await h.stop()
    assert call.ended_reason == "caller-hung-up"


async def test_an_inbound_call_is_greeted_at_once(agent):
    h = Harness(agent, MemoryRecorder(channel="phone"))
    await h.start()
    began = h.clock.now()
    await h.feed(silence(300))
    assert first_audio(h) - began < 0.2  # no hold
    assert not [fields for _, logged, fields in h.recorder.logs if logged.startswith("greeting held")]
    await h.stop()


@pytest.mark.parametrize("verdict", ["machine_start", "machine_end_beep", "fax"])
async def test_with_hang_up_a_machine_verdict_during_the_hold_ends_the_call_at_once(agent, verdict):
    agent.voicemail = {"detection": "provider", "action": "hang-up", "message": ""}
    h = Harness(agent, OutboundRecorder())
    await h.start()
    await h.feed(silence(300))
    await h.conversation.answered_by(verdict)
    await h.feed(silence(40))  # two frames of the session's clock
    assert h.transport.ended == (Ending.COMPLETED, "")
    call = await h.ended()
    assert (call.status, call.ended_reason) == ("completed", "voicemail")
    assert h.transport.audio_ms() == 0  # nothing said


async def test_a_machine_verdict_during_the_greeting_cuts_it_and_the_message_starts_at_once(agent):
    h = Harness(agent, OutboundRecorder())
    await h.start()
    await h.feed(silence(int(GREETING_HOLD_SECONDS * 1000) + 500))  # the hold ran out: the greeting plays
    assert h.transport.audio_ms() > 0
    verdict_at = h.clock.now()
    await h.conversation.answered_by("machine_end_beep", detection_ms=6100)
    await h.feed(silence(15000))
    call = await h.ended()
    assert (call.status, call.ended_reason) == ("completed", "voicemail")
    cleared = [at for at, kind, _ in h.transport.events if kind == "clear" and at >= verdict_at]
    assert cleared and cleared[0] - verdict_at < 0.02, cleared  # cut at the verdict
    assert first_audio(h, since=cleared[0]) - verdict_at < 0.1  # and the message follows
    disclosure = h.conversation.context.disclosure
    assert h.said()[-1] == f"{disclosure} Hi Robert, this is Acme Dental . Please call us back."
