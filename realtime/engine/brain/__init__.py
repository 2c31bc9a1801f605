"""Brains: given the conversation so far, produce the agent's next words and tool requests.

`respond(conversation)` is an async iterator of `TextPiece` (words to speak, in order, any size) and
`ToolRequest` (run a tool; the conversation appends its result as a `tool` turn and asks again).
Chosen per deployment by settings.LLM_PROVIDER: `embedded` (offline, deterministic) is available now.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.conf import settings

from realtime.engine.voice import EngineUnavailable


@dataclass(frozen=True)
class Turn:
    role: str  # "user", "assistant" or "tool"
    text: str
    name: str = ""  # the tool's name for a tool turn


@dataclass(frozen=True)
class TextPiece:
    text: str


@dataclass(frozen=True)
class ToolRequest:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str = ""


BrainOutput = TextPiece | ToolRequest


class Brain(Protocol):
    def respond(self, conversation: Sequence[Turn]) -> AsyncIterator[BrainOutput]: ...


AVAILABLE_BRAINS = ("embedded",)


def brain_for(agent: Any) -> Brain:
    provider = settings.LLM_PROVIDER
    if provider == "embedded":
        from realtime.engine.brain.embedded import EmbeddedBrain

        return EmbeddedBrain(language=agent.language)
    raise EngineUnavailable(f"LLM_PROVIDER={provider} is not available in this version; use embedded")
