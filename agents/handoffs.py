"""An agent's `handoffs`: the other agents of its organization it may hand a call to (issue 39).

A list (default `[]`, at most MAX_HANDOFFS entries) of `{agentId, description, context, lastN}`:
- `agentId`: the target agent's id (a UUID; stored in lower case). Each target at most once.
- `description`: when to hand off, in words the brain reads (required, not blank, at most
  MAX_DESCRIPTION_CHARS characters as sent; stored trimmed).
- `context`: what of the conversation goes with the call: "all" (default), "lastN" (the last `lastN`
  turns said aloud), "summary" (a summary written by the brain) or "none".
- `lastN`: 1 to 50, required with context "lastN"; null otherwise (a number with another context is
  refused, never dropped).

This module checks the shape alone (normalize_handoffs, HandoffsError naming the key inside the list:
`1.agentId` for `handoffs.1.agentId`). That each target is an active agent of the same organization, and
not the agent itself, is the agent services' rule (agents/services.py), which has the organization; the
engine reads the targets through agents.selectors.handoff_targets. Stored normalized (every key), so
readers need no defaults.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from kit.text import text_problem

MAX_HANDOFFS = 20
MAX_DESCRIPTION_CHARS = 500
CONTEXT_ALL = "all"
CONTEXT_LAST_N = "lastN"
CONTEXT_SUMMARY = "summary"
CONTEXT_NONE = "none"
CONTEXTS = (CONTEXT_ALL, CONTEXT_LAST_N, CONTEXT_SUMMARY, CONTEXT_NONE)
LAST_N_RANGE = (1, 50)
KEYS = ("agentId", "description", "context", "lastN")
FIELD = "handoffs"  # the wire name

# The canonical text of a UUID (as the OpenAPI `format: uuid` has it), in either case: an agent's id in
# `handoffs` and in a flow's handoff step (agents/flows.py).
AGENT_ID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


class HandoffsError(ValueError):
    """An invalid list: `key` is the place inside it ("1.agentId", "3"), or "" for the list itself."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}" if key else message)
        self.key = key
        self.message = message

    @property
    def field(self) -> str:
        """The place as the API's issues name it: `handoffs.1.agentId`, `handoffs`."""
        return issue_key(self.key)


def issue_key(inner: str) -> str:
    """The issue key of a place inside the list (`1.agentId` -> `handoffs.1.agentId`; "" -> `handoffs`)."""
    return f"{FIELD}.{inner}" if inner else FIELD


def normalize_handoffs(value: Any) -> list[dict[str, Any]]:
    """The list as stored, from a request body's `handoffs`; HandoffsError when its shape is not valid."""
    if not isinstance(value, list):
        raise HandoffsError("", "Must be a list of {agentId, description, context, lastN} objects.")
    if len(value) > MAX_HANDOFFS:
        raise HandoffsError("", f"At most {MAX_HANDOFFS} handoffs (this list has {len(value)}).")
    entries: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(value):
        entry = normalize_entry(item, index)
        first = seen.setdefault(entry["agentId"], index)
        if first != index:
            raise HandoffsError(
                f"{index}.agentId", f"This agent is already a handoff target ({issue_key(str(first))})."
            )
        entries.append(entry)
    return entries


def normalize_entry(item: Any, index: int) -> dict[str, Any]:
    """One entry as stored; HandoffsError naming `<index>.<key>` when it is not valid."""
    at = str(index)
    if not isinstance(item, dict):
        raise HandoffsError(at, "Must be a JSON object with agentId, description, context and lastN.")
    unknown = sorted(str(key) for key in item if key not in KEYS)
    if unknown:
        raise HandoffsError(f"{at}.{unknown[0]}", "Unknown key; the keys are agentId, description, context and lastN.")
    return {
        "agentId": _agent_id(item, at),
        "description": _description(item, at),
        **_context(item, at),
    }


def handoffs_of(stored: Any) -> list[dict[str, Any]]:
    """An agent's stored list as used on a call: entries that are not valid (written around the API) and
    repeated targets are left out rather than failing the call."""
    entries: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, item in enumerate(stored if isinstance(stored, list) else []):
        try:
            entry = normalize_entry(item, index)
        except HandoffsError:
            continue
        if entry["agentId"] not in seen:
            seen.add(entry["agentId"])
            entries.append(entry)
    return entries[:MAX_HANDOFFS]


def _agent_id(item: dict[str, Any], at: str) -> str:
    if "agentId" not in item:
        raise HandoffsError(f"{at}.agentId", "Required: the id of the agent to hand off to.")
    value = item["agentId"]
    if not isinstance(value, str) or not AGENT_ID.fullmatch(value):
        raise HandoffsError(f"{at}.agentId", f"Must be an agent's id (a UUID), not {_shown(value)}.")
    return str(uuid.UUID(value))


def _description(item: dict[str, Any], at: str) -> str:
    key = f"{at}.description"
    if "description" not in item:
        raise HandoffsError(key, "Required: when to hand off to this agent.")
    value = item["description"]
    if not isinstance(value, str):
        raise HandoffsError(key, "Must be a string: when to hand off to this agent.")
    if len(value) > MAX_DESCRIPTION_CHARS:
        raise HandoffsError(key, f"At most {MAX_DESCRIPTION_CHARS} characters (this one has {len(value)}).")
    if text_problem(value) is not None:
        raise HandoffsError(key, "May not contain NUL or surrogate characters.")
    value = value.strip()
    if not value:
        raise HandoffsError(key, "May not be blank: say when to hand off to this agent.")
    return value


def _context(item: dict[str, Any], at: str) -> dict[str, Any]:
    context = item.get("context", CONTEXT_ALL)
    if not isinstance(context, str) or context not in CONTEXTS:
        raise HandoffsError(f"{at}.context", f"Must be one of {', '.join(CONTEXTS)}, not {_shown(context)}.")
    last_n = item.get("lastN")
    low, high = LAST_N_RANGE
    if context != CONTEXT_LAST_N:
        if last_n is not None:
            raise HandoffsError(f"{at}.lastN", f'Only with context "lastN" (this entry\'s context is "{context}").')
        return {"context": context, "lastN": None}
    if last_n is None:
        raise HandoffsError(f"{at}.lastN", f'Required with context "lastN": how many turns go along ({low} to {high}).')
    # A whole float (2.0) is a whole number, as JSON Schema's integer has it.
    whole = (isinstance(last_n, int) and not isinstance(last_n, bool)) or (
        isinstance(last_n, float) and last_n.is_integer()
    )
    if not whole or not low <= last_n <= high:
        raise HandoffsError(
            f"{at}.lastN", f"Must be a whole number of turns from {low} to {high}, not {_shown(last_n)}."
        )
    return {"context": context, "lastN": int(last_n)}


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
