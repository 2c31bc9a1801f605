"""Reads of agents. Every query is scoped to the caller's organization. The agent as the API lists it
(with its phone number, documents and calls of today) is read on the api floor, in api/agents/selectors.py."""

from __future__ import annotations

from accounts.models import Organization
from agents.models import Agent
from kit.db import row_get


def agent_get(*, organization: Organization, agent_id: str, for_update: bool = False) -> Agent:
    """The organization's agent; a non-UUID id is a 400, another organization's agent a 404."""
    agents = Agent.objects.select_related("organization__plan").filter(organization=organization)
    if for_update:
        agents = agents.select_for_update(of=("self",))
    return row_get(agents, agent_id, what="agent", missing="Agent not found")
