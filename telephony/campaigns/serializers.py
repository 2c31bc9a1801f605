"""Call batches on the wire: the request's fields, the query, and the batch's representation."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from kit.fields import JsonObjectField, StrictCharField, StrictIntegerField, StrictUUIDField, iso
from telephony.campaigns.services import (
    DAYS,
    MAX_ATTEMPTS,
    MAX_BACKOFF_MINUTES,
    MAX_CONCURRENCY,
    MAX_RECIPIENTS,
    RETRYABLE,
)
from telephony.models import CallBatch, CallBatchRecipient, CallBatchStatus, RecipientOutcome, RecipientState


class RecipientSchema(serializers.Serializer):
    to = serializers.CharField(help_text="The number to call, E.164 (for example +14155550123).")
    variables = serializers.DictField(
        child=serializers.CharField(),
        required=False,
        help_text="This recipient's call variables ({{name}} placeholders), string values; at most 50.",
    )
    metadata = serializers.JSONField(required=False, help_text="Free JSON (at most 16 KB), stored on the call.")


class WindowSchema(serializers.Serializer):
    days = serializers.ListField(
        child=serializers.ChoiceField(choices=DAYS), required=False, help_text="Days calls may be placed (default all)."
    )
    start = serializers.CharField(help_text='From this time of day, "HH:MM" (24-hour).')
    end = serializers.CharField(help_text='Until this time of day, "HH:MM", after start.')
    timeZone = serializers.CharField(
        required=False, help_text="IANA time zone of start and end (default: the agent's timeZone)."
    )


class RetrySchema(serializers.Serializer):
    maxAttempts = serializers.IntegerField(
        min_value=1, max_value=MAX_ATTEMPTS, required=False, help_text="Attempts in all, 1 to 5 (default 1: no retry)."
    )
    backoffMinutes = serializers.IntegerField(
        min_value=0, max_value=MAX_BACKOFF_MINUTES, required=False, help_text="Wait before a retry (default 10)."
    )
    retryOn = serializers.ListField(
        child=serializers.ChoiceField(choices=RETRYABLE),
        required=False,
        help_text="Outcomes that are retried (default no-answer and busy).",
    )


@extend_schema_field(RecipientSchema(many=True))
class RecipientsField(serializers.ListField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=JsonObjectField(), min_length=1, max_length=MAX_RECIPIENTS, **kwargs)

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, list) and len(data) > MAX_RECIPIENTS:  # before DRF's own, generic message
            raise serializers.ValidationError(f"At most {MAX_RECIPIENTS:,} recipients per batch, not {len(data):,}.")
        return super().to_internal_value(data)


@extend_schema_field(WindowSchema)
class WindowField(JsonObjectField):
    pass


@extend_schema_field(RetrySchema)
class RetryField(JsonObjectField):
    pass


class BatchCreateSerializer(serializers.Serializer):
    name = StrictCharField(max_length=200, help_text="A name of yours for the batch.")
    agentId = StrictUUIDField(help_text="The agent that talks (active, of your organization).")
    phoneNumberId = StrictUUIDField(help_text="The number calls are placed from (claimed by your organization).")
    recipients = RecipientsField(help_text="Who to call, 1 to 10,000, each number once.")
    startAt = serializers.DateTimeField(required=False, allow_null=True, help_text="No call before this time.")
    window = WindowField(required=False, allow_null=True, help_text="When calls may be placed (default any time).")
    concurrency = StrictIntegerField(
        required=False,
        min_value=1,
        max_value=MAX_CONCURRENCY,
        help_text="The batch's calls queued, ringing or live at once (default 1; at most the plan's outbound calls).",
    )
    retry = RetryField(required=False, allow_null=True, help_text="Which outcomes are tried again, how often.")


class BatchCsvSerializer(serializers.Serializer):
    """The multipart form: the same fields as text, recipients as a CSV `file`."""

    name = StrictCharField(max_length=200)
    agentId = serializers.UUIDField()
    phoneNumberId = serializers.UUIDField()
    file = serializers.FileField(
        help_text="UTF-8 CSV: a header row with `to` and any other columns (each recipient's variables), then one "
        "row per recipient."
    )
    startAt = serializers.DateTimeField(required=False)
    concurrency = serializers.IntegerField(required=False, min_value=1, max_value=MAX_CONCURRENCY)
    window = serializers.CharField(required=False, help_text="The window object as JSON text.")
    retry = serializers.CharField(required=False, help_text="The retry object as JSON text.")


class BatchListQuery(serializers.Serializer):
    status = serializers.ChoiceField(required=False, choices=CallBatchStatus.choices, help_text="Only this status.")
    limit = serializers.IntegerField(
        required=False, default=25, min_value=1, max_value=100, help_text="How many batches, 1 to 100."
    )
    offset = serializers.IntegerField(
        required=False, default=0, min_value=0, max_value=1_000_000, help_text="How many batches to skip."
    )


class BatchCallsQuery(serializers.Serializer):
    limit = serializers.IntegerField(
        required=False, default=25, min_value=1, max_value=100, help_text="How many calls, 1 to 100."
    )
    offset = serializers.IntegerField(
        required=False, default=0, min_value=0, max_value=1_000_000, help_text="How many calls to skip."
    )


def batch_item(batch: CallBatch, counts: dict[str, int]) -> dict[str, Any]:
    return {
        "id": str(batch.id),
        "name": batch.name,
        "agentId": str(batch.agent_id),
        "phoneNumberId": str(batch.phone_number_id),
        "status": batch.status,
        "startAt": iso(batch.start_at),
        "window": batch.window,
        "concurrency": batch.concurrency,
        "retry": batch.retry,
        "counts": counts,
        "createdAt": iso(batch.created_at),
        "completedAt": iso(batch.completed_at),
    }


class CountsSchema(serializers.Serializer):
    total = serializers.IntegerField(help_text="Recipients in the batch.")
    done = serializers.IntegerField(help_text="Recipients with a final outcome (the sum of the outcomes below).")
    pending = serializers.IntegerField(help_text="Waiting for their first call or a retry.")
    calling = serializers.IntegerField(help_text="Their call is queued, ringing or live.")
    completed = serializers.IntegerField(help_text="Outcome: answered by a person, the conversation ended.")
    voicemail = serializers.IntegerField(help_text="Outcome: an answering machine answered.")
    noAnswer = serializers.IntegerField(help_text="Outcome: no answer (after every attempt).")
    busy = serializers.IntegerField(help_text="Outcome: busy (after every attempt).")
    failed = serializers.IntegerField(help_text="Outcome: the call failed.")
    canceled = serializers.IntegerField(help_text="Outcome: not called (or its call canceled): the batch was canceled.")


class BatchSchema(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    agentId = serializers.UUIDField()
    phoneNumberId = serializers.UUIDField()
    status = serializers.ChoiceField(
        choices=CallBatchStatus.choices,
        help_text="scheduled (no call placed yet), running, paused (nothing new is placed), completed (every "
        "recipient has its outcome), canceled.",
    )
    startAt = serializers.DateTimeField(allow_null=True)
    window = WindowSchema(allow_null=True, help_text="Normalized: every field present.")
    concurrency = serializers.IntegerField()
    retry = RetrySchema(help_text="Normalized: every field present.")
    counts = CountsSchema()
    createdAt = serializers.DateTimeField()
    completedAt = serializers.DateTimeField(allow_null=True, help_text="When the last recipient got its outcome.")


class RecipientListQuery(BatchCallsQuery):
    state = serializers.ChoiceField(required=False, choices=RecipientState.choices, help_text="Only this state.")
    outcome = serializers.ChoiceField(
        required=False, choices=RecipientOutcome.choices, help_text="Only this outcome (recipients done)."
    )


def recipient_item(recipient: CallBatchRecipient) -> dict[str, Any]:
    last_call_id = getattr(recipient, "last_call_id", None)
    return {
        "id": str(recipient.id),
        "position": recipient.position,
        "to": recipient.to_number,
        "variables": recipient.variables,
        "metadata": recipient.metadata,
        "state": recipient.state,
        "outcome": recipient.outcome or None,
        "attempts": recipient.attempts,
        "nextAttemptAt": iso(recipient.next_attempt_at),
        "lastCallId": str(last_call_id) if last_call_id else None,
    }


class RecipientItemSchema(serializers.Serializer):
    id = serializers.UUIDField()
    position = serializers.IntegerField(help_text="Its place in the list, from 0.")
    to = serializers.CharField(help_text="E.164.")
    variables = serializers.DictField(child=serializers.CharField())
    metadata = serializers.JSONField(allow_null=True)
    state = serializers.ChoiceField(
        choices=RecipientState.choices,
        help_text="pending (waiting for a call or a retry), calling (a call queued, ringing or live), done.",
    )
    outcome = serializers.ChoiceField(choices=RecipientOutcome.choices, allow_null=True, help_text="Once done.")
    attempts = serializers.IntegerField(help_text="Calls placed so far.")
    nextAttemptAt = serializers.DateTimeField(allow_null=True, help_text="A retry: not before this time.")
    lastCallId = serializers.UUIDField(allow_null=True, help_text="The latest attempt's call.")
