"""Reads of the realtime app."""

from __future__ import annotations

from uuid import UUID

from agents.models import Agent


def session_agent_get(*, organization_id: UUID, agent_id: UUID) -> Agent | None:
    """The agent a verified session token names, with what the engine reads (plan for ambient sound)."""
    return (
        Agent.objects.select_related("organization__plan").filter(pk=agent_id, organization_id=organization_id).first()
    )
