"""Phone numbers in the dashboard, as a new staff user meets them: a number is claimed through the same rules
as the API's (E.164 only), starts `pending` until it points at this service, and is assigned to one of its
own organization's agents; what the dashboard saves is what the API lists."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from telephony.models import PhoneNumber
from telephony.services.numbers import phone_number_claim

pytestmark = pytest.mark.django_db

ADD = "/admin/telephony/phonenumber/add/"


@pytest.fixture
def staff(client: Client) -> Client:
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw-root-1234"))
    return client


def _add(staff: Client, organization: Any, number: str) -> Any:
    data = {"organization": organization.pk, "phone_number": number, "status": "claimed", "setup_status": "pending"}
    return staff.post(ADD, {**data, "friendly_name": ""})


def _listed(persona: Any) -> list[dict[str, Any]]:
    response = persona.client.get("/public/v1/phone-numbers")
    assert response.status_code == 200
    return response.json()


def test_a_number_added_in_the_dashboard_starts_pending_and_is_listed_by_the_api(staff, owner):
    page = staff.get(ADD).content.decode()
    assert re.search(r'<option value="pending" selected>', page)

    assert _add(staff, owner.organization, "+14155550123").status_code == 302

    [number] = _listed(owner)
    assert number["phoneNumber"] == "+14155550123"
    assert number["setupStatus"] == "pending"
    assert number["friendlyName"] == "+14155550123" and number["countryCode"] == "US"


@pytest.mark.parametrize("typed", ["hello", "415 555 0124", "+1 415 555 0124", "+1415555012", "+99912345678"])
def test_what_is_not_an_e164_number_is_refused_and_never_reaches_the_api(staff, owner, typed):
    response = _add(staff, owner.organization, typed)

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["phone_number"]
    assert not PhoneNumber.objects.exists()
    assert _listed(owner) == []


def test_the_agent_picker_offers_only_the_numbers_own_agents(staff, owner, outsider, make_agent):
    ours = make_agent(owner.organization, name="Ava", status="active")
    theirs = make_agent(outsider.organization, name="Max", status="active")
    number = phone_number_claim(organization=owner.organization, number="+14155550123")

    page = staff.get(f"/admin/telephony/phonenumber/{number.pk}/change/").content.decode()
    picker = page[page.index('name="assigned_agent"') : page.index("</select>", page.index('name="assigned_agent"'))]
    assert f'value="{ours.pk}"' in picker and "Ava (active)" in picker
    assert str(theirs.pk) not in picker
    assert "vForeignKeyRawIdAdminField" not in page


def test_an_assignment_made_in_the_dashboard_is_the_one_the_api_reports(staff, owner, make_agent):
    agent = make_agent(owner.organization, name="Ava", status="active")
    number = phone_number_claim(organization=owner.organization, number="+14155550123", friendly_name="Main")
    url = f"/admin/telephony/phonenumber/{number.pk}/change/"
    before = agent.updated_at

    data = {"friendly_name": "Main", "status": "claimed", "assigned_agent": agent.pk}
    response = staff.post(url, {**data, "handoff_phone_number": "+14155550100"})
    assert response.status_code == 302

    assigned = owner.client.get(f"/public/v1/agents/{agent.pk}/phone-numbers").json()
    assert assigned == [
        {
            "phoneNumberId": str(number.pk),
            "phoneNumber": "+14155550123",
            "friendlyName": "Main",
            "handoffPhoneNumber": "+14155550100",
        }
    ]
    agent.refresh_from_db()
    assert agent.updated_at > before  # the agent changed, as with the API: stale PATCHes are refused

    assert staff.post(url, {**data, "assigned_agent": "", "handoff_phone_number": ""}).status_code == 302
    assert owner.client.get(f"/public/v1/agents/{agent.pk}/phone-numbers").json() == []
    assert _listed(owner)[0]["assignedAgentId"] is None


def test_a_number_that_is_not_claimed_cannot_be_given_an_agent(staff, owner, make_agent):
    agent = make_agent(owner.organization, name="Ava", status="active")
    number = phone_number_claim(organization=owner.organization, number="+14155550123", status="released")

    response = staff.post(
        f"/admin/telephony/phonenumber/{number.pk}/change/",
        {"friendly_name": "", "status": "released", "assigned_agent": agent.pk, "handoff_phone_number": ""},
    )

    assert response.status_code == 200
    assert "only claimed numbers can be assigned" in str(response.context["adminform"].form.errors["assigned_agent"])
    number.refresh_from_db()
    assert number.assigned_agent is None
