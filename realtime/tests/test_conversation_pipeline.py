"""A conversation that holds when people talk naturally (issue 35), in the engine on the hand-moved clock
(testing/pipeline.py): the session shell and the cascade pipeline with stand-in speech parts, so that
where the caller's words fall against the agent's work is exact, and no test waits on the wall clock.

- a transfer decided on the first sentence of a request is carried out when the caller's second
  sentence arrives while its announcement plays;
- a continuation that leads the brain to the same tool with the same arguments runs the tool once;
- a brain that never answers gets the caller an apology after RESPONSE_TIMEOUT_SECONDS, and the call
  goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest

from realtime.engine.cascade.listener import RecognizerJob
from realtime.engine.clock import settle
from realtime.engine.contracts import BrainContext, TextPiece, ToolCall, ToolOutcome, Turn
from testing.fakes import ScriptedBrain, ScriptedTools, silence, speech
from testing.pipeline import Harness
from testing.recording import MemoryRecorder

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_db_threads")]

DESTINATION = "+15550001111"
TRANSFER = ToolOutcome(result='{"status": "transferring"}', status="success", transfer_to=DESTINATION)
TRANSFER_CALL = ToolCall(name="transfer_call", arguments={}, id="call_transfer")
TRANSFER_FIRST = "please transfer me to a human"
TRANSFER_SECOND = "i want to speak to a real person"
PARCEL_FIRST = "where is my parcel"
PARCEL_SECOND = "please track my parcel delivery for me"
OPENING = "We open at nine."


@pytest.fixture
def agent(greeting_agent):
    return greeting_agent


async def greeted(h: Harness) -> None:
    await h.start()
    await h.feed(silence(2300))  # the disclosure and the greeting have played


def finish_held(released: asyncio.Event) -> Callable[..., Any]:
    """run_blocking for a recognizer that is slow to finish an utterance (a busy machine): the words of
    an utterance's end come only once `released` is set; everything else runs inline."""

    async def run_blocking(function: Any, *args: Any) -> Any:
        if getattr(function, "__name__", "") == "recognize" and any(
            kind is RecognizerJob.FINISH for kind, _ in args[0]
        ):
            await released.wait()
        return function(*args)

    return run_blocking


def kinds(h: Harness) -> list[str]:
    return [kind for _, kind, _ in h.transport.messages()]


async def test_a_transfer_decided_on_the_first_sentence_is_carried_out_when_the_caller_goes_on(agent):
    """ "Please transfer me to a human. I want to speak to a real person.": the second sentence begins while
    the first is still being recognized; the first is then taken, the transfer decided and its announcement
    starts while the caller is still speaking. The call is transferred within 10 s of the caller's last word
    (before issue 35 the second sentence cut the announcement, which was to perform the transfer, and the
    session, "transferring", took no more turns: dead air)."""
    released = asyncio.Event()
    brain = ScriptedBrain([TRANSFER_CALL], [TRANSFER_CALL])  # the whole request, if asked again, too
    h = Harness(
        agent,
        recorder=MemoryRecorder(),
        texts=[TRANSFER_FIRST, TRANSFER_SECOND],
        brain=brain,
        tools=ScriptedTools({"transfer_call": TRANSFER}),
        run_blocking=finish_held(released),
    )
    await greeted(h)
    await h.talk(1500, then_silence_ms=150)  # the first sentence; its turn ends after 100 ms of silence
    await h.feed(silence(250))  # a 400 ms pause
    await h.feed(speech(100))  # the second sentence begins: the first is still being recognized
    released.set()
    await settle()
    await h.feed(speech(200))
    # The first sentence was taken, the transfer decided, and its announcement plays over the caller.
    assert ("user", TRANSFER_FIRST) in h.transport.transcripts()
    assert "tool.finished" in kinds(h) and "agent_speech" in kinds(h)[kinds(h).index("tool.finished") :]
    await h.feed(speech(300) + silence(200))  # the rest of the second sentence, ending before the announcement
    last_word = h.clock.now() - 0.2
    assert "transfer" not in kinds(h)  # the announcement (1 s) was still playing
    await h.feed(silence(10_500))
    transfers = [at for at, kind, _ in h.transport.events if kind == "transfer"]
    if not h.task.done():
        await h.stop()
    assert transfers, f"no transfer: {[(kind, value) for _, kind, value in h.transport.messages() if kind != 'audio']}"
    assert transfers[0] - last_word <= 10
    assert h.transport.transferred_to == DESTINATION
    assert h.recorder.call.ended_reason == "transferred"


async def test_a_continuation_that_asks_for_the_same_tool_runs_it_once(agent):
    """ "Where is my parcel? Please track my parcel delivery for me.": the brain asks for track_parcel on
    the first sentence; the caller goes on while it runs; asked again about the whole request, the brain
    asks for the same tool with the same arguments, and the result of the first request is used: the
    tool runs once, and its result is answered (before issue 35 the first request was cancelled and a
    second one sent)."""
    tools = ScriptedTools(
        {"track_parcel": ToolOutcome(result='{"status": "out for delivery"}', status="success")}, wait=True
    )
    track = [ToolCall(name="track_parcel", arguments={"carrier": "acme"}, id="call_first")]
    again = [ToolCall(name="track_parcel", arguments={"carrier": "acme"}, id="call_again")]
    brain = ScriptedBrain(track, again)
    h = Harness(agent, recorder=MemoryRecorder(), texts=[PARCEL_FIRST, PARCEL_SECOND], brain=brain, tools=tools)
    await greeted(h)
    await h.talk(600, then_silence_ms=200)
    assert [call.name for call in tools.calls] == ["track_parcel"]  # the tool runs
    await h.talk(1200, then_silence_ms=300)  # the caller goes on before hearing anything
    tools.release.set()  # the tool's answer comes
    await h.feed(silence(3000))
    assert len(tools.calls) == 1, tools.calls
    assert h.transport.transcripts()[-1] == ("assistant", "Done.")  # the brain speaks the result
    assert brain.seen[-1][-1].role == "tool"
    users = [turn.text for turn in brain.seen[-1] if turn.role == "user"]
    assert users[-1] == f"{PARCEL_FIRST} {PARCEL_SECOND}"  # answered as one request
    await h.stop()


class HangingBrain:
    """Never answers the first caller turn; answers every later one."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def respond(self, context: BrainContext, conversation: Sequence[Turn]) -> AsyncIterator[TextPiece]:
        self.asked.append(next((turn.text for turn in reversed(conversation) if turn.role == "user"), ""))
        if len(self.asked) == 1:
            await asyncio.Event().wait()  # a model that never answers
        yield TextPiece(OPENING)


async def test_a_brain_that_never_answers_gets_the_caller_an_apology_after_the_response_timeout(agent, settings):
    """RESPONSE_TIMEOUT_SECONDS (3 s here) after the caller's turn the agent apologizes, on the session's
    clock; the caller's next turn is answered (before issue 35 the caller heard nothing, and a new turn
    was needed to get anything at all)."""
    settings.RESPONSE_TIMEOUT_SECONDS = 3
    brain = HangingBrain()
    h = Harness(agent, recorder=MemoryRecorder(), texts=["when do you open", "when do you open please"], brain=brain)
    await greeted(h)
    await h.talk(600, then_silence_ms=0)
    spoke = h.clock.now()
    await h.feed(silence(2500))
    assert [kind for at, kind, _ in h.transport.messages() if at > spoke and kind == "agent_speech"] == []
    await h.feed(silence(1000))
    speech_at = [at for at, kind, _ in h.transport.messages() if at > spoke and kind == "agent_speech"]
    assert speech_at, (
        f"no apology: {[(kind, value) for at, kind, value in h.transport.messages() if at > spoke and kind != 'audio']}"
    )
    assert speech_at[0] - spoke <= 3 + 0.5
    await h.feed(silence(8000))  # the apology plays
    apology = h.transport.transcripts()[-1]
    assert apology[0] == "assistant" and apology[1] and apology[1] != OPENING, apology
    await h.talk(600, then_silence_ms=3000)
    assert h.transport.transcripts()[-1] == ("assistant", OPENING)
    assert len(brain.asked) == 2
    await h.stop()


async def test_a_tool_that_never_answers_gets_the_caller_an_apology_after_the_response_timeout(agent, settings):
    """A tool that hangs (its webhook never answers; its 10 s timeout is the tool's answer): RESPONSE_TIMEOUT_SECONDS
    (3 s here) after the caller's turn the agent says it is still working, on the session's clock; the tool's
    timeout is told to the brain and the response ends; the caller's next turn is answered. (Moved from the
    wall-clock bound of test_conversation_e2e.py's tool test, which keeps the outcome.)"""
    settings.RESPONSE_TIMEOUT_SECONDS = 3
    timed_out = ToolOutcome(result='{"error": "The tool did not answer within 10 s"}', status="error")
    tools = ScriptedTools({"track_parcel": timed_out}, wait=True)
    track = [ToolCall(name="track_parcel", arguments={}, id="call_track")]
    brain = ScriptedBrain(track, [TextPiece(OPENING)])
    h = Harness(agent, recorder=MemoryRecorder(), texts=[PARCEL_FIRST, "when do you open"], brain=brain, tools=tools)
    await greeted(h)
    await h.talk(600, then_silence_ms=0)
    spoke = h.clock.now()
    await h.feed(silence(2500))
    assert [call.name for call in tools.calls] == ["track_parcel"]  # the tool runs, and hangs
    assert [kind for at, kind, _ in h.transport.messages() if at > spoke and kind == "agent_speech"] == []
    await h.feed(silence(1000))
    speech_at = [at for at, kind, _ in h.transport.messages() if at > spoke and kind == "agent_speech"]
    assert speech_at, (
        f"no apology: {[(kind, value) for at, kind, value in h.transport.messages() if at > spoke and kind != 'audio']}"
    )
    assert speech_at[0] - spoke <= 3 + 0.5
    await h.feed(silence(6500))  # 10 s after the call: the tool's timeout is its answer
    tools.release.set()
    await h.feed(silence(4000))
    assert brain.seen[-1][-1].role == "tool"  # the brain was told the tool's outcome
    ended = [kind for at, kind, _ in h.transport.messages() if at > spoke and kind == "agent_speech.ended"]
    assert ended, "the response did not end"
    await h.talk(600, then_silence_ms=3000)
    assert h.transport.transcripts()[-1] == ("assistant", OPENING)
    assert len(tools.calls) == 1
    await h.stop()
