"""The native `end_call` tool: offered unless the agent turns it off (endCallEnabled). The agent says
its goodbye (its words in that turn, or a short default goodbye in the agent's language) and the
session shell ends the call once it has played (endedReason `agent-ended-call`, status completed).

Result: {"status": "ending"}.
"""

from __future__ import annotations

from typing import Any

from realtime.engine.tools.base import CallContext, ToolKind

DESCRIPTION = (
    "End the call. Use it only when the caller has clearly said goodbye or that they need nothing else, "
    "after saying a short goodbye yourself in the same turn."
)
PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


class EndCallTool(ToolKind):
    kind = "end_call"

    @property
    def ends_call(self) -> bool:
        return True

    async def invoke(self, arguments: dict[str, Any], *, tool_call_id: str, context: CallContext) -> dict[str, Any]:
        return {"status": "ending"}
