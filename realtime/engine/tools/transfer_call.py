"""The native `transfer_call` tool: offered when a handoff destination exists (the per-number
handoffPhoneNumber of the number the call came in on, else the agent's). Its result tells the brain
that the transfer is under way; the session shell has the transport perform it (`transfer_to`).

Result: {"status": "transferring", "phoneNumber": <E.164 destination>}.
"""

from __future__ import annotations

from typing import Any

from agents.models import DEFAULT_TRANSFER
from realtime.engine.tools.base import CallContext, ToolKind

DESCRIPTION = (
    "Transfer the call to a human colleague. Use it when the caller asks for a person, "
    "or when you cannot help them yourself."
)
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"reason": {"type": "string", "description": "Why the caller is being transferred (optional)."}},
}


def transfer_setting(agent: Any) -> dict[str, Any]:
    """The agent's `transfer` setting, every key present."""
    return {**DEFAULT_TRANSFER, **(agent.transfer or {})}


def transfer_mode_of(agent: Any) -> str:
    return str(transfer_setting(agent)["mode"])


class TransferCallTool(ToolKind):
    kind = "transfer_call"

    def __init__(self, *, destination: str, mode: str = "cold") -> None:
        self.destination = destination
        self.mode = mode

    @property
    def transfer_mode(self) -> str:
        return self.mode

    @property
    def transfer_to(self) -> str | None:
        return self.destination

    async def invoke(self, arguments: dict[str, Any], *, tool_call_id: str, context: CallContext) -> dict[str, Any]:
        return {"status": "transferring", "phoneNumber": self.destination}
