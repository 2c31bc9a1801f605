"""Reads of the organization webhooks and of call-event deliveries, scoped to the caller's organization."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from accounts.models import Organization
from calls.models import WebhookDelivery, WebhookEndpoint
from kit.db import row_get


def webhook_list(*, organization: Organization) -> QuerySet[WebhookEndpoint]:
    return WebhookEndpoint.objects.filter(organization=organization).order_by("created_at", "id")


def webhook_get(*, organization: Organization, webhook_id: str) -> WebhookEndpoint:
    endpoints = WebhookEndpoint.objects.filter(organization=organization)
    return row_get(endpoints, webhook_id, what="webhook", missing="Webhook not found")


def delivery_page(
    *,
    organization: Organization,
    limit: int,
    offset: int,
    call_id: Any = None,
    webhook_id: Any = None,
    status: str | None = None,
) -> list[WebhookDelivery]:
    """Newest first, each with its attempts (two queries)."""
    rows = WebhookDelivery.objects.filter(organization=organization)
    if call_id is not None:
        rows = rows.filter(call_id=call_id)
    if webhook_id is not None:
        rows = rows.filter(endpoint_id=webhook_id)
    if status:
        rows = rows.filter(status=status)
    return list(rows.order_by("-created_at", "-id").prefetch_related("attempt_log")[offset : offset + limit])


def delivery_get(*, organization: Organization, delivery_id: str) -> WebhookDelivery:
    deliveries = WebhookDelivery.objects.filter(organization=organization)
    return row_get(deliveries, delivery_id, what="delivery", missing="Delivery not found")
