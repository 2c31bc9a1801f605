"""What of the conversation goes with a call handed to another agent (docs/guides/handoffs.md).

The entry's `context` says it:
- `all`: the whole history, tool rounds included (the next agent's brain sees what was done);
- `lastN`: the last N turns said aloud (the caller's and the agents' words; tool rounds left out);
- `summary`: no turn; a few sentences on the conversation so far join the next agent's instructions,
  written by the brain (`summary_of`);
- `none`: nothing: the next agent starts afresh.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from realtime.engine.contracts import BrainContext, Handoff, TextPiece, Turn, Usage

# How long the brain may take to write the summary before the handoff goes on without one.
SUMMARY_SECONDS = 8.0
# The most of the transcript the brain is given to summarize (a long call keeps its end).
SUMMARY_INPUT_CHARS = 12_000
SUMMARY_INSTRUCTIONS = (
    "You write handover notes. Summarize the phone conversation below in at most three short sentences "
    "for the colleague who takes the call over: who the caller is if they said, what they want, and what "
    "has been done or promised. Write only the summary."
)
_SPEAKERS = {"user": "Caller", "assistant": "Agent"}


def said_turns(history: Sequence[Turn]) -> list[Turn]:
    """The turns said aloud: the caller's and the agents' words, without tool calls and results."""
    return [Turn(role=turn.role, text=turn.text) for turn in history if turn.role in _SPEAKERS and turn.text.strip()]


def passed_history(history: Sequence[Turn], handoff: Handoff) -> list[Turn]:
    """The history the next agent's brain starts with."""
    if handoff.context == "all":
        return list(history)
    if handoff.context == "lastN" and handoff.last_n:
        return said_turns(history)[-handoff.last_n :]
    return []


def transcript_of(history: Sequence[Turn]) -> str:
    text = "\n".join(f"{_SPEAKERS[turn.role]}: {turn.text.strip()}" for turn in said_turns(history))
    return text[-SUMMARY_INPUT_CHARS:]


async def summary_of(brain: Any, context: BrainContext, history: Sequence[Turn], usage: Callable[[Usage], None]) -> str:
    """A few sentences on the conversation so far. A brain with a `summarize(history)` of its own (the
    embedded one, which does not write free text) gives its own; any other is asked with
    SUMMARY_INSTRUCTIONS and the transcript, within SUMMARY_SECONDS. Empty when there is nothing to say."""
    transcript = transcript_of(history)
    if not transcript:
        return ""
    brain = getattr(brain, "inner", brain)  # a flow's own brain writes it (realtime/engine/brain/flow.py)
    own = getattr(brain, "summarize", None)
    if own is not None:
        return str(own(said_turns(history)))
    ask = BrainContext(agent_name=context.agent_name, language=context.language, instructions=SUMMARY_INSTRUCTIONS)
    parts: list[str] = []
    outputs = brain.respond(ask, [Turn(role="user", text=transcript)])
    try:
        async with asyncio.timeout(SUMMARY_SECONDS):
            async for output in outputs:
                if isinstance(output, TextPiece):
                    parts.append(output.text)
                elif isinstance(output, Usage):
                    usage(output)
    finally:
        close = getattr(outputs, "aclose", None)
        if close is not None:
            await close()
    return " ".join("".join(parts).split())
