"""Widget keys' reads: an agent's keys (scoped by organization), a key by its publishable value, and whether
any key lists an origin (a CORS preflight carries no key)."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch

from accounts.models import Organization
from agents.models import Agent
from agents.selectors import agent_get
from kit.db import row_get
from kit.fields import iso
from realtime.models import WidgetKey, WidgetKeyOrigin

_ORIGINS = Prefetch("origins", queryset=WidgetKeyOrigin.objects.order_by("position"))


def widget_key_list(*, agent: Agent) -> list[WidgetKey]:
    """The agent's keys, oldest first, with their origins."""
    return list(WidgetKey.objects.filter(agent=agent).prefetch_related(_ORIGINS).order_by("created_at", "id"))


def widget_key_get(*, organization: Organization, agent_id: str, key_id: str) -> WidgetKey:
    """One key of the organization's agent: 404 for another organization's agent or key (or another agent's)."""
    agent = agent_get(organization=organization, agent_id=agent_id)
    keys = WidgetKey.objects.filter(agent=agent).prefetch_related(_ORIGINS)
    return row_get(keys, key_id, what="widget key", missing="Widget key not found")


def widget_key_lookup(*, key: str) -> WidgetKey | None:
    """The live key whose publishable value is `key` (with its organization's plan, agent and origins)."""
    if not key.startswith("pk_") or len(key) > 64:
        return None
    rows = WidgetKey.objects.select_related("organization__plan", "agent").prefetch_related(_ORIGINS)
    return rows.filter(key=key).first()


def origin_listed(*, origin: str) -> bool:
    """Whether some key lists `origin` (normalized as a browser sends it)."""
    return WidgetKeyOrigin.objects.filter(origin=origin).exists()


def widget_key_item(key: WidgetKey) -> dict[str, Any]:
    """The API's representation of a key."""
    return {
        "id": str(key.pk),
        "key": key.key,
        "allowedOrigins": [row.origin for row in key.origins.all()],
        "createdAt": iso(key.created_at),
    }
