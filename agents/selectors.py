"""Reads of agents. Every query is scoped to the caller's organization. The agent as the API lists it
(with its phone number, documents and calls of today) is read a floor up, in telephony/agent_selectors.py."""

from __future__ import annotations

from accounts.models import Organization
from agents.models import Agent
from kit.errors import ApiError
from kit.validation import parse_uuid


def agent_get(*, organization: Organization, agent_id: str, for_update: bool = False) -> Agent:
    """The organization's agent; a non-UUID id is a 400, another organization's agent a 404."""
    pk = parse_uuid(agent_id, "agent")
    queryset = Agent.objects.select_related("organization__plan")
    if for_update:
        queryset = queryset.select_for_update(of=("self",))
    agent = queryset.filter(pk=pk, organization=organization).first()
    if agent is None:
        raise ApiError.not_found("Agent not found")
    return agent
