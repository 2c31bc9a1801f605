"""Handoff tools: one per entry of the agent's `handoffs` (docs/guides/handoffs.md) whose target is still
an active agent of the organization. The brain calls it when the caller's request matches the entry's
description; the session shell then hands the call to the target agent once the announcement has played
(`handoff_to`), within the same call record.

Name: `handoff_to_<the target's name>` (characters outside [A-Za-z0-9_] as "_", lower case, at most 64
characters; a name already taken gets a number). Result: {"status": "handing off", "agent": <its name>}.
"""

from __future__ import annotations

import re
from typing import Any

from realtime.engine.contracts import HANDOFF_TOOL_PREFIX, Handoff
from realtime.engine.tools.base import CallContext, ToolKind

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"reason": {"type": "string", "description": "Why the caller is handed off (optional)."}},
}
_UNSAFE = re.compile(r"[^a-z0-9_]+")


def handoff_name(agent_name: str, taken: set[str] | frozenset[str] | Any) -> str:
    """The tool's name for a target agent, unique among `taken`."""
    stem = _UNSAFE.sub("_", agent_name.lower()).strip("_") or "agent"
    base = (HANDOFF_TOOL_PREFIX + stem)[:64]
    name, number = base, 2
    while name in taken:
        suffix = f"_{number}"
        name, number = base[: 64 - len(suffix)] + suffix, number + 1
    return name


def handoff_description(agent_name: str, when: str) -> str:
    return f"{when} (hands the call to {agent_name}, another agent)"


class HandoffTool(ToolKind):
    kind = "handoff"

    def __init__(self, *, agent_name: str, handoff: Handoff) -> None:
        self.agent_name = agent_name
        self.handoff = handoff

    def handoff_for(self, arguments: dict[str, Any]) -> Handoff:
        reason = str(arguments.get("reason") or "").strip()[:500]
        return Handoff(
            agent_id=self.handoff.agent_id, context=self.handoff.context, last_n=self.handoff.last_n, reason=reason
        )

    async def invoke(self, arguments: dict[str, Any], *, tool_call_id: str, context: CallContext) -> dict[str, Any]:
        return {"status": "handing off", "agent": self.agent_name}
