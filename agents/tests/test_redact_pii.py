"""An agent's `redactPii` setting (docs/guides/redaction.md) through the public API and the dashboard form."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from agents.models import Agent
from testing.dashboard import NEW_AGENT, edit_form, errors

pytestmark = pytest.mark.django_db

BASE = {"name": "Support", "instructions": "Help callers with their orders."}
ALLOWED = "email, phone_number, credit_card, ssn, iban, ip_address, date_of_birth"


def create(owner: Any, **fields: Any) -> Any:
    return owner.client.post("/public/v1/agents", {**BASE, **fields}, format="json")


def detail(owner: Any, agent_id: str) -> dict[str, Any]:
    response = owner.client.get(f"/public/v1/agents/{agent_id}")
    assert response.status_code == 200, response.content
    return response.json()


def test_redaction_is_off_by_default_and_takes_categories_or_all(owner):
    plain = create(owner).json()["id"]
    assert detail(owner, plain)["redactPii"] == "off"

    chosen = create(owner, redactPii=["phone_number", "email", "email"]).json()["id"]
    assert detail(owner, chosen)["redactPii"] == ["email", "phone_number"]  # known order, no repeats
    assert Agent.objects.get(pk=chosen).redact_pii == ["email", "phone_number"]

    everything = create(owner, redactPii="all").json()["id"]
    assert detail(owner, everything)["redactPii"] == "all"

    stamp = detail(owner, chosen)["updatedAt"]
    response = owner.client.patch(
        f"/public/v1/agents/{chosen}", {"expectedUpdatedAt": stamp, "redactPii": "off"}, format="json"
    )
    assert response.status_code == 200, response.content
    assert detail(owner, chosen)["redactPii"] == "off"
    listed = {item["id"]: item["redactPii"] for item in owner.client.get("/public/v1/agents").json()}
    assert listed == {plain: "off", chosen: "off", everything: "all"}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (["email", "passport"], f"Unknown category 'passport'; allowed: {ALLOWED}."),
        (["person_name"], f"person_name needs a named-entity model and is not available offline; allowed: {ALLOWED}."),
        ([], f'Must be "off", "all" or a non-empty list of: {ALLOWED}.'),
        ("on", f'Must be "off", "all" or a non-empty list of: {ALLOWED}.'),
        ([1], f'Must be "off", "all" or a non-empty list of: {ALLOWED}.'),
        ({"email": True}, f'Must be "off", "all" or a non-empty list of: {ALLOWED}.'),
        (True, f'Must be "off", "all" or a non-empty list of: {ALLOWED}.'),
    ],
)
def test_unknown_categories_are_refused_with_the_allowed_ones(owner, value, message):
    response = create(owner, redactPii=value)
    assert response.status_code == 400, response.content
    assert response.json()["issues"] == {"redactPii": [message]}
    assert not Agent.objects.exists()


def test_the_dashboard_form_sets_and_clears_the_categories(staff_client: Client, owner: Any) -> None:
    response = staff_client.post(
        "/admin/agents/agent/add/",
        {**NEW_AGENT, "organization": str(owner.organization.pk), "redact_pii_categories": ["email", "ssn"]},
    )
    assert response.status_code == 302, errors(response.content.decode())
    agent = Agent.objects.get()
    assert agent.redact_pii == ["email", "ssn"]

    page = staff_client.get(f"/admin/agents/agent/{agent.pk}/change/").content.decode()
    assert "Redact personal data" in page
    boxes = re.findall(r'<input type="checkbox" name="redact_pii_categories" value="(\w+)"[^>]*?( checked)?>', page)
    assert [(value, bool(checked)) for value, checked in boxes] == [
        ("email", True),
        ("phone_number", False),
        ("credit_card", False),
        ("ssn", True),
        ("iban", False),
        ("ip_address", False),
        ("date_of_birth", False),
    ]

    response = staff_client.post(f"/admin/agents/agent/{agent.pk}/change/", edit_form(agent))
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.redact_pii == "off"  # no box checked
