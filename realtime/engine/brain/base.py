"""What every brain takes and produces (no engine imports here: brains, tools and the session shell
all depend on this module, never the other way round).

A brain is created once per conversation (it may keep state between turns) and asked for each
answer with `respond(context, history)`, an async iterator of:
- `TextPiece`: words to speak, in order, any size (the shell cuts them into sentences);
- `ToolCall`: run a tool; the shell appends an assistant turn carrying the call and a `tool` turn
  carrying its result, then calls `respond` again with the longer history (up to a few rounds);
- `Usage`: one model request's token figures (recorded as one `llmUsage` item of the call).
A provider failure is raised as `kit.providers.ProviderError`; the shell then speaks a short
apology and logs the error, the call goes on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class ToolCall:
    """A tool request of the brain: `id` is unique within the conversation (the model's own id when
    it gave one), `arguments` the JSON object of arguments."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Turn:
    """One entry of the conversation history.

    - `user`: the caller's words (`text`).
    - `assistant`: the agent's words as heard (`text`, may be empty) and, when it asked for tools in
      that turn, `tool_calls` (so that a language model sees the exact calls again).
    - `tool`: the result of one call: `text` is the JSON string the tool returned (an error result is
      `{"error": "..."}`), `tool_call_id` and `name` name the call it answers.
    """

    role: str
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    name: str = ""


@dataclass(frozen=True)
class TextPiece:
    text: str


@dataclass(frozen=True)
class Usage:
    provider: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0


BrainOutput = TextPiece | ToolCall | Usage


@dataclass(frozen=True)
class ToolSpec:
    """A tool offered to the brain: its name, what it does and the JSON Schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class BrainContext:
    """What the brain knows of the agent for this conversation (a dynamic prompt is already applied)."""

    agent_name: str
    language: str
    identity: str = ""
    instructions: str = ""
    disclosure: str = ""  # the AI-identity sentence already spoken at the start of the call
    greeting: str = ""  # the greeting already spoken, if any
    tools: tuple[ToolSpec, ...] = ()

    def tool(self, name: str) -> ToolSpec | None:
        return next((tool for tool in self.tools if tool.name == name), None)


class Brain(Protocol):
    def respond(self, context: BrainContext, history: Sequence[Turn]) -> AsyncIterator[BrainOutput]: ...
