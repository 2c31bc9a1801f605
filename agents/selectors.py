"""Reads of agents. Every query is scoped to the caller's organization. The agent as the API lists it
(with its phone number, documents and calls of today) is read on the api floor, in api/agents/selectors.py."""

from __future__ import annotations

from typing import Any

from accounts.models import Organization
from agents.handoffs import handoffs_of
from agents.models import Agent, AgentStatus
from kit.db import row_get


def agent_get(*, organization: Organization, agent_id: str, for_update: bool = False) -> Agent:
    """The organization's agent; a non-UUID id is a 400, another organization's agent a 404."""
    agents = Agent.objects.select_related("organization__plan").filter(organization=organization)
    if for_update:
        agents = agents.select_for_update(of=("self",))
    return row_get(agents, agent_id, what="agent", missing="Agent not found")


def handoff_targets(*, agent: Agent) -> list[tuple[dict[str, Any], Agent]]:
    """The agent's `handoffs` entries (agents/handoffs.py: {agentId, description, context, lastN}) in their
    order, each with its target, for the targets that are still active agents of the agent's organization
    (one query). A target deactivated or deleted since the list was saved is left out, as is an entry that
    is not valid (written around the API) or names the agent itself."""
    entries = [entry for entry in handoffs_of(agent.handoffs) if entry["agentId"] != str(agent.pk)]
    if not entries:
        return []
    targets = {
        str(target.pk): target
        for target in Agent.objects.select_related("organization__plan").filter(
            organization_id=agent.organization_id,
            status=AgentStatus.ACTIVE,
            pk__in=[entry["agentId"] for entry in entries],
        )
    }
    return [(entry, targets[entry["agentId"]]) for entry in entries if entry["agentId"] in targets]
