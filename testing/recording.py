"""An in-memory call recorder (the engine's `Recorder` contract, realtime/engine/contracts.py): a
session run with it writes nothing to the database, and a test reads what would have been recorded
from plain lists (the call's messages in the order the database would return them, the agent log, tool
invocations, model usage, turn latencies and the final status)."""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from calls.models import CallStatus
from calls.services import default_ended_reason
from realtime.engine.session.records import TranscriptOrder


@dataclass
class RecordedCall:
    """The call as recorded: `messages` are (role, text) in the call record's order."""

    from_number: str | None = None
    to_number: str | None = None
    channel: str = "web"
    variables: dict[str, str] = field(default_factory=dict)
    metadata: Any = None
    pk: uuid.UUID = field(default_factory=uuid.uuid4)
    status: str | None = None  # None while the call is active
    ended_reason: str | None = None  # why it ended (calls.models.EndedReason); None while active
    ended_message: str = ""  # why, in a sentence (a failure's cause), when the engine gave one
    written: list[tuple[datetime, int, str, str]] = field(default_factory=list)  # (occurred_at, sequence, role, text)
    tool_invocations: list[dict[str, Any]] = field(default_factory=list)
    llm_usage: list[dict[str, Any]] = field(default_factory=list)
    measured: list[dict[str, Any]] = field(default_factory=list)  # the cost ledger's measurements
    latencies: list[dict[str, float | None]] = field(default_factory=list)
    handoffs: list[dict[str, Any]] = field(default_factory=list)
    flow: dict[str, Any] | None = None
    transfer: dict[str, Any] | None = None

    @property
    def messages(self) -> list[tuple[str, str]]:
        return [(role, text) for _, _, role, text in sorted(self.written, key=lambda entry: entry[:2])]


class MemoryRecorder(TranscriptOrder):
    """Records one conversation in memory, with the database recorder's rules: nothing before `start`
    or after `finish`, and a caller's message held until the next message, `release_caller_message()`
    or the end of the call (extended meanwhile by `extend_caller_message`)."""

    counts_as_live = True  # as the database recorder

    def __init__(
        self,
        *,
        channel: str = "web",
        from_number: str | None = None,
        to_number: str | None = None,
        session_id: str | None = None,
        variables: dict[str, str] | None = None,
        metadata: Any = None,
    ) -> None:
        self.channel = channel
        self.variables = dict(variables or {})
        self.metadata = metadata
        self.from_number = from_number
        self.to_number = to_number
        self.session_id = session_id or uuid.uuid4().hex
        self.call: RecordedCall | None = None
        self.logs: list[tuple[str, str, dict[str, Any]]] = []  # (severity, message, fields)
        self._finished = False
        self._sequence = itertools.count()

    def log(self, severity: str, message: str, **fields: Any) -> None:
        self.logs.append((severity, message, fields))

    def logged(self, severity: str | None = None) -> list[str]:
        """The agent log's messages (of one severity)."""
        return [message for level, message, _ in self.logs if severity is None or level == severity]

    async def start(self) -> RecordedCall:
        self.call = RecordedCall(
            from_number=self.from_number,
            to_number=self.to_number,
            channel=self.channel,
            variables=self.variables,
            metadata=self.metadata,
        )
        return self.call

    def tool_invocation(
        self,
        *,
        tool_name: str,
        request: dict[str, Any],
        response: str,
        status: str,
        duration_ms: int,
        agent_tool_id: Any = None,
    ) -> None:
        if self.call is not None and not self._finished:
            self.call.tool_invocations.append(
                {
                    "tool_name": tool_name,
                    "request": request,
                    "response": response,
                    "status": status,
                    "duration_ms": duration_ms,
                    "agent_tool_id": agent_tool_id,
                }
            )

    def llm_usage(self, *, provider: str, model: str, **figures: Any) -> None:
        if self.call is not None and not self._finished:
            self.call.llm_usage.append({"provider": provider, "model": model, **figures})

    def measure(self, *, product: str, provider: str, model: str | None, unit: str, quantity: float) -> None:
        if self.call is not None and not self._finished:
            self.call.measured.append(
                {"product": product, "provider": provider, "model": model, "unit": unit, "quantity": quantity}
            )

    def turn_latency(self, stages_ms: dict[str, float | None]) -> None:
        if self.call is not None and not self._finished:
            self.call.latencies.append(dict(stages_ms))

    def transfer_update(self, *, mode: str, destination: str, status: str, at: datetime) -> None:
        if self.call is not None and not self._finished:
            self.call.transfer = {"mode": mode, "destination": destination, "status": status}

    def flow_progress(self, *, path: list[str], collected: dict[str, Any]) -> None:
        if self.call is not None and not self._finished:
            self.call.flow = {"path": list(path), "collected": dict(collected)}

    def handoff(self, *, from_agent: Any, to_agent: Any, reason: str, occurred_at: datetime) -> None:
        if self.call is not None and not self._finished:
            self.release_caller_message()
            self.call.handoffs.append({"from": from_agent.pk, "to": to_agent.pk, "reason": reason})

    async def finish(
        self, status: str, *, ended_reason: str | None = None, message: str = "", recording: bool = False
    ) -> RecordedCall | None:
        if self.call is None or self._finished:
            return self.call
        self.release_caller_message()
        self._finished = True
        self.call.status = str(status)
        self.call.ended_reason = default_ended_reason(status) if ended_reason is None else str(ended_reason)
        self.call.ended_message = message
        self.log(
            "info" if status == CallStatus.COMPLETED else "error",
            "session ended",
            status=status,
            endedReason=self.call.ended_reason,
            callId=str(self.call.pk),
        )
        return self.call

    def _write_message(self, role: str, text: str, at: datetime) -> None:
        if self.call is not None:
            self.call.written.append((at, next(self._sequence), role, text))
