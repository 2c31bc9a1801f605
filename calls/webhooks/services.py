"""The organization webhooks' rules: create (the secret made here, returned once), update, delete, and
rotate the secret (the previous one stays valid for receivers for ROTATION_OVERLAP)."""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts.models import Organization
from agents.models import Agent
from calls.models import WebhookEndpoint
from calls.webhooks.selectors import webhook_get
from kit import egress
from kit.errors import ApiError

ROTATION_OVERLAP = timedelta(hours=24)
MAX_WEBHOOKS = 20


def _new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


def _agent_id(organization: Organization, value: Any) -> Any:
    """The agent filter: one of the organization's agents (another's is not found, like an unknown one)."""
    if value is None:
        return None
    if not Agent.objects.filter(pk=value, organization=organization).exists():
        raise ApiError.not_found("Agent not found (agentId)")
    return value


def webhook_create(*, organization: Organization, data: dict[str, Any]) -> tuple[WebhookEndpoint, str]:
    """The new webhook and its signing secret (shown once)."""
    egress.validate_destination(data["url"], field="url")  # resolves the host: outside the transaction
    agent_id = _agent_id(organization, data.get("agentId"))
    now = timezone.now()
    secret = _new_secret()
    with transaction.atomic():
        Organization.objects.select_for_update().filter(pk=organization.pk).first()
        if WebhookEndpoint.objects.filter(organization=organization).count() >= MAX_WEBHOOKS:
            raise ApiError.conflict(f"An organization has at most {MAX_WEBHOOKS} webhooks.", code="TOO_MANY_WEBHOOKS")
        endpoint = WebhookEndpoint.objects.create(
            organization=organization,
            url=data["url"],
            events=data["events"],
            agent_id=agent_id,
            enabled=data.get("enabled", True),
            secret=secret,
            created_at=now,
            updated_at=now,
        )
    return endpoint, secret


def webhook_update(*, organization: Organization, webhook_id: str, data: dict[str, Any]) -> WebhookEndpoint:
    endpoint = webhook_get(organization=organization, webhook_id=webhook_id)
    if "url" in data:
        egress.validate_destination(data["url"], field="url")
        endpoint.url = data["url"]
    if "events" in data:
        endpoint.events = data["events"]
    if "agentId" in data:
        endpoint.agent_id = _agent_id(organization, data["agentId"])
    if "enabled" in data:
        endpoint.enabled = data["enabled"]
        if endpoint.enabled:
            endpoint.disabled_reason = ""
    endpoint.updated_at = timezone.now()
    endpoint.save()
    return endpoint


def webhook_delete(*, organization: Organization, webhook_id: str) -> Any:
    """Deletes the webhook with its delivery history; undelivered events to it are dropped."""
    endpoint = webhook_get(organization=organization, webhook_id=webhook_id)
    pk = endpoint.pk
    endpoint.delete()
    return pk


def webhook_rotate_secret(*, organization: Organization, webhook_id: str) -> tuple[WebhookEndpoint, str]:
    """A new signing secret, used from now on; the previous one is kept (for the record of receivers that
    accept both) until 24 hours from now."""
    endpoint = webhook_get(organization=organization, webhook_id=webhook_id)
    now = timezone.now()
    secret = _new_secret()
    endpoint.previous_secret = endpoint.secret
    endpoint.previous_secret_expires_at = now + ROTATION_OVERLAP
    endpoint.secret = secret
    endpoint.updated_at = now
    endpoint.save()
    return endpoint, secret
