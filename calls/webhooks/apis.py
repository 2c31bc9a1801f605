"""Organization webhooks and call-event deliveries: thin REST views (docs/reference/webhooks.md)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from calls.webhooks import events, selectors, services
from calls.webhooks.serializers import (
    DeletedSchema,
    DeliveryListQuery,
    WebhookCreateSerializer,
    WebhookDeliverySchema,
    WebhookSchema,
    WebhookTestSchema,
    WebhookUpdateSerializer,
    WebhookWithSecretSchema,
    delivery_item,
    webhook_item,
    webhook_test_item,
)
from kit.api import PublicApiView
from kit.fields import parse

TAGS = ["Webhooks"]
INVALID = OpenApiResponse(
    description="Invalid body or ID (`issues` names the fields): a URL that is not http(s), or that the outbound "
    "guard refuses (a private, loopback or metadata address), an unknown or repeated event type"
)
NOT_FOUND = OpenApiResponse(description="Webhook not found (or another organization's)")
AGENT_NOT_FOUND = OpenApiResponse(description="agentId is not one of your agents")
WEBHOOK_OR_AGENT_NOT_FOUND = OpenApiResponse(
    description="Webhook not found (or another organization's), or agentId is not one of your agents"
)


class WebhookListApi(PublicApiView):
    @extend_schema(
        operation_id="listWebhooks",
        tags=TAGS,
        summary="List webhooks",
        description="The organization's call-event webhooks, oldest first. Secrets are never listed.",
        responses={200: WebhookSchema(many=True)},
    )
    def get(self, request: Request) -> Response:
        return Response([webhook_item(e) for e in selectors.webhook_list(organization=self.organization)])

    @extend_schema(
        operation_id="createWebhook",
        tags=TAGS,
        summary="Create a webhook",
        request=WebhookCreateSerializer,
        responses={
            201: WebhookWithSecretSchema,
            400: INVALID,
            404: AGENT_NOT_FOUND,
            409: OpenApiResponse(description="The organization has its maximum of 20 webhooks"),
        },
        description="Creates a webhook for call events and answers it with its signing `secret`, which is "
        "shown only in this answer (and after a rotation). Every event is POSTed to `url` signed with it "
        "(`x-service-signature`, docs/reference/webhooks.md).",
    )
    def post(self, request: Request) -> Response:
        data = parse(WebhookCreateSerializer, request.data)
        endpoint, secret = services.webhook_create(organization=self.organization, data=data)
        return Response(webhook_item(endpoint, secret=secret), status=201)


class WebhookDetailApi(PublicApiView):
    @extend_schema(
        operation_id="getWebhook",
        tags=TAGS,
        summary="Get a webhook",
        description="One webhook, without its secret.",
        responses={200: WebhookSchema, 400: INVALID, 404: NOT_FOUND},
    )
    def get(self, request: Request, webhook_id: str) -> Response:
        return Response(webhook_item(selectors.webhook_get(organization=self.organization, webhook_id=webhook_id)))

    @extend_schema(
        operation_id="updateWebhook",
        tags=TAGS,
        summary="Update a webhook",
        request=WebhookUpdateSerializer,
        responses={200: WebhookSchema, 400: INVALID, 404: WEBHOOK_OR_AGENT_NOT_FOUND},
        description="Changes the fields given. `enabled: true` re-enables a webhook the service disabled "
        "(and clears `disabledReason`); events recorded while it was disabled are not sent to it.",
    )
    def patch(self, request: Request, webhook_id: str) -> Response:
        data = parse(WebhookUpdateSerializer, request.data)
        endpoint = services.webhook_update(organization=self.organization, webhook_id=webhook_id, data=data)
        return Response(webhook_item(endpoint))

    @extend_schema(
        operation_id="deleteWebhook",
        tags=TAGS,
        summary="Delete a webhook",
        description="Deletes the webhook with its delivery history; events not yet delivered to it are dropped.",
        responses={200: DeletedSchema, 400: INVALID, 404: NOT_FOUND},
    )
    def delete(self, request: Request, webhook_id: str) -> Response:
        deleted = services.webhook_delete(organization=self.organization, webhook_id=webhook_id)
        return Response({"id": str(deleted)})


class WebhookRotateSecretApi(PublicApiView):
    @extend_schema(
        operation_id="rotateWebhookSecret",
        tags=TAGS,
        summary="Rotate a webhook's signing secret",
        request=None,
        responses={200: WebhookWithSecretSchema, 400: INVALID, 404: NOT_FOUND},
        description="Makes a new signing secret and answers it (shown only here). Events are signed with the new "
        "secret from now on; accept signatures made with either secret until `previousSecretExpiresAt` (24 hours).",
    )
    def post(self, request: Request, webhook_id: str) -> Response:
        endpoint, secret = services.webhook_rotate_secret(organization=self.organization, webhook_id=webhook_id)
        return Response(webhook_item(endpoint, secret=secret))


class WebhookTestApi(PublicApiView):
    @extend_schema(
        operation_id="testWebhook",
        tags=TAGS,
        summary="Send a webhook a test event",
        request=None,
        responses={200: WebhookTestSchema, 400: INVALID, 404: NOT_FOUND},
        description="Sends one `webhook.test` event now, signed and sent exactly as a call event (one attempt, "
        "no retry; also to a disabled webhook), and answers what the receiver did. Nothing is recorded.",
    )
    def post(self, request: Request, webhook_id: str) -> Response:
        endpoint = selectors.webhook_get(organization=self.organization, webhook_id=webhook_id)
        return Response(webhook_test_item(events.webhook_test_send(endpoint=endpoint)))


class DeliveryListApi(PublicApiView):
    @extend_schema(
        operation_id="listWebhookDeliveries",
        tags=TAGS,
        summary="List call-event deliveries",
        parameters=[DeliveryListQuery],
        responses={200: WebhookDeliverySchema(many=True), 400: INVALID},
        description="Deliveries of call events to your webhooks and to agents' serverUrl, newest first, each "
        "with every attempt (status, duration, error, the start of the answer). Unknown query parameters are "
        "ignored.",
    )
    def get(self, request: Request) -> Response:
        query = parse(DeliveryListQuery, request.query_params.dict())
        rows = selectors.delivery_page(
            organization=self.organization,
            limit=query["limit"],
            offset=query["offset"],
            call_id=query.get("callId"),
            webhook_id=query.get("webhookId"),
            status=query.get("status"),
        )
        return Response([delivery_item(row) for row in rows])


class DeliveryRedeliverApi(PublicApiView):
    @extend_schema(
        operation_id="redeliverWebhookDelivery",
        tags=TAGS,
        summary="Deliver an event again",
        request=None,
        responses={
            202: WebhookDeliverySchema,
            400: INVALID,
            404: OpenApiResponse(description="Delivery not found (or another organization's)"),
            409: OpenApiResponse(description="Its webhook is disabled"),
        },
        description="Sends the delivery's event again now, with the same event id and body (receivers that "
        "drop duplicates by event id drop it), and up to 8 attempts more. Answers the delivery, `pending`.",
    )
    def post(self, request: Request, delivery_id: str) -> Response:
        delivery = selectors.delivery_get(organization=self.organization, delivery_id=delivery_id)
        delivery = events.delivery_redeliver(delivery=delivery)
        return Response(delivery_item(delivery), status=202)
