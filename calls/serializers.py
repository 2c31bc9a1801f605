"""Query parsing and rendering of calls and agent logs (the wire names of the contract)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from calls.models import (
    AgentLog,
    AnalysisStatus,
    Call,
    CallChannel,
    CallDirection,
    CallHandoff,
    CallMessage,
    CallModality,
    CallStatus,
    CostProduct,
    CostUnit,
    EndedReason,
    MessageRole,
    Severity,
    ToolInvocationStatus,
    TransferMode,
    TransferStatus,
    UsageClassification,
    ended_message,
)
from calls.recordings import recording_url
from calls.selectors import CALL_SUMMARY_COLUMNS
from kit.fields import iso


class CallListQuery(serializers.Serializer):
    agentId = serializers.UUIDField(required=False, help_text="Only calls of this agent.")
    limit = serializers.IntegerField(
        required=False, default=25, min_value=1, max_value=100, help_text="How many calls, 1 to 100."
    )


class AgentLogQuery(serializers.Serializer):
    limit = serializers.IntegerField(
        required=False, default=25, min_value=1, max_value=100, help_text="How many entries, 1 to 100."
    )
    offset = serializers.IntegerField(
        required=False, default=0, min_value=0, max_value=1_000_000, help_text="How many entries to skip."
    )
    severity = serializers.ChoiceField(required=False, choices=Severity.choices, help_text="Only this severity.")
    sessionId = serializers.RegexField(
        r"^[A-Za-z0-9]{6}$",
        required=False,
        error_messages={"invalid": "Must be a 6-character session id."},
        help_text="Only entries of this session (6 characters).",
    )


def _minutes(seconds: int) -> float:
    return seconds / 60


def call_summary_item(row: dict[str, Any]) -> dict[str, Any]:
    """A call summary from a `values()` row of calls.selectors.CALL_SUMMARY_COLUMNS."""
    return {
        "id": str(row["id"]),
        "agentId": str(row["agent_id"]) if row["agent_id"] else None,
        "agentName": row["agent_name"],
        "channel": row["channel"],
        "fromNumber": row["from_number"],
        "toNumber": row["to_number"],
        "status": row["status"],
        "durationSeconds": row["duration_seconds"],
        "startedAt": iso(row["started_at"]),
        "endedAt": iso(row["ended_at"]),
        "toolInvocations": row["tool_invocation_count"],
        "billableMinutes": _minutes(row["billable_seconds"]),
        "includedMinutes": _minutes(row["included_seconds"]),
        "overageMinutes": _minutes(row["overage_seconds"]),
        # An active call is not billed yet.
        "usageClassification": row["usage_classification"] or None,
        "endedReason": row["ended_reason"],
        "endedMessage": ended_message(row["ended_reason"], row["ended_message"]),
        "direction": row["direction"],
        # Per-call variables and the client's metadata (docs/guides/variables.md).
        "variables": row["variables"] or {},
        "metadata": row["metadata"],
        # audio (spoken) or text (a typed session: docs/guides/typed-sessions.md).
        "modality": row["modality"],
    }


def message_agent_id(message: CallMessage, call_agent_id: Any) -> str | None:
    """Who spoke a message (its `agentId`): the agent stored with it; for an assistant message stored
    without one (before handoffs existed) the call's agent; None for the caller's and system messages."""
    if message.agent_id is not None:
        return str(message.agent_id)
    if message.role == MessageRole.ASSISTANT and call_agent_id is not None:
        return str(call_agent_id)
    return None


def handoff_item(handoff: CallHandoff) -> dict[str, Any]:
    """One of a call's `handoffs`, and call.handoff's `message.handoff`."""
    return {
        "fromAgentId": str(handoff.from_agent_id) if handoff.from_agent_id else None,
        "toAgentId": str(handoff.to_agent_id) if handoff.to_agent_id else None,
        "at": iso(handoff.at),
        "reason": handoff.reason,
    }


def flow_item(call: Call) -> dict[str, Any] | None:
    """The call's `flow`: {"path", "collected"} as last stored, or None for a call that ran no flow."""
    stored = call.flow
    if not isinstance(stored, dict):
        return None
    path, collected = stored.get("path"), stored.get("collected")
    return {
        "path": list(path) if isinstance(path, list) else [],
        "collected": dict(collected) if isinstance(collected, dict) else {},
    }


TRANSFER_KEYS = ("mode", "destination", "status", "at")


def transfer_item(call: Call) -> dict[str, Any] | None:
    """The call's `transfer` (and the transfer events' `message.transfer`): {"mode", "destination", "status",
    "at"} as last stored, or None for a call never transferred to a person."""
    stored = call.transfer
    if not isinstance(stored, dict):
        return None
    return {key: stored.get(key) for key in TRANSFER_KEYS}


def call_detail(call: Call) -> dict[str, Any]:
    row = {column: getattr(call, column) for column in CALL_SUMMARY_COLUMNS}
    return {
        **call_summary_item(row),
        "summary": call.summary,
        "messages": [
            {
                "id": str(m.id),
                "role": m.role,
                "content": m.content,
                "occurredAt": iso(m.occurred_at),
                "agentId": message_agent_id(m, call.agent_id),
            }
            for m in call.messages.all()
        ],
        # The agents the call passed between, in order (calls.services.call_handoff_add).
        "handoffs": [handoff_item(h) for h in call.handoffs.all()],
        # The agent's flow as it ran (calls.services.call_flow_update); null without a flow.
        "flow": flow_item(call),
        # The last transfer to a person, as it stands (calls.services.call_transfer_update); null without one.
        "transfer": transfer_item(call),
        "toolInvocationsLog": [
            {
                "id": str(t.id),
                "agentToolId": str(t.agent_tool_id) if t.agent_tool_id else None,
                "toolName": t.tool_name,
                "request": t.request,
                "response": t.response,
                "status": t.status,
                "durationMs": t.duration_ms,
                "createdAt": iso(t.created_at),
            }
            for t in call.tool_invocations.all()
        ],
        "llmUsage": [
            {
                "id": str(u.id),
                "provider": u.provider,
                "model": u.model,
                "product": u.product,
                "inputTokens": u.input_tokens,
                "outputTokens": u.output_tokens,
                "cachedInputTokens": u.cached_input_tokens,
                "inputAudioTokens": u.input_audio_tokens,
                "outputAudioTokens": u.output_audio_tokens,
                "inputAudioSeconds": u.input_audio_seconds,
                "outputAudioSeconds": u.output_audio_seconds,
                "createdAt": iso(u.created_at),
            }
            for u in call.llm_usage.all()
        ],
        # The engine's per-turn latency, p50/p95 per stage (calls/latency.py); null without an answered turn.
        "latency": call.latency,
        # A signed URL of the call's recording, valid RECORDING_URL_TTL_SECONDS (calls/recordings.py).
        "recordingUrl": recording_url(call),
        # Post-call analysis (realtime/analysis/); null while the call is active.
        "analysis": analysis_item(call),
        # The cost ledger (calls/costs/, docs/costs.md): written when the call ends.
        "costs": list(call.costs or []),
        "cost": cost_item(call),
    }


def cost_item(call: Call) -> dict[str, Any]:
    """The call's `cost`: its ledger's total and currency (total null while the call is open)."""
    total = call.cost_total
    return {"total": float(total) if total is not None else None, "currency": call.cost_currency or None}


def analysis_item(call: Call) -> dict[str, Any] | None:
    """The call's `analysis`: its status and, once stored, the results (every key always present)."""
    if not call.analysis_status:
        return None
    stored = call.analysis or {}
    return {
        "status": call.analysis_status,
        "summary": stored.get("summary"),
        "structuredData": stored.get("structuredData"),
        "successEvaluation": stored.get("successEvaluation"),
        "parts": stored.get("parts") or {},
        "model": stored.get("model"),
        "usage": stored.get("usage") or {"inputTokens": 0, "outputTokens": 0},
        "error": stored.get("error"),
    }


def agent_log_item(log: AgentLog) -> dict[str, Any]:
    return {
        "id": str(log.id),
        "accountId": str(log.organization_id),
        "agentId": str(log.agent_id),
        "sessionId": log.session_id,
        "timestamp": iso(log.timestamp),
        "severity": log.severity,
        "content": log.content,
    }


# OpenAPI descriptions of the responses (rendering is done by the functions above).
class CallSummarySchema(serializers.Serializer):
    id = serializers.UUIDField()
    agentId = serializers.UUIDField(allow_null=True)
    agentName = serializers.CharField()
    channel = serializers.ChoiceField(choices=CallChannel.choices)
    fromNumber = serializers.CharField()
    toNumber = serializers.CharField()
    status = serializers.ChoiceField(choices=CallStatus.choices)
    durationSeconds = serializers.IntegerField()
    startedAt = serializers.DateTimeField()
    endedAt = serializers.DateTimeField(allow_null=True)
    toolInvocations = serializers.IntegerField()
    billableMinutes = serializers.FloatField()
    includedMinutes = serializers.FloatField()
    overageMinutes = serializers.FloatField()
    usageClassification = serializers.ChoiceField(choices=UsageClassification.choices, allow_null=True)
    endedReason = serializers.ChoiceField(
        choices=EndedReason.choices,
        allow_null=True,
        help_text='Why the call ended (one closed list, see docs/guides/voice-sessions.md, "Why a call ended"); null '
        "while it is active.",
    )
    endedMessage = serializers.CharField(
        allow_null=True,
        help_text="Why the call ended, in a sentence: for a failed call its cause (what the carrier or provider "
        "answered, redacted like the transcript), otherwise the reason's own sentence; null while it is active.",
    )
    direction = serializers.ChoiceField(
        choices=CallDirection.choices,
        help_text="inbound (a call to one of your numbers, or a browser session) or outbound (placed by the service).",
    )
    variables = serializers.DictField(
        child=serializers.CharField(),
        help_text="The call's per-call variables, filling {{name}} placeholders (docs/guides/variables.md).",
    )
    # Any JSON value, null included (a nullable JSONField would be a oneOf that null matches twice).
    metadata = serializers.JSONField(
        help_text="Your free JSON given with the call, echoed as given (null when none); never shown to the model."
    )
    modality = serializers.ChoiceField(
        choices=CallModality.choices,
        help_text="audio (spoken: a phone call or a browser voice session) or text (a typed session opened with "
        '`"modality": "text"`, docs/guides/typed-sessions.md).',
    )


class CallMessageSchema(serializers.Serializer):
    id = serializers.UUIDField()
    role = serializers.ChoiceField(choices=MessageRole.choices)
    content = serializers.CharField()
    occurredAt = serializers.DateTimeField()
    agentId = serializers.UUIDField(
        allow_null=True,
        help_text="The agent that spoke it: for an assistant message the agent talking at that moment (after a "
        "handoff, the one handed to); null for the caller's and system messages.",
    )


class CallHandoffSchema(serializers.Serializer):
    fromAgentId = serializers.UUIDField(allow_null=True, help_text="The agent that handed the call off.")
    toAgentId = serializers.UUIDField(allow_null=True, help_text="The agent that took the call over.")
    at = serializers.DateTimeField(help_text="When the call passed to the new agent.")
    reason = serializers.CharField(
        allow_blank=True,
        help_text="Why, in the words of the agent's model (at most 500 characters, redacted like the transcript); "
        "may be empty.",
    )


class CallFlowSchema(serializers.Serializer):
    path = serializers.ListField(
        child=serializers.CharField(),
        help_text="The ids of the flow's nodes in the order the call entered them (a node entered again is listed "
        "again; the last 500 are kept).",
    )
    collected = serializers.DictField(
        child=serializers.JSONField(),
        help_text="The values the flow collected, by name (a string, number or boolean each), redacted like the "
        "transcript (the answering agent's redactPii).",
    )


class CallTransferSchema(serializers.Serializer):
    mode = serializers.ChoiceField(
        choices=TransferMode.choices,
        help_text="cold: the carrier connects the caller to the destination and the agent leaves; warm: the caller "
        "waits while the person is called and briefed, and is joined once the person accepts.",
    )
    destination = serializers.CharField(
        help_text="The number the transfer called, in E.164 form (a plus sign, the country code and the number)."
    )
    status = serializers.ChoiceField(
        choices=TransferStatus.choices,
        help_text="cold: accepted (the carrier took the request to dial the destination) or failed (it refused "
        "it). warm: ringing while the person's phone rings with the briefing, then accepted (the person pressed 1 "
        "and was joined with the caller: the call ends `transferred`), declined, no-answer or failed (the caller "
        "is back with the agent).",
    )
    at = serializers.DateTimeField(help_text="When the transfer reached this status.")


class ToolInvocationSchema(serializers.Serializer):
    id = serializers.UUIDField()
    agentToolId = serializers.UUIDField(allow_null=True)
    toolName = serializers.CharField()
    request = serializers.JSONField()
    response = serializers.CharField()
    status = serializers.ChoiceField(choices=ToolInvocationStatus.choices)
    durationMs = serializers.IntegerField()
    createdAt = serializers.DateTimeField()


class LlmUsageSchema(serializers.Serializer):
    id = serializers.UUIDField()
    provider = serializers.CharField()
    model = serializers.CharField()
    product = serializers.ChoiceField(
        choices=[("llm", "llm"), ("speech_to_speech", "speech_to_speech")],
        help_text="llm: the brain's language model; speech_to_speech: the provider that hears and speaks.",
    )
    inputTokens = serializers.IntegerField(help_text="All input tokens the provider reported.")
    outputTokens = serializers.IntegerField(help_text="All output tokens the provider reported.")
    cachedInputTokens = serializers.IntegerField(help_text="Of the input tokens, those read from its cache.")
    inputAudioTokens = serializers.IntegerField(help_text="Of the input tokens, audio ones (speech-to-speech).")
    outputAudioTokens = serializers.IntegerField(help_text="Of the output tokens, audio ones (speech-to-speech).")
    inputAudioSeconds = serializers.FloatField()
    outputAudioSeconds = serializers.FloatField()
    createdAt = serializers.DateTimeField()


class LatencyFiguresSchema(serializers.Serializer):
    p50 = serializers.IntegerField(help_text="Median over the call's answered turns, in milliseconds.")
    p95 = serializers.IntegerField(help_text="95th percentile over the call's answered turns, in milliseconds.")


class CallLatencySchema(serializers.Serializer):
    turns = serializers.IntegerField(help_text="Caller turns the agent answered (with audio).")
    endOfTurnMs = LatencyFiguresSchema(
        allow_null=True, help_text="From the caller's last speech until the turn was taken (cascade voice engine)."
    )
    recognitionMs = LatencyFiguresSchema(
        allow_null=True, help_text="From the turn taken until its words were recognized (cascade voice engine)."
    )
    firstTokenMs = LatencyFiguresSchema(
        allow_null=True, help_text="From the words known (or the turn taken) until the model's first output."
    )
    firstAudioMs = LatencyFiguresSchema(
        allow_null=True, help_text="From the model's first output until the answer's first audio byte."
    )
    totalMs = LatencyFiguresSchema(
        allow_null=True, help_text="From the caller's last speech (or the turn taken) until the first audio byte."
    )


class SuccessEvaluationSchema(serializers.Serializer):
    result = serializers.JSONField(help_text="true or false (scale pass-fail), or 1 to 10 (scale 1-10).")
    reasoning = serializers.CharField(help_text="Why, in the model's words.")
    scale = serializers.ChoiceField([("pass-fail", "pass-fail"), ("1-10", "1-10")])


class AnalysisUsageSchema(serializers.Serializer):
    inputTokens = serializers.IntegerField()
    outputTokens = serializers.IntegerField()


class CallAnalysisSchema(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=AnalysisStatus.choices,
        help_text="pending until the analysis ran; completed (every enabled part ran), skipped (no part could "
        "run: all disabled, or no caller words), failed (a part failed: see error).",
    )
    summary = serializers.CharField(allow_null=True)
    structuredData = serializers.DictField(allow_null=True, help_text="Valid against the plan's schema.")
    successEvaluation = SuccessEvaluationSchema(allow_null=True)
    parts = serializers.DictField(
        child=serializers.ChoiceField(choices=AnalysisStatus.choices),
        help_text="The status of each enabled part: summary, structuredData, successEvaluation.",
    )
    model = serializers.CharField(
        allow_null=True, help_text="The model that ran it (`embedded` for the embedded brain)."
    )
    usage = AnalysisUsageSchema(help_text="Tokens of every analysis request, summed.")
    error = serializers.CharField(allow_null=True, help_text="Why a part failed or was skipped.")


class CostLineSchema(serializers.Serializer):
    product = serializers.ChoiceField(choices=CostProduct.choices)
    provider = serializers.CharField(help_text="Who provided it: a carrier, a speech or model provider, a storage.")
    model = serializers.CharField(
        allow_null=True,
        help_text="The provider's model or voice; for telephony the leg: inbound, outbound or transfer.",
    )
    quantity = serializers.FloatField(help_text="How much was used, in `unit` (6 decimal places).")
    unit = serializers.ChoiceField(choices=CostUnit.choices)
    unitPrice = serializers.FloatField(help_text="The price per unit from the book in force when the call started.")
    amount = serializers.FloatField(help_text="quantity x unitPrice, rounded to 6 decimal places.")


class CallCostSchema(serializers.Serializer):
    total = serializers.FloatField(allow_null=True, help_text="The sum of the amounts; null while the call is open.")
    currency = serializers.CharField(allow_null=True, help_text="The price book's currency (ISO 4217).")


class CallDetailSchema(CallSummarySchema):
    summary = serializers.CharField()
    messages = CallMessageSchema(many=True)
    handoffs = CallHandoffSchema(
        many=True,
        help_text="The handoffs between agents during the call, in order (empty without any). The call's agentId "
        "stays the agent that answered it.",
    )
    flow = CallFlowSchema(
        allow_null=True,
        help_text="Where the agent's flow went: the path of node ids and the collected values, as it is now (while "
        "the call is active) or as it ended; null for a call whose agent has no flow.",
    )
    transfer = CallTransferSchema(
        allow_null=True,
        help_text="The call's last transfer to a person, as it stands now (while the call is active) or as it "
        "ended; null for a call never transferred. Each change also sends call.transfer.started (ringing) or "
        "call.transfer.ended (any other status).",
    )
    toolInvocationsLog = ToolInvocationSchema(many=True)
    llmUsage = LlmUsageSchema(many=True)
    latency = CallLatencySchema(
        allow_null=True,
        help_text="Per-turn latency of the voice engine, stored when the call ends: null while it is active and "
        "for calls without an answered caller turn.",
    )
    analysis = CallAnalysisSchema(
        allow_null=True,
        help_text="Post-call analysis by the agent's analysisPlan: null while the call is active, pending from its "
        "end until it ran (it never delays the end of the call).",
    )
    costs = CostLineSchema(
        many=True,
        help_text="The cost ledger, one line per product, provider, model and unit: written when the call ends "
        "(empty while it is open), with the analysis' and the stored recording's lines added when they are done.",
    )
    cost = CallCostSchema()
    recordingUrl = serializers.CharField(
        allow_null=True,
        help_text="The call's recording (Ogg/Opus, stereo: caller left, agent right) at a signed URL of this "
        "service that needs no API key and expires after RECORDING_URL_TTL_SECONDS (1 hour by default; read "
        "the call again for a fresh one); absolute on PUBLIC_BASE_URL (else REALTIME_WS_URL's host, else the request's). Set from the end of "
        "the call; in the seconds the recording takes to be stored it answers 404 RECORDING_NOT_READY with "
        "Retry-After. Null when the call has no recording.",
    )


class AgentLogSchema(serializers.Serializer):
    id = serializers.UUIDField()
    accountId = serializers.UUIDField()
    agentId = serializers.UUIDField()
    sessionId = serializers.CharField()
    timestamp = serializers.DateTimeField()
    severity = serializers.ChoiceField(choices=Severity.choices)
    content = serializers.JSONField()


class PaginationSchema(serializers.Serializer):
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    hasNextPage = serializers.BooleanField()
    hasPreviousPage = serializers.BooleanField()


class AgentLogPageSchema(serializers.Serializer):
    logs = AgentLogSchema(many=True)
    pagination = PaginationSchema()


class OutboundCallRequestSerializer(serializers.Serializer[Any]):
    """The body of POST /calls (described here; checked by telephony.outbound.services.outbound_call_request)."""

    agentId = serializers.UUIDField(help_text="The active agent that talks on the call.")
    phoneNumberId = serializers.UUIDField(help_text="A number claimed by the organization, the call's caller id.")
    to = serializers.CharField(help_text="The number to call, in E.164 format, for example +14155550123.")
    variables = serializers.DictField(
        child=serializers.CharField(),
        required=False,
        help_text="Per-call variables ({{name}} placeholders in the agent's prompt and greeting): string values.",
    )
    metadata = serializers.JSONField(required=False, help_text="Free JSON (at most 16 KB), stored and echoed.")
