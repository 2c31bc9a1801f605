"""The demo organization's agent (`manage.py bootstrapdemo`, first run): active, static, and recording its
calls, so that a first call shows everything the dashboard's call page has (the recording's player too)."""

from __future__ import annotations

from typing import Any

from accounts.models import Organization
from agents.models import AgentStatus
from agents.services import agent_create, agent_patch

DEMO_AGENT = {
    "name": "Demo agent",
    "agent_type": "static",
    "identity": "Ava, the reservation assistant of the Acme restaurant",
    "instructions": "You take table reservations for the Acme restaurant. Callers book a table for a number "
    "of people, for a date and a time, for lunch or dinner.",
    "greeting_type": "static",
    "static_greeting": "Hello, this is Ava from Acme. How can I help you today?",
    "recording_enabled": True,
}


def demo_agent_create(sender: Any, *, organization: Organization, **kwargs: Any) -> str:
    """The receiver of accounts.signals.demo_organization_created; returns the line bootstrapdemo prints."""
    agent = agent_create(organization=organization, data=dict(DEMO_AGENT))
    agent = agent_patch(
        organization=organization,
        agent_id=str(agent.pk),
        data={"status": AgentStatus.ACTIVE, "expected_updated_at": agent.updated_at},
    )
    return f"  demo agent:     {agent.pk} ({agent.name}, active, records its calls)"
