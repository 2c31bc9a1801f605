"""How the session shell ends a call itself, with the cascade pipeline, stand-in speech parts and a
hand-driven clock: end_call (the goodbye plays, then the call ends; a default goodbye when the brain
said none; dropped when the caller spoke over it) and the agent's maxDurationSeconds (what the agent
is saying is cut, the closing line plays, then the call ends). The call record is in memory."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from realtime.engine.contracts import Ending, TextPiece, ToolCall, ToolOutcome
from realtime.engine.phrases import phrase
from testing import pipeline
from testing.fakes import ScriptedBrain, ScriptedTools, silence
from testing.recording import MemoryRecorder

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_db_threads")]

END_CALL = ToolCall(id="call_end", name="end_call", arguments={})
ENDING = ToolOutcome(result='{"status":"ending"}', status="success", end_call=True)


class Harness(pipeline.Harness):
    """The shared harness with a call record in memory and end_call answered as the dispatcher does."""

    def __init__(self, agent: Any, *, texts: Any = (), brain: Any = None, tools: Any = None) -> None:
        super().__init__(
            agent,
            texts=texts,
            brain=brain or ScriptedBrain(),
            tools=tools or ScriptedTools({"end_call": ENDING}),
            recorder=MemoryRecorder(),
        )

    async def ended(self) -> Any:
        assert self.task is not None
        await asyncio.wait_for(self.task, 10)
        return self.recorder.call

    def said(self) -> list[str]:
        return [text for role, text in self.transport.transcripts() if role == "assistant"]


@pytest.fixture
def agent(active_agent):
    active_agent.greeting_type = "none"
    active_agent.save()
    return active_agent


async def test_end_call_ends_the_call_once_the_goodbye_has_played(agent):
    brain = ScriptedBrain([TextPiece("Happy to help. Goodbye!"), END_CALL])
    h = Harness(agent, texts=["that is all bye"], brain=brain)
    await h.start()
    await h.feed(silence(2000))
    await h.talk(600)
    await h.feed(silence(2000))
    call = await h.ended()
    assert h.said()[-1] == "Happy to help. Goodbye!"
    assert h.transport.ended == (Ending.COMPLETED, "")
    assert (call.status, call.ended_reason) == ("completed", "agent-ended-call")
    assert call.messages[-1] == ("assistant", "Happy to help. Goodbye!")
    assert len(brain.seen) == 1  # the brain is not asked again after end_call


async def test_end_call_without_words_says_the_default_goodbye_in_the_agents_language(agent):
    agent.language = "es-ES"
    h = Harness(agent, texts=["adios"], brain=ScriptedBrain([END_CALL]))
    await h.start()
    await h.feed(silence(3000))
    await h.talk(600)
    await h.feed(silence(2000))
    call = await h.ended()
    assert h.said()[-1] == phrase("goodbye", "es-ES")
    assert (call.status, call.ended_reason) == ("completed", "agent-ended-call")


async def test_end_call_is_dropped_when_the_caller_speaks_over_the_goodbye(agent):
    tools = ScriptedTools({"end_call": ENDING}, wait=True)
    brain = ScriptedBrain([TextPiece("Goodbye then."), END_CALL], [TextPiece("Of course, go on.")])
    h = Harness(agent, texts=["bye", "wait one more thing"], brain=brain, tools=tools)
    await h.start()
    await h.feed(silence(2000))
    await h.talk(600, then_silence_ms=150)
    await h.feed(silence(1000))  # the goodbye has played; end_call has not answered yet
    await h.talk(800)  # the caller speaks again: a barge-in
    tools.release.set()
    await h.feed(silence(2000))
    assert h.transport.ended is None and not h.task.done()
    assert "barge-in" in h.recorder.logged("info")
    assert h.said()[-1] == "Of course, go on."
    await h.conversation.stop()
    call = await h.ended()
    assert (call.status, call.ended_reason) == ("completed", "caller-hung-up")


async def test_the_max_duration_cuts_the_agent_says_the_closing_line_and_ends_the_call(agent):
    agent.max_duration_seconds = 4
    long_answer = " ".join(["Here is a very long answer."] * 8)
    h = Harness(agent, texts=["tell me everything"], brain=ScriptedBrain([TextPiece(long_answer)]))
    await h.start()
    await h.feed(silence(2000))
    await h.talk(600)  # the answer starts at about 3 s and would last 4 s
    await h.feed(silence(5000))
    call = await h.ended()
    assert "clear" in h.transport.kinds()  # the long answer was cut at the limit
    assert h.said()[-1] == phrase("max_duration", "en-US")
    assert long_answer not in h.said()
    assert h.transport.ended == (Ending.COMPLETED, "")
    assert (call.status, call.ended_reason) == ("completed", "max-duration-reached")
    assert "maximum call duration reached; closing the call" in h.recorder.logged("info")


async def test_caller_turns_during_the_closing_line_are_not_taken(agent):
    agent.max_duration_seconds = 3
    h = Harness(agent, texts=["hello there"], brain=ScriptedBrain([TextPiece("Hi!")]))
    await h.start()
    await h.feed(silence(3050))
    await h.talk(800)  # speech over the closing line: no barge-in, no turn
    await h.feed(silence(3000))
    call = await h.ended()
    assert h.said()[-1] == phrase("max_duration", "en-US")
    assert ("user", "hello there") not in h.transport.transcripts()
    assert call.ended_reason == "max-duration-reached"
