"""The one write path of call history: start, transcript, tool log, model usage, finish and billing.

Every function is keyword-only, named `call_<verb>` and synchronous. The voice engine (realtime/engine/) wraps them
itself (Channels' `database_sync_to_async(call_finish)(...)`: the ORM work runs in a worker thread and
stale connections are closed around each call, since the socket consumers skip Channels' per-frame
close), so there is one function per write, not a sync one and an async twin.
Invalid arguments from the engine are programming errors and raise ValueError.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import models, transaction
from django.db.models import Exists, F, Max, OuterRef, Q, Sum
from django.utils import timezone

from accounts.models import Organization
from agents.models import Agent
from calls import billing
from calls.analysis import queue_analysis
from calls.budgets.services import budget_thresholds_record
from calls.costs.services import analysis_quantities, call_costs_add, call_costs_write, recording_quantities
from calls.maintenance import ensure_inprocess_maintenance, rows_one_by_one
from calls.models import (
    FLOW_NODE_ID_CHARS,
    FLOW_PATH_ENTRIES,
    FLOW_VALUE_CHARS,
    HANDOFF_REASON_CHARS,
    TRANSFER_STATUSES,
    AgentLog,
    AnalysisStatus,
    Call,
    CallChannel,
    CallHandoff,
    CallMessage,
    CallModality,
    CallStatus,
    CostProduct,
    EndedReason,
    EventType,
    LlmUsage,
    MessageRole,
    ToolInvocation,
    ToolInvocationStatus,
    TransferMode,
    TransferStatus,
)
from calls.recordings import recording_key_for, recording_remove
from calls.sequence import next_sequence
from calls.serializers import handoff_item, transfer_item
from calls.signals import call_ended
from calls.summary import summarize
from calls.variables import metadata_clean, variables_clean
from calls.webhooks.events import event_record
from kit import liveness
from kit.errors import ApiError
from kit.fields import iso
from kit.redaction import categories_of, redact_for_agent
from kit.text import storable, storable_value

logger = logging.getLogger(__name__)

# Web calls have no phone numbers; these stable placeholders stand in for them.
WEB_FROM_PLACEHOLDER = "web-client"
WEB_TO_PLACEHOLDER = "web-agent"
# A phone call whose caller id is withheld or unknown.
UNKNOWN_NUMBER = "unknown"


def _choice(value: str, allowed: type[models.TextChoices], what: str) -> str:
    if value not in allowed.values:
        raise ValueError(f"{what} must be one of {', '.join(allowed.values)}, not {value!r}")
    return value


def call_start(
    *,
    agent: Agent,
    channel: str,
    from_number: str | None = None,
    to_number: str | None = None,
    provider_call_id: str | None = None,
    variables: dict[str, str] | None = None,
    metadata: Any = None,
    modality: str = CallModality.AUDIO,
    carrier: str = "",
) -> Call:
    """Open a call (`active`) for the agent, keeping the agent's current name with it (and, for a phone
    call, the carrier's id of the call: Twilio's CallSid), and the call's variables and metadata
    (docs/guides/variables.md; checked again here, the one rule wherever they come from). `modality`: `text`
    for a typed session (docs/guides/typed-sessions.md), `audio` otherwise. `carrier`: a phone call's
    (twilio, telnyx, sip), whose seconds its cost ledger counts."""
    variables = variables_clean(variables)
    metadata = metadata_clean(metadata)
    _choice(channel, CallChannel, "channel")
    _choice(modality, CallModality, "modality")
    if channel == CallChannel.WEB:
        from_number = from_number or WEB_FROM_PLACEHOLDER
        to_number = to_number or WEB_TO_PLACEHOLDER
    with transaction.atomic():
        call = _call_create(
            agent, channel, from_number, to_number, provider_call_id, variables, metadata, modality, carrier
        )
        event_record(call=call, event_type=EventType.CALL_STARTED)  # call events (calls/webhooks/events.py)
    liveness.hold(Call, call.pk)
    ensure_inprocess_maintenance()
    return call


def _call_create(
    agent: Agent,
    channel: str,
    from_number: str | None,
    to_number: str | None,
    provider_call_id: str | None,
    variables: dict[str, str],
    metadata: Any,
    modality: str,
    carrier: str,
) -> Call:
    return Call.objects.create(
        organization_id=agent.organization_id,
        agent=agent,
        agent_name=agent.name,
        channel=channel,
        from_number=(from_number or UNKNOWN_NUMBER)[:64],
        to_number=(to_number or UNKNOWN_NUMBER)[:64],
        status=CallStatus.ACTIVE,
        started_at=timezone.now(),
        provider_call_id=provider_call_id or None,
        heartbeat_at=liveness.first_beat(),
        variables=variables,
        metadata=metadata,
        modality=modality,
        carrier=carrier[:16],
    )


def call_activate(*, call_id: UUID | str, provider_call_id: str | None = None) -> Call | None:
    """An outbound call was answered and its media stream opened: the queued or ringing call becomes
    `active` (started_at now: the conversation starts, and is billed, from here), held by this process
    (heartbeat), with its `call.started` event in the same transaction. None when the call is no longer
    waiting to be answered (canceled or ended meanwhile): the stream must not open a conversation."""
    with transaction.atomic():
        row = Call.objects.select_for_update().filter(pk=call_id).first()
        if row is None or row.status not in (CallStatus.QUEUED, CallStatus.RINGING):
            return None
        if provider_call_id and row.provider_call_id and row.provider_call_id != provider_call_id:
            return None  # the stream of another carrier call than the one placed
        row.status = CallStatus.ACTIVE
        row.started_at = timezone.now()
        row.heartbeat_at = liveness.first_beat()
        if provider_call_id and not row.provider_call_id:
            row.provider_call_id = provider_call_id[:64]
        row.save(update_fields=["status", "started_at", "heartbeat_at", "provider_call_id"])
        event_record(call=row, event_type=EventType.CALL_STARTED)
    liveness.hold(Call, row.pk)
    ensure_inprocess_maintenance()
    return row


def _redaction(call: Call) -> dict[str, Any]:
    """The call's agent's redactPii and language (kit/redaction.py): what is stored of the call carries
    placeholders instead of the personal data they name; the live call and the tools had the real values.
    A call whose agent was deleted is stored as it is."""
    agent = call.agent if call.agent_id is not None else None
    if agent is None or not categories_of(agent.redact_pii):
        return {}
    return {"redact_pii": agent.redact_pii, "language": agent.language}


def _agent_uuid(value: Any, what: str) -> UUID | None:
    """An agent's id as given by the engine (a UUID or its text; None stays None)."""
    if value is None:
        return None
    if isinstance(value, UUID):
        return value
    try:
        return UUID(str(value))
    except ValueError:
        raise ValueError(f"{what} must be an agent's id, not {value!r}") from None


# The roles a message may name its agent for: what an agent said (and its tools' messages).
AGENT_ROLES = (MessageRole.ASSISTANT, MessageRole.TOOL)


def call_message_add(
    *, call: Call, role: str, content: str, occurred_at: datetime | None = None, agent_id: Any = None
) -> CallMessage:
    """One transcript message. `agent_id`: the agent that spoke it (assistant messages; after a handoff not
    the call's agent); None for the caller's and system messages (a ValueError when given for them)."""
    _choice(role, MessageRole, "role")
    if not isinstance(content, str):
        raise ValueError("content must be a string")
    agent_uuid = _agent_uuid(agent_id, "agent_id")
    if agent_uuid is not None and role not in AGENT_ROLES:
        raise ValueError(f"a {role} message has no agent (agent_id is for assistant and tool messages)")
    return CallMessage.objects.create(
        call_id=call.pk,
        role=role,
        content=redact_for_agent(_redaction(call), content),
        occurred_at=occurred_at or timezone.now(),
        sequence=next_sequence(),
        agent_id=agent_uuid,
    )


def call_handoff_add(
    *, call: Call, from_agent_id: Any, to_agent_id: Any, reason: str, at: datetime
) -> CallHandoff | None:
    """Record that the live call passed from one agent to another (docs/guides/call-events.md): the
    handoff row and its `call.handoff` event in one transaction (the event's body: the call as it is now,
    with this handoff last in its `handoffs`, and the message's `handoff`). The call's `agent` stays the
    agent that answered it (billing and the agent list count the call once, for that agent). The reason is
    redacted like the transcript (the call's agent's redactPii) and cut to HANDOFF_REASON_CHARS characters.
    None, with nothing recorded, when the call is no longer active (a handoff racing the call's end: its
    `call.ended` has been recorded, and nothing comes after it). An agent of another organization is a
    ValueError."""
    if not isinstance(reason, str):
        raise ValueError("reason must be a string")
    if not isinstance(at, datetime):
        raise ValueError("at must be a datetime")
    ids = [_agent_uuid(from_agent_id, "from_agent_id"), _agent_uuid(to_agent_id, "to_agent_id")]
    if ids[1] is None:
        raise ValueError("to_agent_id is required")
    named = [agent_id for agent_id in ids if agent_id is not None]
    if Agent.objects.filter(pk__in=named).exclude(organization_id=call.organization_id).exists():
        raise ValueError("a handoff is between agents of the call's organization")
    with transaction.atomic():
        # The call's row lock orders the handoff against the call's end (which takes it too).
        row = Call.objects.select_for_update().filter(pk=call.pk).first()
        if row is None or row.status != CallStatus.ACTIVE:
            return None
        reason = redact_for_agent(_redaction(row), storable(reason))[:HANDOFF_REASON_CHARS]
        handoff = CallHandoff.objects.create(
            call_id=row.pk,
            from_agent_id=ids[0],
            to_agent_id=ids[1],
            at=at,
            reason=reason,
            sequence=next_sequence(),
        )
        event_record(call=row, event_type=EventType.CALL_HANDOFF, message_fields={"handoff": handoff_item(handoff)})
    return handoff


def _cut_texts(value: Any) -> Any:
    """`value` with every string in it (at any depth) cut to FLOW_VALUE_CHARS characters."""
    if isinstance(value, str):
        return value[:FLOW_VALUE_CHARS]
    if isinstance(value, list):
        return [_cut_texts(item) for item in value]
    if isinstance(value, dict):
        return {key: _cut_texts(item) for key, item in value.items()}
    return value


def call_flow_update(*, call: Call, path: list[str], collected: dict[str, Any]) -> None:
    """Store where the agent's flow is (docs/guides/call-events.md): the call's `flow` becomes
    `{"path": path, "collected": collected}`, the state as it is now (each update replaces the last). `path`:
    the node ids in the order the flow entered them (at most FLOW_NODE_ID_CHARS characters each; the last
    FLOW_PATH_ENTRIES are kept). `collected`: the values by name, redacted like the transcript (the call's agent's
    redactPii: text values, and a number that is personal data on its own, such as a card number; names are
    kept), each text cut to FLOW_VALUE_CHARS characters; a value that is not JSON (a date) is stored as its text.
    Nothing is written once the call is no longer active (the call's end keeps the flow it had); no event is
    sent (the call's events carry the flow as it is when they are recorded)."""
    if not isinstance(path, list | tuple):
        raise ValueError("path must be a list of node ids")
    for node in path:
        if not isinstance(node, str) or not node or len(node) > FLOW_NODE_ID_CHARS:
            raise ValueError(f"a path entry must be a node id of 1 to {FLOW_NODE_ID_CHARS} characters, not {node!r}")
    if not isinstance(collected, dict) or not all(isinstance(name, str) for name in collected):
        raise ValueError("collected must be a dict of values by name")
    values = storable_value(json.loads(json.dumps(collected, default=str)))
    with transaction.atomic():
        # The call's row lock orders the update against the call's end (which takes it too).
        row = Call.objects.select_for_update().filter(pk=call.pk).first()
        if row is None or row.status != CallStatus.ACTIVE:
            return
        row.flow = {
            "path": list(path)[-FLOW_PATH_ENTRIES:],
            "collected": _cut_texts(redact_for_agent(_redaction(row), values)),
        }
        row.save(update_fields=["flow"])
    call.flow = row.flow


# A number as a transfer dials it: E.164 (a plus sign, the country code and the number, at most 15 digits).
E164_FORM = re.compile(r"\+[1-9][0-9]{1,14}")


def call_transfer_update(*, call: Call, mode: str, destination: str, status: str, at: datetime) -> None:
    """Store where the call's transfer to a person stands (docs/guides/call-events.md): the call's `transfer`
    becomes `{"mode", "destination", "status", "at"}` (each update replaces the last: a second attempt
    replaces the first), and its event is recorded in the same transaction: `call.transfer.started` for
    `ringing` (a warm transfer's second leg is being called), `call.transfer.ended` for every other status,
    with the message's `transfer`. A cold transfer is `accepted` (the carrier took the request) or `failed`;
    a warm one `ringing`, then `accepted`, `declined`, `no-answer` or `failed`. Nothing is written once the
    call is no longer active (the engine writes the transfer's outcome before it ends the call); values
    that are no transfer (an unknown mode or status, a status the mode never has, a destination not in E.164
    form, a naive or missing time) are a ValueError."""
    _choice(mode, TransferMode, "mode")
    _choice(status, TransferStatus, "status")
    if status not in TRANSFER_STATUSES[mode]:
        allowed = ", ".join(value for value in TransferStatus.values if value in TRANSFER_STATUSES[mode])
        raise ValueError(f"a {mode} transfer's status is one of {allowed}, not {status!r}")
    if not isinstance(destination, str) or not E164_FORM.fullmatch(destination):
        raise ValueError(f"destination must be a phone number in E.164 form (+14155550123), not {destination!r}")
    if not isinstance(at, datetime) or timezone.is_naive(at):
        raise ValueError("at must be a timezone-aware datetime")
    with transaction.atomic():
        # The call's row lock orders the update against the call's end (which takes it too).
        row = Call.objects.select_for_update().filter(pk=call.pk).first()
        if row is None or row.status != CallStatus.ACTIVE:
            return
        row.transfer = {"mode": str(mode), "destination": destination, "status": str(status), "at": iso(at)}
        row.save(update_fields=["transfer"])
        started = status == TransferStatus.RINGING
        event_record(
            call=row,
            event_type=EventType.CALL_TRANSFER_STARTED if started else EventType.CALL_TRANSFER_ENDED,
            message_fields={"transfer": transfer_item(row)},
        )
    call.transfer = row.transfer


def call_tool_invocation_add(
    *,
    call: Call,
    tool_name: str,
    request: dict,
    response: str,
    status: str,
    duration_ms: int,
    agent_tool_id: UUID | None = None,
) -> ToolInvocation:
    """Log one tool call and count it on the call, in one transaction."""
    _choice(status, ToolInvocationStatus, "status")
    if not isinstance(request, dict):
        raise ValueError("request must be a dict")
    if not isinstance(response, str):
        response = json.dumps(response, default=str)
    redaction = _redaction(call)
    request = redact_for_agent(redaction, json.loads(json.dumps(request, default=str)))
    response = _redact_response(redaction, response)
    with transaction.atomic():
        invocation = ToolInvocation.objects.create(
            call_id=call.pk,
            agent_tool_id=agent_tool_id,
            tool_name=tool_name,
            request=request,
            response=response,
            status=status,
            duration_ms=max(0, int(duration_ms)),
            created_at=timezone.now(),
            sequence=next_sequence(),
        )
        Call.objects.filter(pk=call.pk).update(tool_invocation_count=F("tool_invocation_count") + 1)
    call.tool_invocation_count = (call.tool_invocation_count or 0) + 1
    return invocation


def _redact_response(redaction: dict[str, Any], response: str) -> str:
    """A tool's answer as stored: a JSON text redacted value by value (it stays JSON), else as text."""
    if not redaction:
        return response
    try:
        parsed = json.loads(response)
    except ValueError:
        return redact_for_agent(redaction, response)
    redacted = redact_for_agent(redaction, parsed)
    return response if redacted == parsed else json.dumps(redacted)


def call_llm_usage_add(
    *,
    call: Call,
    provider: str,
    model: str,
    product: str = CostProduct.LLM,
    input_tokens: int = 0,
    output_tokens: int = 0,
    cached_input_tokens: int = 0,
    input_audio_tokens: int = 0,
    output_audio_tokens: int = 0,
    input_audio_seconds: float = 0.0,
    output_audio_seconds: float = 0.0,
) -> LlmUsage:
    """One row per model turn: the tokens its provider reported (`input_tokens` and `output_tokens` all of
    them; of those, the cached input and the audio ones when reported). `product`: llm (the brain) or
    speech_to_speech. The call's ledger sums them when it ends (calls/costs/)."""
    if product not in (CostProduct.LLM, CostProduct.SPEECH_TO_SPEECH):
        raise ValueError(f"product must be llm or speech_to_speech, not {product!r}")
    return LlmUsage.objects.create(
        call_id=call.pk,
        provider=provider,
        model=model,
        product=product,
        input_tokens=max(0, int(input_tokens)),
        output_tokens=max(0, int(output_tokens)),
        cached_input_tokens=max(0, int(cached_input_tokens)),
        input_audio_tokens=max(0, int(input_audio_tokens)),
        output_audio_tokens=max(0, int(output_audio_tokens)),
        input_audio_seconds=max(0.0, float(input_audio_seconds)),
        output_audio_seconds=max(0.0, float(output_audio_seconds)),
        created_at=timezone.now(),
        sequence=next_sequence(),
    )


def default_ended_reason(status: str) -> str:
    """The ended reason of a call finished without one: the caller hung up (completed) or an error (failed)."""
    return EndedReason.CALLER_HUNG_UP if status == CallStatus.COMPLETED else EndedReason.ERROR


def call_finish(
    *,
    call: Call,
    status: str,
    latency: dict[str, Any] | None = None,
    ended_reason: str | None = None,
    message: str = "",
    recording: bool = False,
    measured: list[dict[str, Any]] | None = None,
) -> Call:
    """Close the call: duration, summary, billing, its cost ledger (`measured`: what the session measured,
    `{product, provider, model, unit, quantity}`: recognized seconds, synthesized characters, a transfer
    leg; calls/costs/services.py), why it ended (`ended_reason`, an EndedReason; by
    default caller-hung-up when completed, error when failed; `message`, a sentence saying more, such as
    the provider's answer: the call's endedMessage), and the per-turn latency summary of the
    engine (calls.latency.latency_summary). `recording`: the engine is storing the call's recording, whose
    place the call keeps from now on (its recordingUrl, also in call.ended, works once it is stored:
    call_recording_attach; call_recording_abandon when it could not be). Idempotent: a call that is no
    longer active is returned as it is (a socket that closes twice does not bill twice, and the first
    reason stays)."""
    if status not in (CallStatus.COMPLETED, CallStatus.FAILED):
        raise ValueError(f"status must be completed or failed, not {status!r}")
    ended_reason = _choice(ended_reason or default_ended_reason(status), EndedReason, "ended_reason")
    finished = _finish(
        call_id=call.pk,
        status=status,
        ended_at=timezone.now(),
        latency=latency,
        ended_reason=ended_reason,
        message=message,
        recording=recording,
        measured=measured or [],
    )
    for field in (f.attname for f in Call._meta.concrete_fields):
        setattr(call, field, getattr(finished, field))
    return call


def _finish(
    *,
    call_id: UUID,
    status: str,
    ended_at: datetime,
    latency: dict[str, Any] | None = None,
    ended_reason: str | None = None,
    message: str = "",
    recording: bool = False,
    measured: list[dict[str, Any]] | None = None,
) -> Call:
    liveness.release(Call, call_id)
    current = (
        Call.objects.filter(pk=call_id)
        .values("status", "organization_id", redact_pii=F("agent__redact_pii"), language=F("agent__language"))
        .first()
    )
    if current is None:
        raise ValueError(f"call {call_id} does not exist")
    # The summary reads the transcript outside the billing lock, which stays short.
    transcript = CallMessage.objects.filter(call_id=call_id).order_by("occurred_at", "sequence")
    summary = summarize(transcript.values_list("role", "content"))
    summary = redact_for_agent(current, summary)  # redactPii, also over messages stored before it was on
    message = redact_for_agent(current, message)
    with transaction.atomic():
        # Lock order: organization, then call. Two calls of one organization finishing at once
        # serialize here, so the second sees the allowance the first has taken.
        organization = (
            Organization.objects.select_for_update().select_related("plan").get(pk=current["organization_id"])
        )
        row = Call.objects.select_for_update().get(pk=call_id)
        if row.status != CallStatus.ACTIVE:
            return row
        ended_at = max(ended_at, row.started_at)
        row.status = status
        row.ended_at = ended_at
        row.duration_seconds = int((ended_at - row.started_at).total_seconds())
        row.summary = summary
        if latency is not None:
            row.latency = latency  # with the final state, in the same transaction
        row.ended_reason = ended_reason or default_ended_reason(status)  # endings: why it ended
        row.ended_message = message
        if recording and not row.recording_key:
            # The recording's place, kept before it is stored (recording_saved_at stays null until then).
            row.recording_key = recording_key_for(row)
        row.billable_seconds = billing.billable_seconds(row.duration_seconds)
        period = billing.period_bounds(organization.billing_period_start, ended_at)
        if period is None:
            row.included_seconds, row.overage_seconds = 0, row.billable_seconds
            row.usage_classification = billing.UNALLOCATED
            row.billing_period_start = None
        else:
            used = (
                Call.objects.filter(organization=organization, billing_period_start=period[0]).aggregate(
                    used=Sum("included_seconds")
                )["used"]
                or 0
            )
            allocation = billing.allocate(
                billable=row.billable_seconds,
                remaining=organization.plan.included_minutes * 60 - used,
                on_trial=organization.on_trial,
            )
            row.included_seconds = allocation.included_seconds
            row.overage_seconds = allocation.overage_seconds
            row.usage_classification = allocation.classification
            row.billing_period_start = period[0]
        call_costs_write(row=row, measured=measured or [])
        # Post-call analysis (calls/analysis.py): pending with the end of the call, run after the commit.
        row.analysis_status = AnalysisStatus.PENDING
        transaction.on_commit(lambda: queue_analysis(call_id))
        row.save()
        event_record(call=row, event_type=EventType.CALL_ENDED)  # call events (calls/webhooks/events.py)
        budget_thresholds_record(call=row)  # after call.ended: the cost it carries crossed them
        transaction.on_commit(lambda: call_ended_send(call_id))
    return row


# How an outbound call that was never answered may end.
UNANSWERED_STATUSES = (CallStatus.NO_ANSWER, CallStatus.BUSY, CallStatus.CANCELED, CallStatus.FAILED)


def call_end_unanswered(*, call_id: UUID | str, status: str, ended_reason: str, message: str = "") -> Call | None:
    """End an outbound call that was never answered (still `queued` or `ringing`): `status` no-answer,
    busy, canceled or failed with its `ended_reason` (and `message`, a sentence saying more: what the
    carrier answered), ended now, no duration and nothing billed, its analysis skipped (there is no
    conversation), with its `call.ended` and `call.analyzed` events and, after the commit,
    `call_ended_send`. Exactly once: a call that has left queued/ringing (answered, or already ended) is
    returned unchanged, with no event. None: no such call."""
    if status not in UNANSWERED_STATUSES:
        raise ValueError(f"status must be one of {', '.join(UNANSWERED_STATUSES)}, not {status!r}")
    ended_reason = _choice(ended_reason, EndedReason, "ended_reason")
    with transaction.atomic():
        row = Call.objects.select_for_update().filter(pk=call_id).first()
        if row is None or row.status not in (CallStatus.QUEUED, CallStatus.RINGING):
            return row
        now = timezone.now()
        row.status = status
        row.ended_reason = ended_reason
        row.ended_message = redact_for_agent(_redaction(row), message)
        row.ended_at = max(now, row.started_at)
        row.duration_seconds = 0
        row.billable_seconds = row.included_seconds = row.overage_seconds = 0
        row.analysis_status = AnalysisStatus.SKIPPED
        row.analysis = {key: None for key in ANALYSIS_RESULT_KEYS} | {
            "parts": {},
            "error": f"The call was never answered ({status}): there is nothing to analyse.",
        }
        costs = call_costs_write(row=row)
        row.save(
            update_fields=[
                *costs,
                "status",
                "ended_reason",
                "ended_message",
                "ended_at",
                "duration_seconds",
                "billable_seconds",
                "included_seconds",
                "overage_seconds",
                "analysis_status",
                "analysis",
            ]
        )
        event_record(call=row, event_type=EventType.CALL_ENDED)
        event_record(call=row, event_type=EventType.CALL_ANALYZED)
        pk = row.pk
        transaction.on_commit(lambda: call_ended_send(pk))
    return row


def call_ended_send(call_id: UUID) -> None:
    """Tell the apps above (outbound placing, call batches) that a call ended: once per ending, after
    its commit. A receiver's failure is logged, never raised into the ending."""
    for receiver, result in call_ended.send_robust(sender=Call, call_id=call_id):
        if isinstance(result, Exception):
            logger.error("call %s: the call_ended receiver %s failed: %r", call_id, receiver, result)


ANALYSIS_RESULT_KEYS = ("summary", "structuredData", "successEvaluation", "parts", "model", "usage", "error")
# The parts of a result that may hold what the caller said (redactPii applies to them).
ANALYSIS_CALLER_KEYS = ("summary", "structuredData", "successEvaluation", "error")
ANALYSIS_FINAL = (AnalysisStatus.COMPLETED, AnalysisStatus.SKIPPED, AnalysisStatus.FAILED)


def call_analysis_claim(*, call_id: UUID, lease: timedelta) -> bool:
    """Take a pending analysis for this worker: True when it was pending and nobody had taken it in the
    last `lease` (a worker that died with it loses it after the lease). One conditional UPDATE, so two
    workers never both take it."""
    now = timezone.now()
    free = Q(analysis_claimed_at__isnull=True) | Q(analysis_claimed_at__lt=now - lease)
    taken = Call.objects.filter(free, pk=call_id, analysis_status=AnalysisStatus.PENDING).update(
        analysis_claimed_at=now
    )
    return taken == 1


def call_analysis_save(*, call_id: UUID, analysis: dict[str, Any]) -> bool:
    """Store a call's analysis (`status` completed, skipped or failed, and the result keys of
    ANALYSIS_RESULT_KEYS; its summary, when it made one, becomes the call's `summary`) and its
    `call.analyzed` event in one transaction. Only a pending analysis is
    stored: a second worker that finished the same analysis changes nothing (and False is returned), so
    the event is recorded once. With the agent's redactPii, what it read of the call is stored redacted."""
    status = analysis.get("status")
    if status not in ANALYSIS_FINAL:
        raise ValueError(f"analysis status must be one of {', '.join(ANALYSIS_FINAL)}, not {status!r}")
    result = {key: analysis.get(key) for key in ANALYSIS_RESULT_KEYS}
    result = json.loads(json.dumps(result, default=str))
    with transaction.atomic():
        row = Call.objects.select_for_update().filter(pk=call_id).first()
        if row is None or row.analysis_status != AnalysisStatus.PENDING:
            return False
        redaction = _redaction(row)
        row.analysis_status = status
        row.analysis = {
            key: redact_for_agent(redaction, value) if key in ANALYSIS_CALLER_KEYS else value
            for key, value in result.items()
        }
        row.analysis_claimed_at = None
        fields = ["analysis_status", "analysis", "analysis_claimed_at"]
        fields += call_costs_add(row=row, quantities=analysis_quantities(model=result["model"], usage=result["usage"]))
        if isinstance(row.analysis.get("summary"), str) and row.analysis["summary"].strip():
            # The call's own summary becomes the analysis' (the end of call's extract was a stand-in).
            row.summary = row.analysis["summary"]
            fields.append("summary")
        row.save(update_fields=fields)
        event_record(call=row, event_type=EventType.CALL_ANALYZED)
        budget_thresholds_record(call=row)
    return True


def call_close_stale(*, idle_for: timedelta | None = None) -> int:
    """Close as `failed` (ended reason `stale`) the active calls left behind by a crashed process: those whose process's
    heartbeat stopped more than LIVENESS_EXPIRY_SECONDS ago (kit/liveness.py), and those without a
    heartbeat (it was off) started more than `idle_for` ago (CALLS_STALE_AFTER_SECONDS) with no message,
    tool call or model turn since. They end (and are billed) at their last sign of life: the last
    recorded activity or heartbeat, both written while the call was still held (never after the crash,
    so never over-billed). Returns how many were closed."""
    now = timezone.now()
    idle_for = idle_for or timedelta(seconds=settings.CALLS_STALE_AFTER_SECONDS)
    cutoff = now - idle_for
    recent = Q(occurred_at__gte=cutoff)
    idle = (
        Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
        & ~Exists(CallMessage.objects.filter(recent, call=OuterRef("pk")))
        & ~Exists(ToolInvocation.objects.filter(call=OuterRef("pk"), created_at__gte=cutoff))
        & ~Exists(LlmUsage.objects.filter(call=OuterRef("pk"), created_at__gte=cutoff))
    )
    orphaned = Q(heartbeat_at__lt=now - timedelta(seconds=settings.LIVENESS_EXPIRY_SECONDS))
    stale = Call.objects.filter(idle | orphaned, status=CallStatus.ACTIVE).values_list(
        "pk", "started_at", "heartbeat_at"
    )

    def close(row: tuple[UUID, datetime, datetime | None]) -> bool:
        call_id, started_at, heartbeat_at = row
        last = [
            heartbeat_at,
            CallMessage.objects.filter(call_id=call_id).aggregate(t=Max("occurred_at"))["t"],
            ToolInvocation.objects.filter(call_id=call_id).aggregate(t=Max("created_at"))["t"],
            LlmUsage.objects.filter(call_id=call_id).aggregate(t=Max("created_at"))["t"],
        ]
        ended_at = max([started_at, *(t for t in last if t is not None)])
        finished = _finish(call_id=call_id, status=CallStatus.FAILED, ended_at=ended_at, ended_reason=EndedReason.STALE)
        return finished.status == CallStatus.FAILED and finished.ended_at == ended_at

    closed = rows_one_by_one("closedCalls", list(stale[:1000]), close, row_id=lambda row: row[0])
    if closed:
        logger.info("closed %d stale active call(s) as failed", closed)
    return closed


def agent_log_purge(*, older_than: timedelta | None = None) -> int:
    """Delete agent logs older than the retention window (AGENT_LOG_RETENTION_HOURS). Returns the count."""
    older_than = older_than or timedelta(hours=settings.AGENT_LOG_RETENTION_HOURS)
    deleted, _ = AgentLog.objects.filter(timestamp__lt=timezone.now() - older_than).delete()
    if deleted:
        logger.info("purged %d agent log line(s)", deleted)
    return deleted


# --- recordings (calls/recordings.py) ---------------------------------------------------------------


def call_for_recording(*, call_id: str) -> Call | None:
    """The ended call a recording is being stored for (None: it was deleted meanwhile)."""
    return Call.objects.filter(pk=call_id).first()


def call_recording_attach(*, call_id: str, key: str, size_bytes: int = 0) -> None:
    """The call's recording is stored under `key` (a replaced one is removed from the storage); its
    storage (`size_bytes`) joins the call's cost ledger."""
    with transaction.atomic():
        call = Call.objects.select_for_update().filter(pk=call_id).first()
        if call is None:
            transaction.on_commit(lambda: recording_remove(key))
            return
        previous = call.recording_key
        call.recording_key, call.recording_saved_at = key, timezone.now()
        costs = [] if previous else call_costs_add(row=call, quantities=recording_quantities(size_bytes=size_bytes))
        call.save(update_fields=["recording_key", "recording_saved_at", *costs])
        if costs:
            budget_thresholds_record(call=call)
    if previous and previous != key:
        recording_remove(previous)


def call_recording_abandon(*, call_id: str) -> None:
    """The recording the call's place was kept for could not be stored: the call has none."""
    Call.objects.filter(pk=call_id, recording_saved_at__isnull=True).update(recording_key="")


def call_recording_delete(*, call: Call) -> None:
    """DELETE /calls/{id}/recording: the file is removed from the storage, then the call forgets it.
    ApiError 404 when the call has no recording."""
    with transaction.atomic():
        locked = Call.objects.select_for_update().filter(pk=call.pk).first()
        key = locked.recording_key if locked is not None else ""
        if not key:
            raise ApiError.not_found("This call has no recording", code="RECORDING_NOT_FOUND")
        recording_remove(key)
        Call.objects.filter(pk=call.pk).update(recording_key="", recording_saved_at=None)
    call.recording_key, call.recording_saved_at = "", None


def recording_purge(*, older_than: timedelta | None = None, batch: int = 500) -> int:
    """Delete recordings stored more than RECORDING_RETENTION_DAYS ago (0: none). Returns the count."""
    if older_than is None:
        if not settings.RECORDING_RETENTION_DAYS:
            return 0
        older_than = timedelta(days=settings.RECORDING_RETENTION_DAYS)
    cutoff = timezone.now() - older_than

    def purge(row: tuple[UUID, str]) -> int:
        pk, key = row
        recording_remove(key)
        return Call.objects.filter(pk=pk, recording_key=key).update(recording_key="", recording_saved_at=None)

    purged = 0
    while True:
        before = purged
        rows = list(
            Call.objects.filter(recording_saved_at__lt=cutoff)
            .exclude(recording_key="")
            .values_list("pk", "recording_key")[:batch]
        )
        purged += rows_one_by_one("purgedRecordings", rows, purge, row_id=lambda row: row[0])
        if len(rows) < batch or purged == before:
            break
    if purged:
        logger.info("purged %d recording(s)", purged)
    return purged
