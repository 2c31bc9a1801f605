"""The agent writes of the public API and the dashboard, with their phone numbers: the agents app's rules
(agents/services.py) with telephony's assignment step passed in, so that an agent and its numbers change
in one transaction, all or nothing. The agents app sits below telephony and never imports it."""

from __future__ import annotations

import uuid
from typing import Any

from accounts.models import Organization
from agents import services
from agents.models import Agent
from agents.services import NumberPair
from kit.errors import ApiError
from telephony.models import CallBatch, CallBatchStatus
from telephony.services.numbers import Assignment, phone_numbers_replace

# The unfinished batches named in the refusal of an agent's deletion.
BATCHES_IN_MESSAGE = 10


def agent_numbers_replace(organization: Organization, agent: Agent, pairs: list[NumberPair]) -> None:
    """The assignment step of an agent write (agents.services.AssignNumbers): exactly these numbers."""
    phone_numbers_replace(organization=organization, agent=agent, assignments=[Assignment(*pair) for pair in pairs])


def agent_create(*, organization: Organization, data: dict[str, Any]) -> Agent:
    return services.agent_create(organization=organization, data=data, numbers=agent_numbers_replace)


def agent_replace(*, organization: Organization, agent_id: str, data: dict[str, Any]) -> Agent:
    return services.agent_replace(
        organization=organization, agent_id=agent_id, data=data, numbers=agent_numbers_replace
    )


def agent_patch(*, organization: Organization, agent_id: str, data: dict[str, Any]) -> Agent:
    return services.agent_patch(organization=organization, agent_id=agent_id, data=data, numbers=agent_numbers_replace)


def agent_release(organization: Organization, agent: Agent, pairs: list[NumberPair]) -> None:
    """The telephony step of an agent's deletion: its numbers unassigned, its finished call batches deleted
    (an unfinished one refuses the deletion: agent_call_batches_release)."""
    agent_call_batches_release(agent=agent)
    agent_numbers_replace(organization, agent, pairs)


def agent_delete(*, organization: Organization, agent_id: str) -> uuid.UUID:
    return services.agent_delete(organization=organization, agent_id=agent_id, numbers=agent_release)


def agent_call_batches_release(*, agent: Agent) -> int:
    """Before the agent is deleted: its finished call batches go (their calls stay in the call history);
    a batch still scheduled, running or paused refuses the deletion (409) until it is canceled."""
    batches = CallBatch.objects.filter(agent=agent)
    unfinished = list(
        batches.filter(
            status__in=(CallBatchStatus.SCHEDULED, CallBatchStatus.RUNNING, CallBatchStatus.PAUSED)
        ).values_list("name", flat=True)[:BATCHES_IN_MESSAGE]
    )
    if unfinished:
        raise ApiError.conflict(
            f"The agent has call batches that are not finished ({', '.join(unfinished)}): cancel them first.",
            code="AGENT_HAS_CALL_BATCHES",
        )
    deleted, _ = batches.delete()
    return deleted
