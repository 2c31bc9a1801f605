"""The summary of a call without a language model: a short extract of what the caller wanted and what
happened, not the transcript.

1. What the caller wanted: "Caller: " and the caller's first turn that asks for something (greetings,
   thanks, "yes" and turns without a content word are passed over), at most REQUEST_WORDS words.
2. What happened, in order: each tool the agent used, named by its words, with its outcome (the
   result's message as the agent would speak it, or "failed" and its error); a transfer to a person;
   keys sent. `search_knowledge` is named only when it failed, `end_call` not at all (the ending says it).
3. How the call ended, when it was not the caller ending it normally (the agent ended it, a silence, the
   time limit, a transfer, an answering machine, a failure).

At most MAX_CHARS characters. Tool results are read as redacted as the rest (realtime/analysis/runner.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from realtime.engine.brain.embedded.replies import first_upper, speak_result, trim
from realtime.engine.brain.embedded.spoken import Utterance
from realtime.engine.brain.embedded.understanding import content_stems, social_kind, split_identifier

REQUEST_WORDS = 30
MAX_CHARS = 500
_ENDINGS = {
    "agent-ended-call": "The agent ended the call.",
    "transferred": "The call was transferred to a person.",
    "silence-timeout": "The call ended after a silence.",
    "max-duration-reached": "The call reached its time limit.",
    "voicemail": "An answering machine answered.",
    "assistant-request-failed": "The call failed: the agent's prompt could not be fetched.",
    "provider-error": "The call failed: a speech or model provider failed.",
    "connection-lost": "The connection was lost.",
    "server-shutdown": "The call was cut off: the server stopped.",
    "stale": "The call was cut off: the server holding it stopped.",
    "error": "The call failed with an internal error.",
}


@dataclass(frozen=True)
class ToolUse:
    """One tool call of the call, as logged: its name, its status (calls.models.ToolInvocationStatus)
    and the result it returned."""

    name: str
    status: str
    response: str


def caller_request(messages: Sequence[tuple[str, str]]) -> str:
    """The caller's first turn that asks for something, at most REQUEST_WORDS words."""
    for role, content in messages:
        text = " ".join(content.split())
        if role != "user" or not text:
            continue
        utterance = Utterance(text)
        if social_kind(utterance) or not content_stems(utterance.tokens):
            continue
        return trim(text, REQUEST_WORDS)
    return ""


def _error_of(response: str) -> str:
    try:
        result = json.loads(response)
    except ValueError:
        return ""
    error = result.get("error") if isinstance(result, dict) else None
    if isinstance(error, dict):
        error = error.get("message")
    return trim(str(error), 15).rstrip(".") if error else ""


def tool_outcome(use: ToolUse) -> str:
    """One tool's outcome in a sentence ("" when it is not worth a sentence)."""
    label = first_upper(" ".join(split_identifier(use.name)) or use.name)
    if use.status != "success":
        error = _error_of(use.response)
        return f"{label} failed ({use.status}{': ' + error if error else ''})."
    if use.name == "search_knowledge" or use.name == "end_call":
        return ""
    if use.name == "transfer_call":
        return "Transferred to a person."
    if use.name == "send_digits":
        return "Sent keypad keys."
    spoken = speak_result(use.response, "en").rstrip(".")
    return f"{label}: {spoken}."


def summarize_call(
    messages: Sequence[tuple[str, str]], tools: Sequence[ToolUse] = (), *, ended_reason: str | None = None
) -> str:
    """The summary (see the module's docstring); empty when the caller asked nothing and nothing happened."""
    parts = []
    request = caller_request(messages)
    if request:
        parts.append(f"Caller: {request if request[-1] in '.!?' else request + '.'}")
    seen: set[str] = set()
    for use in tools:
        sentence = tool_outcome(use)
        if sentence and sentence not in seen:
            seen.add(sentence)
            parts.append(sentence)
    ending = _ENDINGS.get(ended_reason or "")
    if ending and not (ended_reason == "transferred" and "Transferred to a person." in seen):
        parts.append(ending)
    text = " ".join(parts)
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1].rstrip() + "…"
