"""Telephony's steps of the agent writes (agents/services.py, the only agent writes: the public API's and
the dashboard's), registered there when the telephony app starts (telephony/apps.py): an agent and its
numbers change in one transaction, all or nothing. The agents app sits below telephony and never imports it."""

from __future__ import annotations

from accounts.models import Organization
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


def agent_release(organization: Organization, agent: Agent) -> None:
    """The telephony step of an agent's deletion (agents.services.ReleaseAgent): its finished call batches
    deleted (an unfinished one refuses the deletion: agent_call_batches_release), its numbers unassigned."""
    agent_call_batches_release(agent=agent)
    agent_numbers_replace(organization, agent, [])


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
