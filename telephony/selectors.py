from __future__ import annotations

from typing import Any

from django.db.models import F

from accounts.models import Organization
from agents.models import Agent
from kit.validation import region_of
from telephony.models import PhoneNumber, PhoneNumberStatus


def phone_number_list(*, organization: Organization) -> list[dict[str, Any]]:
    rows = (
        PhoneNumber.objects.filter(organization=organization)
        .annotate(agent_name=F("assigned_agent__name"))
        .order_by("phone_number")
    )
    return [
        {
            "id": str(n.id),
            "phoneNumber": n.phone_number,
            "friendlyName": n.friendly_name,
            "status": n.status,
            "source": n.source,
            "provider": n.provider,
            "setupStatus": n.setup_status,
            "assignedAgentId": str(n.assigned_agent_id) if n.assigned_agent_id else None,
            "assignedAgentName": n.agent_name,
            "countryCode": n.country_code,
        }
        for n in rows
    ]


def agent_phone_numbers(*, agent: Agent) -> list[dict[str, Any]]:
    rows = PhoneNumber.objects.filter(assigned_agent=agent).order_by("assigned_at", "phone_number")
    return [
        {
            "phoneNumberId": str(n.id),
            "phoneNumber": n.phone_number,
            "friendlyName": n.friendly_name,
            "handoffPhoneNumber": n.handoff_phone_number,
        }
        for n in rows
    ]


def assigned_number_handoff(*, agent_id: Any, phone_number: str) -> str | None:
    """The handoff destination of `phone_number` when it is one of the agent's assigned numbers
    (None when it is not, or when that assignment has none)."""
    return (
        PhoneNumber.objects.filter(assigned_agent_id=agent_id, phone_number=phone_number)
        .values_list("handoff_phone_number", flat=True)
        .first()
    ) or None


def outbound_countries_in_effect(*, organization: Organization) -> list[str]:
    """The countries (ISO codes, sorted) outbound calls of the organization may go to: its own list when
    it set one, else the countries of its claimed numbers (a call is always placed from one of them)."""
    if organization.outbound_countries is not None:
        return list(organization.outbound_countries)
    numbers = PhoneNumber.objects.filter(organization=organization, status=PhoneNumberStatus.CLAIMED)
    return sorted({region_of(number) for number in numbers.values_list("phone_number", flat=True)} - {""})
