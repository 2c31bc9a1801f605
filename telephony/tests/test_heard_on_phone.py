"""On a phone call the caller hears the agent later than the session's playout assumes (the network
and Twilio's buffer); the transport measures that from mark echoes (`playback_lag`), and a barge-in
keeps in the transcript only what the caller had really heard by then."""

from __future__ import annotations

from typing import Any

import pytest

from realtime.engine.contracts import TextPiece
from testing.fakes import RecordingTransport, ScriptedBrain, silence
from testing.pipeline import GREETING, Harness

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_db_threads")]

ANSWER = "One two three four five. Six seven eight nine ten. Eleven twelve thirteen fourteen fifteen."


class LateListener(RecordingTransport):
    """A transport whose listener plays everything `lag` seconds after the playout's estimate."""

    def __init__(self, clock: Any, lag: float) -> None:
        super().__init__(clock)
        self.lag = lag

    def playback_lag(self, now: float) -> float:
        return self.lag


@pytest.fixture
def agent(active_agent: Any) -> Any:
    active_agent.greeting_type = "static"
    active_agent.static_greeting = GREETING
    active_agent.save()
    return active_agent


async def conversation(agent: Any, lag: float | None, *, pause_ms: int) -> list[tuple[str, str]]:
    """The caller asks, and speaks again `pause_ms` after the answer starts playing (as the playout
    reckons); the transcripts after the greeting."""
    h = Harness(agent, texts=["question", "stop please"], brain=ScriptedBrain([TextPiece(ANSWER)]))
    if lag is not None:
        h.transport = LateListener(h.clock, lag)
        h.conversation.transport = h.transport
    await h.start()
    await h.feed(silence(2000))
    await h.talk(600, then_silence_ms=150)  # the answer starts playing 100 ms into the pause
    await h.feed(silence(pause_ms - 50))
    await h.talk(600, then_silence_ms=300)
    await h.stop()
    return h.transport.transcripts()[1:]


async def cut_answer(agent: Any, lag: float | None) -> str:
    # Late enough that even the late listener has heard the answer (REALTIME_CONTINUE_TURN_MS): a barge-in.
    return next(text for role, text in await conversation(agent, lag, pause_ms=850) if role == "assistant")


async def test_a_late_listener_is_credited_with_less_of_a_cut_answer(agent):
    on_time = await cut_answer(agent, None)
    late = await cut_answer(agent, 0.3)  # the fake voice speaks a word per 100 ms
    assert ANSWER.startswith(late) and ANSWER.startswith(on_time)
    assert len(on_time.split()) - len(late.split()) == pytest.approx(3, abs=1)


async def test_a_caller_who_speaks_before_really_hearing_the_answer_goes_on_with_the_turn(agent):
    # 550 ms into the answer as the playout reckons: heard for longer than REALTIME_CONTINUE_TURN_MS
    # (500 ms), a barge-in; but the late listener has heard only 250 ms of it: the turn goes on.
    on_time = await conversation(agent, None, pause_ms=550)
    assert [role for role, _ in on_time] == ["user", "assistant", "user", "assistant"]
    assert ANSWER.startswith(on_time[1][1]) and on_time[-1] == ("assistant", "Okay.")
    late = await conversation(agent, 0.3, pause_ms=550)
    # The unheard answer was dropped; the whole turn is answered once.
    assert late == [("user", "question"), ("user", "stop please"), ("assistant", "Okay.")]
