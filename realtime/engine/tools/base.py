"""What every tool kind shares: the adapter base class, the call context and the timeout error.

A kind is a small adapter built once per conversation (at `ToolDispatcher.load()`) for one offered
tool. `invoke()` delivers one call and returns the result object for the brain, or raises
`ProviderError` (`ToolTimeout` when its time ran out) with a message in plain words that is safe to
give to the brain and to write in the agent log: no credential, no URL path or query (a `ToolError`
whose message quotes the tool names a separate `log_reason`). The dispatcher applies the tool's
onError to those failures in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from kit.providers import ProviderError
from realtime.engine.contracts import Handoff


class ToolError(ProviderError):
    """A tool failure whose brain-facing message may hold the tool's own words (an MCP error result):
    `log_reason` is then what the agent log gets instead (never the tool's content)."""

    def __init__(self, message: str, *, permanent: bool = False, log_reason: str | None = None) -> None:
        super().__init__(message, permanent=permanent)
        self.log_reason = log_reason


class ToolTimeout(ToolError):
    """The tool did not answer within its time limit (recorded with the status `timeout`)."""


@dataclass(frozen=True)
class CallContext:
    """Who is calling: the call record's id and the agent's id (strings, as sent to webhooks)."""

    call_id: str | None
    agent_id: str


class ToolKind:
    """One offered tool's adapter. `kind` names it in the agent log."""

    kind: ClassVar[str] = ""

    async def invoke(self, arguments: dict[str, Any], *, tool_call_id: str, context: CallContext) -> dict[str, Any]:
        raise NotImplementedError

    @property
    def transfer_to(self) -> str | None:
        """The destination a successful call asks the session to transfer to (transfer_call only)."""
        return None

    @property
    def ends_call(self) -> bool:
        """A successful call asks the session to end the call after the agent's goodbye (end_call only)."""
        return False

    @property
    def transfer_mode(self) -> str:
        """How a transfer_call transfers: "cold" or "warm"."""
        return "cold"

    def handoff_for(self, arguments: dict[str, Any]) -> Handoff | None:
        """The agent a successful call asks the session to hand the call to (handoff tools only)."""
        return None

    def digits_to_send(self, result: dict[str, Any]) -> str | None:
        """The keys a successful call asks the session to play as keypad tones (send_digits only)."""
        return None


def seconds_words(seconds: float) -> str:
    """5.0 -> '5 seconds', 1.0 -> '1 second', 2.5 -> '2.5 seconds'."""
    return "1 second" if seconds == 1 else f"{seconds:g} seconds"


def as_object(value: Any) -> dict[str, Any]:
    """A reply's JSON value as the result object: an object as it is, any other value as {"result": value}."""
    return value if isinstance(value, dict) else {"result": value}
