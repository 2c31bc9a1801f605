"""Wire names of the organization webhooks and their deliveries (`/public/v1/webhooks`,
`/public/v1/webhook-deliveries`): request parsing, rendering, and the OpenAPI descriptions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from calls.models import DeliveryStatus, EventType, WebhookAttempt, WebhookDelivery, WebhookEndpoint
from kit.fields import OutboundUrlField, StrictBooleanField, StrictChoiceField, StrictUUIDField, iso

if TYPE_CHECKING:
    from calls.webhooks.events import WebhookTestOutcome

MAX_URL_LENGTH = 2048
UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"


@extend_schema_field({"type": "string", "format": "uuid", "pattern": UUID_PATTERN})
class AgentIdField(StrictUUIDField):
    """An agent's id in a body: a UUID in its hyphenated form (the pattern tells generators so)."""


@extend_schema_field(
    {
        "type": "array",
        "items": {"$ref": "#/components/schemas/EventTypeEnum"},  # the enum of the responses
        "minItems": 1,
        "maxItems": len(EventType.values),
        "uniqueItems": True,
    }
)
class EventListField(serializers.ListField):
    """A non-empty list of distinct event types."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            child=StrictChoiceField(choices=EventType.choices),
            min_length=1,
            max_length=len(EventType.values),
            help_text="The event types it receives: call.started, call.handoff, call.transfer.started, "
            "call.transfer.ended, call.ended, call.analyzed, budget.threshold (at least one).",
            **kwargs,
        )

    def to_internal_value(self, data: Any) -> list[str]:
        if not isinstance(data, list):
            self.fail("not_a_list", input_type=type(data).__name__)
        values = super().to_internal_value(data)
        if len(set(values)) != len(values):
            raise serializers.ValidationError("Each event type may appear once.")
        return [value for value in EventType.values if value in values]  # the events' own order


class WebhookCreateSerializer(serializers.Serializer):
    url = OutboundUrlField(max_length=MAX_URL_LENGTH, help_text="Where events are POSTed (http or https).")
    events = EventListField()
    agentId = AgentIdField(
        required=False, allow_null=True, help_text="Only events of this agent's calls (null: every call)."
    )
    enabled = StrictBooleanField(required=False, default=True)


class WebhookUpdateSerializer(serializers.Serializer):
    url = OutboundUrlField(max_length=MAX_URL_LENGTH, required=False)
    events = EventListField(required=False)
    agentId = AgentIdField(required=False, allow_null=True)
    enabled = StrictBooleanField(required=False, help_text="true also clears disabledReason.")


class DeliveryListQuery(serializers.Serializer):
    callId = serializers.UUIDField(required=False, help_text="Only deliveries of this call's events.")
    webhookId = serializers.UUIDField(required=False, help_text="Only deliveries to this webhook.")
    status = serializers.ChoiceField(required=False, choices=DeliveryStatus.choices, help_text="Only this status.")
    limit = serializers.IntegerField(
        required=False, default=25, min_value=1, max_value=100, help_text="How many deliveries, 1 to 100."
    )
    offset = serializers.IntegerField(
        required=False, default=0, min_value=0, max_value=1_000_000, help_text="How many deliveries to skip."
    )


def webhook_item(endpoint: WebhookEndpoint, *, secret: str | None = None) -> dict[str, Any]:
    item = {
        "id": str(endpoint.id),
        "url": endpoint.url,
        "events": list(endpoint.events),
        "agentId": str(endpoint.agent_id) if endpoint.agent_id else None,
        "enabled": endpoint.enabled,
        "disabledReason": endpoint.disabled_reason or None,
        "previousSecretExpiresAt": iso(endpoint.previous_secret_expires_at),
        "createdAt": iso(endpoint.created_at),
        "updatedAt": iso(endpoint.updated_at),
    }
    if secret is not None:
        item["secret"] = secret
    return item


def attempt_item(attempt: WebhookAttempt) -> dict[str, Any]:
    return {
        "attempt": attempt.number,
        "startedAt": iso(attempt.started_at),
        "durationMs": attempt.duration_ms,
        "statusCode": attempt.status_code,
        "succeeded": attempt.succeeded,
        "error": attempt.error or None,
        "responseSnippet": attempt.response_snippet,
        "nextAttemptAt": iso(attempt.next_attempt_at),
    }


def delivery_item(delivery: WebhookDelivery) -> dict[str, Any]:
    return {
        "id": str(delivery.id),
        "eventId": str(delivery.event_id),
        "eventType": delivery.event_type,
        "callId": str(delivery.call_id),
        "webhookId": str(delivery.endpoint_id) if delivery.endpoint_id else None,
        "target": "webhook" if delivery.endpoint_id else "serverUrl",
        "url": delivery.url,
        "status": delivery.status,
        "attempts": delivery.attempts,
        "nextAttemptAt": iso(delivery.next_attempt_at) if delivery.status == DeliveryStatus.PENDING else None,
        "lastStatusCode": delivery.last_status_code,
        "lastError": delivery.last_error or None,
        "createdAt": iso(delivery.created_at),
        "updatedAt": iso(delivery.updated_at),
        "attemptLog": [attempt_item(a) for a in delivery.attempt_log.all()],
    }


# OpenAPI descriptions of the responses (rendering is done by the functions above).
class WebhookSchema(serializers.Serializer):
    id = serializers.UUIDField()
    url = serializers.CharField()
    events = serializers.ListField(child=serializers.ChoiceField(choices=EventType.choices))
    agentId = serializers.UUIDField(allow_null=True)
    enabled = serializers.BooleanField()
    disabledReason = serializers.CharField(
        allow_null=True, help_text="Why the service disabled it (every delivery failed for 3 days); null otherwise."
    )
    previousSecretExpiresAt = serializers.DateTimeField(
        allow_null=True, help_text="Until then, after a rotation, receivers should also accept the previous secret."
    )
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()


class WebhookWithSecretSchema(WebhookSchema):
    secret = serializers.CharField(help_text="The signing secret: shown only in this answer.")


class WebhookAttemptSchema(serializers.Serializer):
    attempt = serializers.IntegerField(help_text="1 for the first attempt; the x-service-attempt header.")
    startedAt = serializers.DateTimeField()
    durationMs = serializers.IntegerField()
    statusCode = serializers.IntegerField(allow_null=True, help_text="null: no HTTP answer (see error).")
    succeeded = serializers.BooleanField()
    error = serializers.CharField(allow_null=True)
    responseSnippet = serializers.CharField(help_text="The first 500 characters of the answer's body.")
    nextAttemptAt = serializers.DateTimeField(allow_null=True, help_text="When it was retried (null: not).")


class WebhookDeliverySchema(serializers.Serializer):
    id = serializers.UUIDField()
    eventId = serializers.UUIDField(help_text="The event's id; the x-service-event-id header.")
    eventType = serializers.ChoiceField(choices=EventType.choices)
    callId = serializers.UUIDField()
    webhookId = serializers.UUIDField(allow_null=True, help_text="null: to the agent's serverUrl.")
    target = serializers.ChoiceField(choices=["webhook", "serverUrl"])
    url = serializers.CharField()
    status = serializers.ChoiceField(choices=DeliveryStatus.choices)
    attempts = serializers.IntegerField()
    nextAttemptAt = serializers.DateTimeField(allow_null=True)
    lastStatusCode = serializers.IntegerField(allow_null=True)
    lastError = serializers.CharField(allow_null=True)
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()
    attemptLog = WebhookAttemptSchema(many=True)


class WebhookTestSchema(serializers.Serializer):
    eventId = serializers.UUIDField(help_text="The test event's id; the x-service-event-id header.")
    delivered = serializers.BooleanField(help_text="The receiver answered a 2xx.")
    statusCode = serializers.IntegerField(allow_null=True, help_text="The receiver's answer; null: no HTTP answer.")
    error = serializers.CharField(allow_null=True, help_text="Why it was not delivered; null when it was.")
    durationMs = serializers.IntegerField()


def webhook_test_item(outcome: WebhookTestOutcome) -> dict[str, Any]:
    return {
        "eventId": outcome.event_id,
        "delivered": outcome.succeeded,
        "statusCode": outcome.status_code,
        "error": outcome.error or None,
        "durationMs": outcome.duration_ms,
    }


class DeletedSchema(serializers.Serializer):
    id = serializers.UUIDField()
