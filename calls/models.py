"""Call history, usage billing and agent runtime logs.

Usage is stored in whole seconds (billable, included, overage are multiples of the 10-second billing
interval), so `included + overage = billable` holds exactly; the API renders them as minutes.
"""

import uuid

from django.db import models

from accounts.models import Organization
from agents.models import Agent


class CallChannel(models.TextChoices):
    WEB = "web"
    PHONE = "phone"


class CallStatus(models.TextChoices):
    ACTIVE = "active"
    COMPLETED = "completed"
    FAILED = "failed"


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
    # Written by the process holding the live call (kit/liveness.py); stale = that process died.
    heartbeat_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The call's recording in the recordings storage (calls/recordings.py); empty: none.
    recording_key = models.CharField(max_length=255, blank=True, default="", editable=False)
    recording_saved_at = models.DateTimeField(null=True, blank=True, editable=False)

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
            # The recordings retention purge.
            models.Index(fields=["recording_saved_at"], name="call_recording_saved"),
        ]

    def __str__(self) -> str:
        return f"{self.agent_name} {self.started_at:%Y-%m-%d %H:%M} ({self.status})"

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

    class Meta:
        ordering = ["occurred_at", "sequence"]
        indexes = [models.Index(fields=["call", "occurred_at", "sequence"], name="callmessage_call_order")]

    def __str__(self) -> str:
        return f"{self.role} at {self.occurred_at:%H:%M:%S}"


class ToolInvocation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    call = models.ForeignKey(Call, on_delete=models.CASCADE, related_name="tool_invocations")
    # The custom tool's id (not a foreign key: the log survives the tool); null for native and MCP tools.
    agent_tool_id = models.UUIDField(null=True, blank=True)
    tool_name = models.CharField(max_length=128)
    request = models.JSONField(default=dict)
    response = models.TextField(blank=True, default="")
    status = models.CharField(max_length=8, choices=ToolInvocationStatus.choices)
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
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
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
