"""Call history, usage billing and agent runtime logs.

Usage is stored in whole seconds (billable, included, overage are multiples of the 10-second billing
interval), so `included + overage = billable` holds exactly; the API renders them as minutes.
"""

import uuid

from django.db import models

from accounts.models import Organization
from agents.models import Agent
from kit.crypto import EncryptedTextField


class CallChannel(models.TextChoices):
    WEB = "web"
    PHONE = "phone"


class CallModality(models.TextChoices):
    AUDIO = "audio"  # spoken: browser audio or a phone call
    TEXT = "text"  # typed: a realtime session opened with modality text (no audio), and agent test runs


class CallDirection(models.TextChoices):
    INBOUND = "inbound"  # phone calls to a number, and browser sessions
    OUTBOUND = "outbound"  # placed by the service (POST /calls, call batches)


class CallStatus(models.TextChoices):
    QUEUED = "queued"  # an outbound call waiting to be placed (outbound concurrency, batch window)
    RINGING = "ringing"  # an outbound call placed at the carrier, not answered yet
    ACTIVE = "active"
    COMPLETED = "completed"
    FAILED = "failed"
    NO_ANSWER = "no-answer"  # outbound: nobody answered
    BUSY = "busy"  # outbound: the line was busy
    CANCELED = "canceled"  # outbound: canceled before it was answered


# Statuses of a call that has not ended yet.
OPEN_STATUSES = (CallStatus.QUEUED, CallStatus.RINGING, CallStatus.ACTIVE)


class EndedReason(models.TextChoices):
    """Why a call ended: one closed list, every exit of a call maps to exactly one (docs/guides/voice-sessions.md,
    "Why a call ended"). Null while the call is active."""

    CALLER_HUNG_UP = "caller-hung-up"  # the caller (or the client) ended it: browser stop/close, phone hang-up
    AGENT_ENDED_CALL = "agent-ended-call"  # the agent said goodbye and ended it (the end_call tool)
    TRANSFERRED = "transferred"  # handed to a person (transfer_call)
    SILENCE_TIMEOUT = "silence-timeout"  # no caller audio for REALTIME_INPUT_IDLE_SECONDS
    MAX_DURATION_REACHED = "max-duration-reached"  # the agent's maxDurationSeconds was reached
    ASSISTANT_REQUEST_FAILED = "assistant-request-failed"  # the dynamic prompt could not be fetched
    PROVIDER_ERROR = "provider-error"  # a speech/model/telephony provider failed
    CONNECTION_LOST = "connection-lost"  # the socket dropped without a close (a network failure)
    NO_ANSWER = "no-answer"  # the carrier reports no answer
    BUSY = "busy"  # the carrier reports busy
    CANCELED = "canceled"  # an outbound call canceled before it was answered (API hang-up, batch canceled)
    VOICEMAIL = "voicemail"  # an answering machine answered (the agent left its message or hung up)
    SERVER_SHUTDOWN = "server-shutdown"  # the server was stopped during the call
    STALE = "stale"  # the process holding the call died; closed by the stale-call sweep
    ERROR = "error"  # an internal error of the service


# The sentence a call's `endedMessage` gives for each reason when nothing more precise was stored
# (Call.ended_message: the carrier's refusal, the provider that failed).
ENDED_MESSAGES: dict[str, str] = {
    EndedReason.CALLER_HUNG_UP: "The caller ended the call.",
    EndedReason.AGENT_ENDED_CALL: "The agent ended the call.",
    EndedReason.TRANSFERRED: "The call was transferred to a person.",
    EndedReason.SILENCE_TIMEOUT: "The caller was silent for too long.",
    EndedReason.MAX_DURATION_REACHED: "The call reached the agent's longest allowed duration.",
    EndedReason.ASSISTANT_REQUEST_FAILED: "The agent's prompt could not be fetched from its server.",
    EndedReason.PROVIDER_ERROR: "A speech, model or telephony provider failed.",
    EndedReason.CONNECTION_LOST: "The connection to the caller was lost.",
    EndedReason.NO_ANSWER: "Nobody answered the call.",
    EndedReason.BUSY: "The number called was busy.",
    EndedReason.CANCELED: "The call was canceled before it was answered.",
    EndedReason.VOICEMAIL: "An answering machine answered the call.",
    EndedReason.SERVER_SHUTDOWN: "The server was stopped during the call.",
    EndedReason.STALE: "The server holding the call stopped; the call was closed later.",
    EndedReason.ERROR: "The service failed during the call.",
}


def ended_message(reason: str | None, stored: str) -> str | None:
    """Why a call ended, in a sentence (its endedMessage): what was stored (the carrier's or provider's
    answer), else the reason's own sentence; None while the call has not ended."""
    if not reason:
        return None
    return stored or ENDED_MESSAGES.get(reason, "")


class UsageClassification(models.TextChoices):
    INCLUDED = "included"
    OVERAGE = "overage"
    SPLIT = "split"
    TRIAL = "trial"
    UNALLOCATED = "unallocated"


class MessageRole(models.TextChoices):
    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


class ToolInvocationStatus(models.TextChoices):
    SUCCESS = "success"
    ERROR = "error"
    TIMEOUT = "timeout"
    # A request whose result was no longer needed (the caller interrupted, went on speaking, or hung up).
    CANCELLED = "cancelled"


class AnalysisStatus(models.TextChoices):
    PENDING = "pending"
    COMPLETED = "completed"
    SKIPPED = "skipped"
    FAILED = "failed"


class Severity(models.TextChoices):
    DEBUG = "debug"
    INFO = "info"
    WARN = "warn"
    ERROR = "error"


class Call(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="calls")
    # The history outlives the agent: a deleted agent leaves its calls with agent = NULL.
    agent = models.ForeignKey(Agent, on_delete=models.SET_NULL, null=True, blank=True, related_name="calls")
    agent_name = models.CharField(max_length=200, help_text="The agent's name when the call started.")
    channel = models.CharField(max_length=8, choices=CallChannel.choices)
    from_number = models.CharField(max_length=64)
    to_number = models.CharField(max_length=64)
    # The carrier's id of a phone call (Twilio's CallSid): status callbacks and support find it by this.
    provider_call_id = models.CharField(max_length=64, null=True, blank=True, db_index=True)
    status = models.CharField(max_length=10, choices=CallStatus.choices, default=CallStatus.ACTIVE)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    duration_seconds = models.PositiveIntegerField(default=0)
    tool_invocation_count = models.PositiveIntegerField(default=0)
    summary = models.TextField(blank=True, default="")
    billable_seconds = models.PositiveIntegerField(default=0)
    included_seconds = models.PositiveIntegerField(default=0)
    overage_seconds = models.PositiveIntegerField(default=0)
    usage_classification = models.CharField(max_length=12, choices=UsageClassification.choices, blank=True)
    # The start of the billing period the call was allocated to (null: active or unallocated).
    billing_period_start = models.DateTimeField(null=True, blank=True)
    # The engine's per-turn latency, p50/p95 of each stage in ms (calls.latency; null: no answered turn).
    latency = models.JSONField(null=True, blank=True)
    # Why it ended (EndedReason); null while active.
    ended_reason = models.CharField(max_length=32, choices=EndedReason.choices, null=True, blank=True)
    # Why it ended in a sentence, when there is more to say than the reason's own (ENDED_MESSAGES): what the
    # carrier or provider answered. Redacted like the transcript.
    ended_message = models.TextField(blank=True, default="")
    # Written by the process holding the live call (kit/liveness.py); stale = that process died.
    heartbeat_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Post-call analysis (realtime/analysis/): pending from the end of the call until stored by
    # call_analysis_save; "" for an active call (and calls that ended before analyses existed).
    analysis_status = models.CharField(max_length=10, choices=AnalysisStatus.choices, blank=True, default="")
    # summary, structuredData, successEvaluation, parts, model, usage, error (the API's `analysis`).
    analysis = models.JSONField(null=True, blank=True)
    # When a worker took the pending analysis (a lease: ANALYSIS_LEASE_SECONDS later another may take it).
    analysis_claimed_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The call's recording in the recordings storage (calls/recordings.py); empty: none.
    recording_key = models.CharField(max_length=255, blank=True, default="", editable=False)
    recording_saved_at = models.DateTimeField(null=True, blank=True, editable=False)
    # inbound (phone calls to a number, browser sessions) or outbound (placed by the service).
    direction = models.CharField(max_length=8, choices=CallDirection.choices, default=CallDirection.INBOUND)
    # Per-call variables ({{name}} placeholders in the prompt and greeting): string values only.
    variables = models.JSONField(default=dict, blank=True)
    # Free JSON of the API client's (at most 16 KB): stored and echoed, never shown to the model.
    metadata = models.JSONField(null=True, blank=True)
    # Outbound: when it was queued (POST /calls or its batch), and the answering-machine verdict.
    queued_at = models.DateTimeField(null=True, blank=True)
    answered_by = models.CharField(max_length=24, blank=True, default="")
    # audio (spoken) or text (a typed session: realtime sessions with modality text, agent test runs).
    modality = models.CharField(max_length=5, choices=CallModality.choices, default=CallModality.AUDIO)
    # The agent's flow as it ran (calls.services.call_flow_update): {"path": [node ids, in order],
    # "collected": {name: value}}, the collected values redacted like the transcript; null: the call ran no flow.
    flow = models.JSONField(null=True, blank=True)
    # The latest state of the call's last transfer to a person (calls.services.call_transfer_update):
    # {"mode": TransferMode, "destination": E.164, "status": TransferStatus, "at": iso time of that status};
    # null: the call was never transferred.
    transfer = models.JSONField(null=True, blank=True)
    # The carrier of a phone call (twilio, telnyx, sip); empty for browser and typed sessions. The ledger's
    # telephony lines name it (calls/costs/ledger.py).
    carrier = models.CharField(max_length=16, blank=True, default="")
    # The cost ledger (docs/costs.md): [{product, provider, model, quantity, unit, unitPrice, amount}], written
    # when the call ends (and extended by its analysis and its stored recording), priced by the price book in
    # force when the call started; `cost_total` their sum in `cost_currency` (null while the call is open).
    costs = models.JSONField(default=list, blank=True)
    cost_total = models.DecimalField(max_digits=18, decimal_places=6, null=True, blank=True)
    cost_currency = models.CharField(max_length=3, blank=True, default="")

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [
            # GET /calls (newest first, optionally by agent) and callsToday / successRate.
            models.Index(fields=["organization", "-started_at", "-id"], name="call_org_started"),
            models.Index(fields=["agent", "-started_at", "-id"], name="call_agent_started"),
            # Allowance already used in a period, summed under the organization lock.
            models.Index(fields=["organization", "billing_period_start"], name="call_org_period"),
            # The stale-call sweep.
            models.Index(fields=["status", "started_at"], name="call_status_started"),
            # Pending analyses to resume (the upkeep sweep).
            models.Index(fields=["analysis_status"], name="call_analysis_status"),
            # The recordings retention purge.
            models.Index(fields=["recording_saved_at"], name="call_recording_saved"),
        ]

    def __str__(self) -> str:
        return f"{self.agent_name} {self.started_at:%Y-%m-%d %H:%M} ({self.status})"

    @property
    def ended_message_text(self) -> str | None:
        """The call's endedMessage (`ended_message`)."""
        return ended_message(self.ended_reason, self.ended_message)

    @property
    def billable_minutes(self) -> float:
        return self.billable_seconds / 60

    @property
    def included_minutes(self) -> float:
        return self.included_seconds / 60

    @property
    def overage_minutes(self) -> float:
        return self.overage_seconds / 60


class CallMessage(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    call = models.ForeignKey(Call, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=10, choices=MessageRole.choices)
    content = models.TextField()
    occurred_at = models.DateTimeField()
    # Strictly increasing within the process that holds the call: keeps the order of messages that
    # share an occurredAt.
    sequence = models.BigIntegerField()
    # The agent that spoke an assistant (or tool) message: after a handoff (CallHandoff) not the call's
    # agent. Not a foreign key: the record keeps the id after the agent is deleted (as ToolInvocation's
    # agent_tool_id), so a deleted second agent's words are never taken for the first's. Null for the
    # caller's and system messages, and for messages stored before handoffs existed (the API shows the
    # call's agentId for an assistant message without one).
    agent_id = models.UUIDField(null=True, blank=True)

    class Meta:
        ordering = ["occurred_at", "sequence"]
        indexes = [models.Index(fields=["call", "occurred_at", "sequence"], name="callmessage_call_order")]

    def __str__(self) -> str:
        return f"{self.role} at {self.occurred_at:%H:%M:%S}"


class CallHandoff(models.Model):
    """One handoff of a live call from one agent to another (the call goes on, one record; its `agent` stays
    the agent that answered it, which billing and the agent list's figures count). Written with its
    `call.handoff` event by calls.services.call_handoff_add."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    call = models.ForeignKey(Call, on_delete=models.CASCADE, related_name="handoffs")
    # Agents' ids, not foreign keys: the record keeps them after an agent is deleted (as CallMessage.agent_id).
    from_agent_id = models.UUIDField(null=True, blank=True)
    to_agent_id = models.UUIDField(null=True, blank=True)
    at = models.DateTimeField()
    # Why, in the brain's words (at most HANDOFF_REASON_CHARS characters), redacted like the transcript.
    reason = models.TextField(blank=True, default="")
    # Strictly increasing within the process that holds the call: keeps the order of handoffs that share an `at`.
    sequence = models.BigIntegerField()

    class Meta:
        ordering = ["at", "sequence"]
        indexes = [models.Index(fields=["call", "at", "sequence"], name="callhandoff_call_order")]

    def __str__(self) -> str:
        return f"handoff at {self.at:%H:%M:%S}"


# The longest handoff reason stored (a longer one is cut).
HANDOFF_REASON_CHARS = 500

# What a call's `flow` keeps (calls.services.call_flow_update): the last FLOW_PATH_ENTRIES node ids of its path
# (each at most FLOW_NODE_ID_CHARS characters), and each collected text value cut to FLOW_VALUE_CHARS characters.
FLOW_PATH_ENTRIES = 500
FLOW_NODE_ID_CHARS = 64
FLOW_VALUE_CHARS = 1000


class TransferMode(models.TextChoices):
    COLD = "cold"  # the carrier is asked to connect the caller to the destination; the agent leaves at once
    WARM = "warm"  # the caller waits while the person is called and briefed; joined once the person accepts


class TransferStatus(models.TextChoices):
    RINGING = "ringing"  # a warm transfer's second leg is being called (the person's phone rings, the briefing)
    ACCEPTED = "accepted"  # cold: the carrier took the request; warm: the person pressed 1 and was joined
    DECLINED = "declined"  # warm: the person refused the call
    NO_ANSWER = "no-answer"  # warm: the person did not answer within the ring timeout
    FAILED = "failed"  # cold: the carrier refused the request; warm: the second leg could not be placed


# The statuses each transfer mode goes through (a cold transfer is asked of the carrier once: taken or refused).
TRANSFER_STATUSES: dict[str, frozenset[str]] = {
    TransferMode.COLD: frozenset({TransferStatus.ACCEPTED, TransferStatus.FAILED}),
    TransferMode.WARM: frozenset(TransferStatus.values),
}


class ToolInvocation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    call = models.ForeignKey(Call, on_delete=models.CASCADE, related_name="tool_invocations")
    # The custom tool's id (not a foreign key: the log survives the tool); null for native and MCP tools.
    agent_tool_id = models.UUIDField(null=True, blank=True)
    tool_name = models.CharField(max_length=128)
    request = models.JSONField(default=dict)
    response = models.TextField(blank=True, default="")
    status = models.CharField(max_length=10, choices=ToolInvocationStatus.choices)
    duration_ms = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField()
    sequence = models.BigIntegerField()

    class Meta:
        ordering = ["created_at", "sequence"]
        indexes = [models.Index(fields=["call", "created_at", "sequence"], name="toolinv_call_order")]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.status})"


class LlmUsage(models.Model):
    """One row per model turn."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    call = models.ForeignKey(Call, on_delete=models.CASCADE, related_name="llm_usage")
    provider = models.CharField(max_length=64)
    model = models.CharField(max_length=128)
    # What the model served: llm (the brain) or speech_to_speech (the provider that hears and speaks).
    product = models.CharField(max_length=20, default="llm")
    input_tokens = models.PositiveIntegerField(default=0)  # all of them, as reported (cached and audio included)
    output_tokens = models.PositiveIntegerField(default=0)  # all of them (audio included)
    cached_input_tokens = models.PositiveIntegerField(default=0)
    input_audio_tokens = models.PositiveIntegerField(default=0)
    output_audio_tokens = models.PositiveIntegerField(default=0)
    input_audio_seconds = models.FloatField(default=0.0)
    output_audio_seconds = models.FloatField(default=0.0)
    created_at = models.DateTimeField()
    sequence = models.BigIntegerField()

    class Meta:
        ordering = ["created_at", "sequence"]
        verbose_name = "LLM usage"
        verbose_name_plural = "LLM usage"
        indexes = [models.Index(fields=["call", "created_at", "sequence"], name="llmusage_call_order")]

    def __str__(self) -> str:
        return f"{self.provider}/{self.model}"


# --- costs: price books and budgets (calls/costs/, docs/costs.md) ----------------------------------------------


class CostProduct(models.TextChoices):
    TELEPHONY = "telephony"  # a carrier's call legs, per second or minute
    ASR = "asr"  # the recognizer, per second or minute of audio heard
    TTS = "tts"  # the voice, per character synthesised
    LLM = "llm"  # the brain's language model, per token
    SPEECH_TO_SPEECH = "speech_to_speech"  # a provider that hears and speaks, per text and audio token
    ANALYSIS = "analysis"  # the post-call analysis' language model, per token
    RECORDING_STORAGE = "recording_storage"  # a stored recording, per gigabyte-month


class CostUnit(models.TextChoices):  # units of measure: the *_TOKEN ones are a model's tokens, not secrets
    MINUTE = "minute"
    SECOND = "second"
    CHARACTER = "character"
    INPUT_TOKEN = "input_token"  # noqa: S105
    CACHED_INPUT_TOKEN = "cached_input_token"  # noqa: S105
    OUTPUT_TOKEN = "output_token"  # noqa: S105
    AUDIO_INPUT_TOKEN = "audio_input_token"  # noqa: S105
    AUDIO_OUTPUT_TOKEN = "audio_output_token"  # noqa: S105
    GB_MONTH = "gb_month"


class PriceBook(models.Model):
    """One organization's prices from `effective_from` on (until the next book takes effect). A call is
    priced by the book in force when it started; with none, by the service's default (PRICE_BOOK)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="price_books")
    currency = models.CharField(max_length=3)
    # [{product, provider, model, unit, unitPrice}], checked and normalized (calls/costs/pricing.py).
    items = models.JSONField(default=list)
    effective_from = models.DateTimeField()
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-effective_from", "-created_at"]
        indexes = [models.Index(fields=["organization", "-effective_from"], name="pricebook_org_from")]

    def __str__(self) -> str:
        return f"{self.currency} from {self.effective_from:%Y-%m-%d %H:%M}"


class BudgetPeriod(models.TextChoices):
    DAY = "day"  # a UTC day
    MONTH = "month"  # a UTC calendar month


class BudgetAction(models.TextChoices):
    ALERT = "alert"  # budget.threshold events only
    BLOCK = "block"  # and, once spent, new sessions and outbound calls in scope are refused (402)


class Budget(models.Model):
    """A spending limit over the calls of an agent (`agent`), of a variable's value (`variable_name` =
    `variable_value`) or of the whole organization (neither), per UTC day or month."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="budgets")
    name = models.CharField(max_length=200, blank=True, default="")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, null=True, blank=True, related_name="budgets")
    variable_name = models.CharField(max_length=64, blank=True, default="")
    variable_value = models.CharField(max_length=500, blank=True, default="")
    period = models.CharField(max_length=5, choices=BudgetPeriod.choices)
    limit = models.DecimalField(max_digits=18, decimal_places=6)
    action = models.CharField(max_length=5, choices=BudgetAction.choices)
    # The highest threshold (80, 100) already announced by a budget.threshold event, and the start of the
    # period it was announced in: each threshold is announced once per period.
    alerted_percent = models.PositiveSmallIntegerField(default=0)
    alerted_period_start = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["organization", "-created_at"], name="budget_org_created")]

    def __str__(self) -> str:
        return self.name or f"{self.limit} per {self.period}"


class AgentLog(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="agent_logs")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="logs")
    session_id = models.CharField(max_length=6)
    timestamp = models.DateTimeField()
    severity = models.CharField(max_length=5, choices=Severity.choices)
    content = models.JSONField(default=dict)
    sequence = models.BigIntegerField()

    class Meta:
        ordering = ["-timestamp", "-sequence"]
        indexes = [
            models.Index(fields=["agent", "-timestamp", "-sequence"], name="agentlog_agent_time"),
            models.Index(fields=["agent", "session_id", "-timestamp"], name="agentlog_agent_session"),
            models.Index(fields=["timestamp"], name="agentlog_time"),  # the retention purge
        ]

    def __str__(self) -> str:
        return f"{self.session_id} {self.severity} {self.timestamp:%Y-%m-%d %H:%M:%S}"


# --- call events: organization webhook endpoints, the outbox, deliveries (calls/webhooks/events.py) ---------


class EventType(models.TextChoices):
    CALL_STARTED = "call.started"
    CALL_HANDOFF = "call.handoff"
    CALL_TRANSFER_STARTED = "call.transfer.started"
    CALL_TRANSFER_ENDED = "call.transfer.ended"
    CALL_ENDED = "call.ended"
    CALL_ANALYZED = "call.analyzed"
    BUDGET_THRESHOLD = "budget.threshold"


# The order in which one call's events reach one target: call.started, its call.handoff,
# call.transfer.started and call.transfer.ended events (they share a rank: they go in the order they were
# recorded), call.ended, then call.analyzed (calls/webhooks/events.py). Deliveries recorded before
# call.handoff existed keep call.ended at 1 and call.analyzed at 2: still in order, since a handoff or a
# transfer is recorded only while the call is active.
EVENT_RANK = {
    EventType.CALL_STARTED: 0,
    EventType.CALL_HANDOFF: 1,
    EventType.CALL_TRANSFER_STARTED: 1,
    EventType.CALL_TRANSFER_ENDED: 1,
    EventType.CALL_ENDED: 2,
    EventType.CALL_ANALYZED: 3,
    EventType.BUDGET_THRESHOLD: 3,
}
# The longest event type's name (CallEvent and WebhookDelivery keep it).
EVENT_TYPE_CHARS = 32


class WebhookEndpoint(models.Model):
    """An organization's endpoint for call events (`/public/v1/webhooks`)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="webhook_endpoints")
    url = models.CharField(max_length=2048)
    events = models.JSONField(default=list, help_text="The event types it receives.")
    # Only events of this agent's calls (null: every call of the organization).
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, null=True, blank=True, related_name="webhook_endpoints")
    enabled = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=300, blank=True, default="")
    secret = EncryptedTextField()
    # The secret before the last rotation: receivers may still verify with it until previous_secret_expires_at.
    previous_secret = EncryptedTextField(null=True, blank=True)
    previous_secret_expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["organization", "created_at"], name="webhook_org_created")]

    def __str__(self) -> str:
        return self.url


class CallEvent(models.Model):
    """The outbox: one row per event, its body serialized once when the call changed (in the same
    transaction), so every delivery and every retry sends exactly these bytes under this id."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="call_events")
    call = models.ForeignKey(Call, on_delete=models.CASCADE, related_name="events")
    event_type = models.CharField(max_length=EVENT_TYPE_CHARS, choices=EventType.choices)
    created_at = models.DateTimeField()
    body = models.TextField(help_text="The signed JSON body, exactly as sent.")

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["call", "created_at"], name="callevent_call_created")]

    def __str__(self) -> str:
        return f"{self.event_type} {self.id}"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"  # by staff (the dashboard): never sent


class WebhookDelivery(models.Model):
    """One event to one target (an organization endpoint, or the agent's serverUrl), with its attempts."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="webhook_deliveries")
    event = models.ForeignKey(CallEvent, on_delete=models.CASCADE, related_name="deliveries")
    call = models.ForeignKey(Call, on_delete=models.CASCADE, related_name="webhook_deliveries")
    event_type = models.CharField(max_length=EVENT_TYPE_CHARS, choices=EventType.choices)
    rank = models.PositiveSmallIntegerField(help_text="The event's place among the call's events (EVENT_RANK).")
    # The target: an organization endpoint, or (endpoint null) the serverUrl of the agent.
    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, null=True, blank=True, related_name="deliveries"
    )
    agent = models.ForeignKey(Agent, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    target_key = models.CharField(max_length=48, help_text="endpoint:<id> or agent:<id>: one target's queue.")
    url = models.CharField(max_length=2048)
    status = models.CharField(max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=8)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # Set while a worker sends it (another worker leaves it alone until then).
    claimed_until = models.DateTimeField(null=True, blank=True, editable=False)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "webhook deliveries"
        indexes = [
            models.Index(fields=["status", "next_attempt_at"], name="delivery_due"),
            models.Index(fields=["call", "target_key", "rank"], name="delivery_call_target"),
            models.Index(fields=["organization", "-created_at", "-id"], name="delivery_org_created"),
            models.Index(fields=["endpoint", "-created_at"], name="delivery_endpoint_created"),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} to {self.url} ({self.status})"


class WebhookAttempt(models.Model):
    """One HTTP attempt of a delivery."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_log")
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField(default=0)
    status_code = models.PositiveIntegerField(null=True, blank=True)
    succeeded = models.BooleanField(default=False)
    error = models.CharField(max_length=500, blank=True, default="")
    response_snippet = models.CharField(max_length=500, blank=True, default="")
    next_attempt_at = models.DateTimeField(null=True, blank=True, help_text="When it is retried (null: not).")

    class Meta:
        ordering = ["delivery", "number"]
        constraints = [models.UniqueConstraint(fields=["delivery", "number"], name="attempt_unique_number")]

    def __str__(self) -> str:
        return f"attempt {self.number} ({self.status_code or self.error})"
