"""Typed sessions in process (docs/guides/typed-sessions.md): `open_session(..., modality="text")` is the real
session without audio, driven by `caller_text` and waited on with `settled()` (the way an in-process
caller such as the agent test runner talks to an agent); the text pipeline loads no speech model and
the transport gets no audio. The embedded brain answers unless a test scripts one; the call record is
in memory."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from realtime.engine.cascade.text import TextPipeline
from realtime.engine.contracts import Ending, TextPiece, ToolCall, ToolOutcome
from realtime.engine.phrases import phrase
from realtime.engine.session.shell import open_session
from testing.fakes import ScriptedBrain, ScriptedTools
from testing.recording import MemoryRecorder

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_db_threads")]

HANDOFF = "+15557654321"


class Collecting:
    """A transport that keeps what a text client would see, tool hooks included."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, Any]] = []
        self.ended: Ending | None = None

    async def started(self, call_id: str) -> None:
        self.messages.append(("started", call_id))

    async def send_audio(self, pcm16_24k: bytes) -> None:
        self.messages.append(("audio", len(pcm16_24k)))

    async def clear(self) -> None:
        self.messages.append(("clear", None))

    async def send_transcript(self, role: str, text: str) -> None:
        self.messages.append(("transcript", (role, text)))

    async def send_event(self, event: dict[str, Any]) -> None:
        self.messages.append((event["type"], event))

    async def tool_called(self, call: ToolCall) -> None:
        self.messages.append(("tool.call", (call.name, call.arguments)))

    async def tool_returned(self, call: ToolCall, outcome: ToolOutcome, duration_ms: int) -> None:
        assert duration_ms >= 0
        self.messages.append(("tool.result", (call.name, outcome.result, outcome.status)))

    async def transfer(self, destination: str) -> None:
        self.messages.append(("transfer", destination))

    async def hang_up(self, ending: Ending, message: str = "") -> None:
        self.ended = self.ended or ending

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.messages]

    def said(self) -> list[str]:
        return [value[1] for kind, value in self.messages if kind == "transcript" and value[0] == "assistant"]


def typed(agent: Any, **parts: Any) -> tuple[Any, Collecting, MemoryRecorder]:
    transport, recorder = Collecting(), MemoryRecorder()
    session = open_session(agent=agent, transport=transport, channel="web", modality="text", recorder=recorder, **parts)
    return session, transport, recorder


async def turn(session: Any, text: str) -> None:
    await session.caller_text(text)
    await asyncio.wait_for(session.settled(), 10)


async def test_a_text_session_greets_and_answers_each_typed_turn_with_the_embedded_brain(active_agent):
    active_agent.greeting_type = "static"
    active_agent.static_greeting = "How can I help?"
    active_agent.recording_enabled = True
    active_agent.handoff_phone_number = HANDOFF
    await sync_to_async(active_agent.save)()
    session, transport, recorder = typed(active_agent)
    task = asyncio.create_task(session.run())
    assert await asyncio.wait_for(session.ready(), 10)
    await asyncio.wait_for(session.settled(), 10)
    assert session.pipeline.name == "text" and session.playout is None and session.audio is None
    greeting = transport.said()[-1]
    assert greeting.endswith("How can I help?")

    await turn(session, "What can you do?")
    answer = transport.said()[-1]
    assert answer and answer != greeting
    assert session.history[-2:][0].text == "What can you do?" and session.history[-1].text == answer

    # A transfer: settled() returns once the caller has been handed off and the session has ended.
    await turn(session, "Can I speak to a real person please?")
    assert transport.said()[-1] == phrase("transfer", "en-US")
    assert ("transfer", HANDOFF) in transport.messages and transport.ended == Ending.TRANSFERRED
    await asyncio.wait_for(task, 5)
    assert session.ended_reason == "transferred"
    assert not {"audio", "clear", "agent_speech"} & set(transport.kinds())
    assert [kind for kind in transport.kinds() if kind.startswith("tool.")] == [
        "tool.started",
        "tool.call",
        "tool.finished",
        "tool.result",
    ]
    roles = [role for role, _ in recorder.call.messages]
    assert roles == ["assistant", "user", "assistant", "user", "assistant", "system"]
    assert any(message == "session started" and fields["modality"] == "text" for _, message, fields in recorder.logs)


async def test_words_before_a_tool_are_shown_when_it_runs_and_the_tool_hooks_see_call_and_result(active_agent):
    active_agent.greeting_type = "none"
    await sync_to_async(active_agent.save)()
    lookup = ToolCall(id="call_1", name="lookup", arguments={"order": "3561"})
    brain = ScriptedBrain([TextPiece("Let me check that."), lookup])
    tools = ScriptedTools({"lookup": ToolOutcome(result='{"status":"shipped"}', status="success")})
    session, transport, _ = typed(active_agent, pipeline=TextPipeline(brain=brain), tools=tools)
    task = asyncio.create_task(session.run())
    await asyncio.wait_for(session.settled(), 10)
    await turn(session, "Where is my order?")
    assert transport.said()[-2:] == ["Let me check that.", "Done."]
    tool_messages = [(kind, value) for kind, value in transport.messages if kind in ("tool.call", "tool.result")]
    assert tool_messages == [
        ("tool.call", ("lookup", {"order": "3561"})),
        ("tool.result", ("lookup", '{"status":"shipped"}', "success")),
    ]
    await session.stop()
    await asyncio.wait_for(task, 5)


async def test_a_typed_turn_while_the_agent_is_still_answering_drops_that_answer(active_agent):
    active_agent.greeting_type = "none"
    await sync_to_async(active_agent.save)()
    slow = ToolCall(id="call_1", name="slow", arguments={})
    brain = ScriptedBrain([slow], [TextPiece("Sure, the second one.")])
    tools = ScriptedTools({"slow": ToolOutcome(result="{}", status="success")}, wait=True)
    session, transport, recorder = typed(active_agent, pipeline=TextPipeline(brain=brain), tools=tools)
    task = asyncio.create_task(session.run())
    await asyncio.wait_for(session.settled(), 10)
    await session.caller_text("First question")
    await tools.arrived.until(lambda: tools.calls, what="the first answer's tool running", timeout=10)
    await turn(session, "Second question")
    tools.release.set()
    disclosure = transport.said()[0]
    assert transport.said() == [disclosure, "Sure, the second one."]
    assert "clear" not in transport.kinds()
    await session.stop()
    await asyncio.wait_for(task, 5)
    assert [role for role, _ in recorder.call.messages] == ["assistant", "user", "user", "assistant"]
