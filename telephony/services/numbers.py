"""Phone numbers: claiming (dashboard/ops) and assignment to agents (public API).

A number belongs to at most one agent (a foreign key on the number) and an agent holds at most
MAX_NUMBERS_PER_AGENT numbers: every assignment locks the agent row and counts inside the same
transaction, so concurrent assignments cannot exceed the limit.

The agent services import this module (assignments are part of an agent's PUT and PATCH), so it
stays free of the call handling in telephony/services/calls.py and what that imports.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import NamedTuple

from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import Organization
from agents.models import Agent
from kit.errors import ApiError
from kit.validation import e164_problem, region_of
from telephony.models import (
    MAX_NUMBERS_PER_AGENT,
    PhoneNumber,
    PhoneNumberProvider,
    PhoneNumberStatus,
    SetupStatus,
    TelephonyAccount,
)


class Assignment(NamedTuple):
    phone_number_id: uuid.UUID
    handoff_phone_number: str | None


def _not_found(phone_number_id: object) -> ApiError:
    return ApiError.not_found(f"Phone number {phone_number_id} not found", code="PHONE_NUMBER_NOT_FOUND")


def _limit_exceeded() -> ApiError:
    return ApiError.conflict(
        f"An agent can hold at most {MAX_NUMBERS_PER_AGENT} phone numbers.", code="PHONE_NUMBER_LIMIT_EXCEEDED"
    )


def _touch(agent_ids: set) -> None:
    """Assignments are part of the agent: its updatedAt moves so that stale PATCHes are refused."""
    now = timezone.now()
    for agent in Agent.objects.filter(pk__in=agent_ids).only("pk", "updated_at"):
        stamp = now if now > agent.updated_at else agent.updated_at + timedelta(microseconds=1)
        Agent.objects.filter(pk=agent.pk).update(updated_at=stamp)


def _lock_numbers(*, organization: Organization, ids: list[uuid.UUID]) -> dict[uuid.UUID, PhoneNumber]:
    numbers = {n.pk: n for n in PhoneNumber.objects.select_for_update().filter(organization=organization, pk__in=ids)}
    for pk in ids:
        if pk not in numbers:
            raise _not_found(pk)
    for pk in ids:
        if numbers[pk].status != PhoneNumberStatus.CLAIMED:
            raise ApiError.conflict(
                f"Phone number {numbers[pk].phone_number} is {numbers[pk].status}; only claimed numbers can be assigned.",
                code="PHONE_NUMBER_NOT_CLAIMED",
            )
    return numbers


def _lock_agent(agent: Agent) -> None:
    Agent.objects.select_for_update().filter(pk=agent.pk).values_list("pk", flat=True).get()


def phone_number_assign(
    *, organization: Organization, agent: Agent, phone_number_id: uuid.UUID, handoff_phone_number: str | None = None
) -> PhoneNumber:
    """Assign a claimed number to the agent; a number on another agent moves (spec: number assignment)."""
    with transaction.atomic():
        _lock_agent(agent)
        number = _lock_numbers(organization=organization, ids=[phone_number_id])[phone_number_id]
        if number.assigned_agent_id != agent.pk:
            held = PhoneNumber.objects.filter(assigned_agent=agent).count()
            if held >= MAX_NUMBERS_PER_AGENT:
                raise _limit_exceeded()
        touched = {agent.pk, number.assigned_agent_id} - {None}
        if number.assigned_agent_id != agent.pk:
            number.assigned_at = timezone.now()
        number.assigned_agent = agent
        number.handoff_phone_number = handoff_phone_number
        number.save(update_fields=["assigned_agent", "handoff_phone_number", "assigned_at"])
        _touch(touched)
    return number


def phone_number_unassign(*, organization: Organization, agent: Agent, phone_number_id: uuid.UUID) -> PhoneNumber:
    """The number stays claimed by the organization; 404 when it is not on this agent."""
    with transaction.atomic():
        number = PhoneNumber.objects.select_for_update().filter(organization=organization, pk=phone_number_id).first()
        if number is None:
            raise _not_found(phone_number_id)
        if number.assigned_agent_id != agent.pk:
            raise ApiError.not_found(f"Phone number {number.phone_number} is not assigned to this agent")
        number.assigned_agent = None
        number.handoff_phone_number = None
        number.assigned_at = None
        number.save(update_fields=["assigned_agent", "handoff_phone_number", "assigned_at"])
        _touch({agent.pk})
    return number


def phone_numbers_replace(*, organization: Organization, agent: Agent, assignments: list[Assignment]) -> None:
    """Bulk replacement (phoneNumberAssignments / phoneNumberIds on PUT and PATCH): the agent ends up
    with exactly these numbers, or nothing changes. Must run inside the caller's transaction."""
    ids = [a.phone_number_id for a in assignments]
    if len(set(ids)) != len(ids):
        raise ApiError.invalid(
            "The same phone number appears twice in the assignments.",
            {"phoneNumberAssignments": ["Duplicate phoneNumberId."]},
        )
    if len(ids) > MAX_NUMBERS_PER_AGENT:
        raise _limit_exceeded()
    _lock_agent(agent)
    numbers = _lock_numbers(organization=organization, ids=ids)
    now = timezone.now()
    touched = {n.assigned_agent_id for n in numbers.values() if n.assigned_agent_id not in (None, agent.pk)}
    PhoneNumber.objects.filter(assigned_agent=agent).exclude(pk__in=ids).update(
        assigned_agent=None, handoff_phone_number=None, assigned_at=None
    )
    for assignment in assignments:
        number = numbers[assignment.phone_number_id]
        if number.assigned_agent_id != agent.pk:
            number.assigned_at = now
        number.assigned_agent = agent
        number.handoff_phone_number = assignment.handoff_phone_number
        number.save(update_fields=["assigned_agent", "handoff_phone_number", "assigned_at"])
    _touch(touched)


def phone_number_claim(
    *,
    organization: Organization,
    number: str,
    country: str | None = None,
    status: str = PhoneNumberStatus.CLAIMED,
    friendly_name: str = "",
    setup_status: str = SetupStatus.READY,
) -> PhoneNumber:
    """Dashboard/ops: record a number the organization owns (purchase and porting happen at the provider).
    `setup_status` says whether its voice webhook already points at this service (`ready`, e.g. set by
    hand in Twilio's console) or not yet (`pending`: the dashboard action "Point at this service")."""
    problem = e164_problem(number)
    if problem:
        raise ApiError.field("number", problem)
    if status not in PhoneNumberStatus.values:
        raise ApiError.field("status", f"Must be one of {', '.join(PhoneNumberStatus.values)}.")
    if setup_status not in (SetupStatus.READY, SetupStatus.PENDING):
        raise ApiError.field("setupStatus", "Must be ready or pending.")
    region = region_of(number)
    country = (country or region).upper()
    if len(country) != 2 or not country.isalpha():
        raise ApiError.field("country", "Must be a two-letter country code.")
    # The number is the carrier's of the organization's telephony account (Twilio without one yet).
    account = TelephonyAccount.objects.filter(organization=organization).only("provider").first()
    try:
        with transaction.atomic():
            return PhoneNumber.objects.create(
                organization=organization,
                phone_number=number,
                provider=account.provider if account is not None else PhoneNumberProvider.TWILIO,
                country_code=country,
                status=status,
                friendly_name=friendly_name or number,
                setup_status=setup_status,
            )
    except IntegrityError:
        raise ApiError.conflict(f"{number} is already claimed.") from None
