"""The durable side of a conversation in the database (the `Recorder` of realtime/engine/contracts.py):
the call record (calls.services) and the agent log (calls.logging), written in order by one
background task so that the audio path never waits on the database."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from channels.db import database_sync_to_async
from django.utils import timezone

from agents.models import Agent
from calls import services as calls
from calls.latency import latency_summary
from calls.logging import LogSession, agent_log, new_session_id
from calls.models import Call, CallStatus

logger = logging.getLogger(__name__)


class TranscriptOrder:
    """The transcript's one rule, shared by every recorder: a caller's message is held until the next
    message, `release_caller_message()` or the end of the call, so that a caller who goes on before
    hearing the answer extends it (`extend_caller_message`; its time stays that of its first words).
    Nothing is written before the call starts or after it is finished. A recorder writes with
    `_write_message`."""

    call: Any
    _finished: bool
    _caller_message: tuple[str, datetime] | None = None  # held until the caller's turn is complete

    def message(self, role: str, text: str, occurred_at: datetime | None = None) -> None:
        """Queue one transcript message, in order (a caller's is held, see above)."""
        if self.call is None or self._finished or not text:
            return
        self.release_caller_message()
        at = occurred_at or timezone.now()
        if role == "user":
            self._caller_message = (text, at)
        else:
            self._write_message(role, text, at)

    def extend_caller_message(self, text: str) -> None:
        """More words of the caller's held message."""
        if self._caller_message is not None and text:
            held, at = self._caller_message
            self._caller_message = (f"{held} {text}", at)

    def release_caller_message(self) -> None:
        """The caller's turn is complete: write its held message."""
        if self._caller_message is not None:
            (text, at), self._caller_message = self._caller_message, None
            self._write_message("user", text, at)

    def _write_message(self, role: str, text: str, at: datetime) -> None:
        raise NotImplementedError


class CallRecorder(TranscriptOrder):
    counts_as_live = True  # a socket's session and its call record: in the live gauges

    def __init__(
        self,
        *,
        agent: Agent,
        channel: str,
        from_number: str | None = None,
        to_number: str | None = None,
        provider_call_id: str | None = None,
        variables: dict[str, str] | None = None,
        metadata: Any = None,
        call_id: str | None = None,
        modality: str = "audio",
        carrier: str = "",
    ) -> None:
        self.agent = agent
        self.speaking_agent_id: Any = agent.pk  # whose words the agent's messages are (changes at a handoff)
        self.modality = modality  # calls.models.CallModality: "text" for a typed session
        self.variables = dict(variables or {})
        self.metadata = metadata
        self.call_id = call_id  # an existing call (an outbound call answered) instead of a new one
        self.channel = channel
        self.from_number = from_number
        self.to_number = to_number
        self.provider_call_id = provider_call_id
        self.carrier = carrier
        # What the session measured for the call's cost ledger: (product, provider, model, unit) -> quantity.
        self.measured: dict[tuple[str, str, str | None, str], float] = {}
        self.session = LogSession(organization_id=agent.organization_id, agent_id=agent.pk, session_id=new_session_id())
        self.call: Call | None = None
        self._writes: asyncio.Queue[Callable[[], Awaitable[Any]] | None] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None
        self._finished = False
        self.turn_latencies: list[dict[str, float | None]] = []  # each answered caller turn's stages (ms)

    @property
    def session_id(self) -> str:
        return self.session.session_id

    def log(self, severity: str, message: str, **fields: Any) -> None:
        agent_log(self.session, severity, message, **fields)

    async def start(self) -> Call:
        if self.call_id is not None:
            activated: Call | None = await database_sync_to_async(calls.call_activate)(
                call_id=self.call_id, provider_call_id=self.provider_call_id
            )
            if activated is None:
                raise RuntimeError(f"call {self.call_id} is no longer waiting to be answered")
            self.call = activated
            self._writer = asyncio.create_task(self._write_loop(), name=f"call-writer-{self.session_id}")
            return activated
        self.call = await database_sync_to_async(calls.call_start)(
            agent=self.agent,
            channel=self.channel,
            from_number=self.from_number,
            to_number=self.to_number,
            provider_call_id=self.provider_call_id,
            variables=self.variables,
            metadata=self.metadata,
            modality=self.modality,
            carrier=self.carrier,
        )
        self._writer = asyncio.create_task(self._write_loop(), name=f"call-writer-{self.session_id}")
        return self.call

    def _write_message(self, role: str, text: str, at: datetime) -> None:
        call = self.call
        if call is not None:
            agent_id = self.speaking_agent_id if role == "assistant" else None
            self._writes.put_nowait(
                lambda: database_sync_to_async(calls.call_message_add)(
                    call=call, role=role, content=text, occurred_at=at, agent_id=agent_id
                )
            )

    def transfer_update(self, *, mode: str, destination: str, status: str, at: datetime) -> None:
        """A transfer to a person began (a warm one's `ringing`) or ended: the call record's `transfer`, and
        its `call.transfer.started` / `call.transfer.ended` event."""
        if self.call is None or self._finished:
            return
        self.release_caller_message()
        call = self.call
        self._writes.put_nowait(
            lambda: database_sync_to_async(calls.call_transfer_update)(
                call=call, mode=mode, destination=destination, status=status, at=at
            )
        )

    def flow_progress(self, *, path: list[str], collected: dict[str, Any]) -> None:
        """The agent's flow went on: the call record's `flow` becomes its path and collected values."""
        if self.call is None or self._finished:
            return
        call = self.call
        self._writes.put_nowait(
            lambda: database_sync_to_async(calls.call_flow_update)(call=call, path=path, collected=collected)
        )

    def handoff(self, *, from_agent: Agent, to_agent: Agent, reason: str, occurred_at: datetime) -> None:
        """The call went on with another agent: the handoff joins the record (and its `call.handoff` event
        goes out), and the agent's messages from now on are that agent's."""
        if self.call is None or self._finished:
            return
        self.release_caller_message()
        self.speaking_agent_id = to_agent.pk
        call = self.call
        self._writes.put_nowait(
            lambda: database_sync_to_async(calls.call_handoff_add)(
                call=call, from_agent_id=from_agent.pk, to_agent_id=to_agent.pk, reason=reason, at=occurred_at
            )
        )

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
        """Queue one tool invocation for the call record (written in order, without blocking)."""
        if self.call is None or self._finished:
            return
        call = self.call
        self._writes.put_nowait(
            lambda: database_sync_to_async(calls.call_tool_invocation_add)(
                call=call,
                tool_name=tool_name,
                request=request,
                response=response,
                status=status,
                duration_ms=duration_ms,
                agent_tool_id=agent_tool_id,
            )
        )

    def measure(self, *, product: str, provider: str, model: str | None, unit: str, quantity: float) -> None:
        """Count what the call used of a product (recognized seconds, synthesized characters, a transfer
        leg's seconds): summed per product, provider, model and unit, priced when the call ends."""
        if self.call is None or self._finished or quantity <= 0:
            return
        key = (product, provider, model, unit)
        self.measured[key] = self.measured.get(key, 0.0) + quantity

    def llm_usage(self, *, provider: str, model: str, **figures: Any) -> None:
        """Queue one model request's usage (product, input_tokens, output_tokens, cached_input_tokens,
        input/output_audio_tokens, input/output_audio_seconds: calls.services.call_llm_usage_add)."""
        if self.call is None or self._finished:
            return
        call = self.call
        self._writes.put_nowait(
            lambda: database_sync_to_async(calls.call_llm_usage_add)(
                call=call, provider=provider, model=model, **figures
            )
        )

    def turn_latency(self, stages_ms: dict[str, float | None]) -> None:
        """One answered caller turn's latency stages; their p50/p95 are stored when the call ends."""
        if self.call is not None and not self._finished:
            self.turn_latencies.append(dict(stages_ms))

    async def finish(
        self, status: str, *, ended_reason: str | None = None, message: str = "", recording: bool = False
    ) -> Call | None:
        """Write what is queued, then close the call with why it ended (idempotent; `message`: a sentence
        saying more, the call's endedMessage); `recording`: its recording is being stored (the call keeps
        the recording's place, so call.ended links to it)."""
        if self.call is None or self._finished:
            return self.call
        self.release_caller_message()
        self._finished = True
        if self._writer is not None:
            self._writes.put_nowait(None)
            await asyncio.shield(self._writer)
        self.call = await database_sync_to_async(calls.call_finish)(
            call=self.call,
            status=status,
            latency=latency_summary(self.turn_latencies),
            ended_reason=ended_reason,
            message=message,
            recording=recording,
            measured=[
                {"product": product, "provider": provider, "model": model, "unit": unit, "quantity": round(amount, 6)}
                for (product, provider, model, unit), amount in self.measured.items()
            ],
        )
        self.log(
            "info" if status == CallStatus.COMPLETED else "error",
            "session ended",
            status=status,
            endedReason=self.call.ended_reason,
            callId=str(self.call.pk),
            durationSeconds=self.call.duration_seconds,
        )
        return self.call

    async def _write_loop(self) -> None:
        while (write := await self._writes.get()) is not None:
            try:
                await write()
            except Exception:
                # One lost message must not end the call; the failure is visible in both logs.
                logger.exception("could not write a call message (session %s)", self.session_id)
                self.log("error", "could not save a transcript message")
