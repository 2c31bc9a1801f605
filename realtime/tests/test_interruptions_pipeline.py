"""Caller speech over the agent, as the agent's `interruption` settings say (docs/guides/conversation.md):
`adaptive` cuts for real words only, `vad` cuts on sound and resumes when it held no words, `off` never
cuts. The session shell and the cascade on the hand-moved clock, with scripted speech parts."""

from __future__ import annotations

import pytest

from realtime.engine.contracts import TextPiece, ToolCall, ToolOutcome
from testing.fakes import ScriptedBrain, ScriptedTools, silence, speech
from testing.pipeline import Harness
from testing.recording import MemoryRecorder

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_db_threads")]

LONG = "One two three four five six. Seven eight nine ten eleven twelve. Thirteen fourteen fifteen sixteen."


@pytest.fixture
def agent(greeting_agent):
    return greeting_agent


@pytest.fixture
def with_mode(agent):
    """Change the agent's interruption settings (the session reads them when it starts)."""

    def change(**interruption):
        agent.interruption = {**(getattr(agent, "interruption", None) or {}), **interruption}

    return change


def interruptions(h: Harness) -> list[str]:
    """The interruptions on the call's turn timeline (the agent log), by kind."""
    return [fields["kind"] for _, message, fields in h.recorder.logs if message == "interruption"]


async def answering(h: Harness) -> float:
    """Greeted, then the caller asks; returns the clock time the long answer starts playing."""
    await h.start()
    await h.feed(silence(2300))  # the disclosure and the greeting have played
    await h.talk(600, then_silence_ms=150)
    return h.clock.now()


@pytest.mark.parametrize("words", ["okay", "mm-hmm yeah", ""], ids=["okay", "mm-hmm-yeah", "a-noise"])
async def test_a_backchannel_or_a_noise_does_not_cut_the_agent_nor_become_a_turn(agent, words):
    brain = ScriptedBrain([TextPiece(LONG)])
    h = Harness(agent, recorder=MemoryRecorder(), texts=["tell me everything", words], brain=brain)
    await answering(h)
    await h.feed(silence(600))
    await h.talk(400, then_silence_ms=3000)  # over the answer's second sentence
    assert "clear" not in h.transport.kinds()
    assert h.transport.transcripts()[-1] == ("assistant", LONG)
    assert [role for role, _ in h.transport.transcripts()].count("assistant") == 2  # greeting, answer
    assert len(brain.seen) == 1  # nothing answered the backchannel
    assert interruptions(h) == ["backchannel" if words else "ignored"]
    await h.stop()


async def test_a_real_interruption_cuts_the_agent_as_soon_as_its_words_are_known_and_is_answered(agent):
    brain = ScriptedBrain([TextPiece(LONG)], [TextPiece("We open at nine.")])
    h = Harness(
        agent, recorder=MemoryRecorder(), texts=["tell me everything", "stop what time do you open"], brain=brain
    )
    await answering(h)
    await h.feed(silence(600))
    began = h.clock.now()
    await h.feed(speech(1200) + silence(2500))
    cleared = next(at for at, kind, _ in h.transport.events if kind == "clear")
    assert cleared - began <= 0.5
    assert h.transport.transcripts()[-1] == ("assistant", "We open at nine.")
    assert interruptions(h) == ["real"]
    await h.stop()


async def test_with_minimum_words_a_short_word_does_not_cut_but_a_sentence_does(agent, with_mode):
    with_mode(minWords=3)
    brain = ScriptedBrain([TextPiece(LONG)], [TextPiece("Sure.")])
    h = Harness(
        agent, recorder=MemoryRecorder(), texts=["tell me everything", "wait", "no wait go back please"], brain=brain
    )
    await answering(h)
    await h.feed(silence(300))
    await h.talk(300, then_silence_ms=300)
    assert "clear" not in h.transport.kinds()
    await h.talk(900, then_silence_ms=2000)
    assert "clear" in h.transport.kinds()
    assert ("user", "no wait go back please") in h.transport.transcripts()
    await h.stop()


async def test_mode_off_never_cuts_and_answers_what_was_said_once_the_agent_has_finished(agent, with_mode):
    with_mode(mode="off")
    brain = ScriptedBrain([TextPiece(LONG)], [TextPiece("We open at nine.")])
    h = Harness(agent, recorder=MemoryRecorder(), texts=["tell me everything", "what time do you open"], brain=brain)
    await answering(h)
    await h.feed(silence(300))
    await h.talk(1000, then_silence_ms=4000)
    assert "clear" not in h.transport.kinds()
    assistant = [text for role, text in h.transport.transcripts() if role == "assistant"]
    assert assistant[1:] == [LONG, "We open at nine."]
    await h.stop()


async def test_mode_vad_cuts_on_a_noise_and_then_resumes_the_cut_sentence(agent, with_mode):
    with_mode(mode="vad", resumeAfterMs=300)
    brain = ScriptedBrain([TextPiece(LONG)])
    h = Harness(agent, recorder=MemoryRecorder(), texts=["tell me everything", ""], brain=brain)
    await answering(h)
    await h.feed(silence(800))  # inside the second sentence
    await h.talk(400, then_silence_ms=3000)
    assert "clear" in h.transport.kinds()
    assistant = [text for role, text in h.transport.transcripts() if role == "assistant"]
    assert assistant[-1] == "Seven eight nine ten eleven twelve. Thirteen fourteen fifteen sixteen."
    assert len(brain.seen) == 1
    assert interruptions(h) == ["false"]
    await h.stop()


async def test_a_noise_during_the_disclosure_never_cuts_it_in_vad_mode(agent, with_mode):
    with_mode(mode="vad")
    h = Harness(agent, recorder=MemoryRecorder(), texts=[""])
    await h.start()
    await h.feed(silence(200))
    await h.feed(speech(900) + silence(300))  # inside the 1.3 s disclosure
    assert "clear" not in h.transport.kinds()
    await h.stop()


# --- decided actions and tool requests, when the caller goes on speaking ----------------------------


FIRST, SECOND = "please transfer me to a human", "i want to speak to a real person"


async def test_a_transfer_decided_on_the_first_sentence_stands_when_the_whole_turn_asks_for_it(agent):
    destination = "+15550001111"
    transfer = ToolOutcome(result='{"status": "transferring"}', status="success", transfer_to=destination)
    calls = (
        [ToolCall(name="transfer_call", arguments={}, id="t1")],
        [ToolCall(name="transfer_call", arguments={}, id="t2")],
    )
    brain = ScriptedBrain(*calls)
    h = Harness(
        agent,
        recorder=MemoryRecorder(),
        texts=[FIRST, SECOND],
        brain=brain,
        tools=ScriptedTools({"transfer_call": transfer}),
    )
    await h.start()
    await h.feed(silence(2300))
    await h.talk(600, then_silence_ms=150)  # the turn ends: the transfer is decided, the handoff starts
    await h.talk(500, then_silence_ms=300)  # the caller goes on over the handoff, before hearing it
    assert "clear" not in h.transport.kinds()  # the whole turn still asks for a person: the handoff plays on
    last_word = h.clock.now() - 0.3
    await h.feed(silence(6000))
    assert h.transport.transferred_to == destination
    transferred_at = next(at for at, kind, _ in h.transport.events if kind == "transfer")
    assert transferred_at - last_word <= 10
    assert [turn.text for turn in brain.seen[-1] if turn.role == "user"] == [f"{FIRST} {SECOND}"]


async def test_mode_off_answers_a_typed_turn_once_the_agent_has_finished(agent, with_mode):
    with_mode(mode="off")
    brain = ScriptedBrain([TextPiece(LONG)], [TextPiece("We open at nine.")])
    h = Harness(agent, recorder=MemoryRecorder(), texts=["tell me everything"], brain=brain)
    await answering(h)
    await h.feed(silence(300))
    await h.conversation.caller_text("what time do you open")
    await h.feed(silence(3000))
    assert "clear" not in h.transport.kinds()
    assistant = [text for role, text in h.transport.transcripts() if role == "assistant"]
    assert assistant[1:] == [LONG, "We open at nine."]
    await h.stop()


async def test_one_word_heard_once_in_a_backchannel_does_not_cut_the_agent(agent):
    # Under load the recognizer's words so far can be a sound misheard as a word ("him" for "mm-hmm"),
    # changed by the next 100 ms: one word cuts only when it is heard twice in a row.
    brain = ScriptedBrain([TextPiece(LONG)])
    h = Harness(agent, recorder=MemoryRecorder(), texts=["tell me everything", "mm-hmm"], brain=brain)
    guesses = iter(["him", "mm-hmm", "mm-hmm", "mm-hmm", "mm-hmm", "mm-hmm", "mm-hmm"])
    h.parts["recognizer"].peek = lambda: next(guesses, "mm-hmm")
    await answering(h)
    await h.feed(silence(600))
    await h.talk(600, then_silence_ms=3000)
    assert "clear" not in h.transport.kinds()
    assert h.transport.transcripts()[-1] == ("assistant", LONG)
    assert interruptions(h) == ["backchannel"]
    await h.stop()


async def test_a_transfer_decided_on_half_a_turn_is_taken_back_when_the_rest_asks_for_something_else(agent):
    destination = "+15550001111"
    transfer = ToolOutcome(result='{"status": "transferring"}', status="success", transfer_to=destination)
    brain = ScriptedBrain(
        [ToolCall(name="transfer_call", arguments={}, id="t1")],
        [TextPiece("Your order ships tomorrow.")],  # asked again with the whole turn: no transfer
        [TextPiece("Your order ships tomorrow.")],
    )
    h = Harness(
        agent,
        recorder=MemoryRecorder(),
        texts=["i want a person", "no wait where is my order"],
        brain=brain,
        tools=ScriptedTools({"transfer_call": transfer}),
    )
    await h.start()
    await h.feed(silence(2300))
    await h.talk(600, then_silence_ms=150)
    await h.talk(500, then_silence_ms=300)
    await h.feed(silence(4000))
    assert "clear" in h.transport.kinds()  # the handoff was for half a turn: it is dropped
    assert h.transport.transferred_to is None and not h.task.done()
    assert h.transport.transcripts()[-1] == ("assistant", "Your order ships tomorrow.")
    assert "the caller went on speaking; the transfer is decided again with the whole turn" in h.recorder.logged()
    await h.stop()
