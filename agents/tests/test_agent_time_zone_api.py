"""The agent's timeZone through the public API (docs/guides/variables.md: {{now}} is in it): "UTC" by
default, a canonical IANA name (agents/time_zones.py), a 400 naming the field otherwise (an old alias names the
zone to use); and on the dashboard form."""

from __future__ import annotations

import pytest

from agents.models import Agent
from testing.dashboard import NEW_AGENT, edit_form, errors

BASE = {"name": "Support", "instructions": "Help callers with their orders."}


def create(persona, **fields):
    return persona.client.post("/public/v1/agents", {**BASE, **fields}, format="json")


def listed(persona, agent_id):
    return {item["id"]: item for item in persona.client.get("/public/v1/agents").json()}[agent_id]


def test_utc_by_default_stored_on_create_changed_by_patch_and_reset_by_put(owner):
    agent_id = create(owner).json()["id"]
    assert listed(owner, agent_id)["timeZone"] == "UTC"
    assert owner.client.get(f"/public/v1/agents/{agent_id}").json()["timeZone"] == "UTC"

    agent_id = create(owner, timeZone="Europe/Madrid").json()["id"]
    item = listed(owner, agent_id)
    assert item["timeZone"] == "Europe/Madrid"
    patched = owner.client.patch(
        f"/public/v1/agents/{agent_id}",
        {"expectedUpdatedAt": item["updatedAt"], "timeZone": "America/New_York"},
        format="json",
    )
    assert patched.status_code == 200, patched.json()
    assert owner.client.get(f"/public/v1/agents/{agent_id}").json()["timeZone"] == "America/New_York"
    put = owner.client.put(f"/public/v1/agents/{agent_id}", BASE, format="json")
    assert put.status_code == 200, put.json()
    assert listed(owner, agent_id)["timeZone"] == "UTC"


@pytest.mark.parametrize("value", ["Mars/Olympus_Mons", "", "../../etc/passwd", "/etc/localtime", "x" * 65, 5, None])
def test_an_unknown_time_zone_is_a_400_naming_the_field(owner, value):
    response = create(owner, timeZone=value)
    assert response.status_code == 400
    issues = response.json()["issues"]
    assert "timeZone" in issues, response.json()
    if isinstance(value, str) and 0 < len(value) <= 64:
        assert "Unknown time zone" in " ".join(issues["timeZone"])
    assert not Agent.objects.exists()


@pytest.mark.parametrize("value", ["localtime", "posixrules", "Factory", "Etc/Unknown", "right/UTC", "zone.tab"])
def test_names_that_are_not_zones_are_refused_whatever_the_server_holds(owner, value):
    response = create(owner, timeZone=value)
    assert response.status_code == 400, response.json()
    assert response.json()["issues"]["timeZone"] == [
        f'Unknown time zone {value!r}: use an IANA time zone name such as "Europe/Madrid".'
    ]
    assert not Agent.objects.exists()


@pytest.mark.parametrize(
    ("alias", "zone"),
    [("US/Eastern", "America/New_York"), ("Asia/Calcutta", "Asia/Kolkata"), ("GMT", "Etc/GMT")],
)
def test_an_old_alias_is_refused_with_the_zone_to_use(owner, alias, zone):
    response = create(owner, timeZone=alias)
    assert response.status_code == 400, response.json()
    assert response.json()["issues"]["timeZone"] == [
        f"Unknown time zone {alias!r}: an old alias of the time zone {zone}; use {zone}."
    ]
    assert create(owner, timeZone=zone).status_code == 200


@pytest.mark.parametrize("value", ["UTC", "Etc/GMT+5", "Europe/Amsterdam", "America/Argentina/Buenos_Aires"])
def test_canonical_zones_and_country_zones_are_taken(owner, value):
    response = create(owner, timeZone=value)
    assert response.status_code == 200, response.json()
    assert owner.client.get(f"/public/v1/agents/{response.json()['id']}").json()["timeZone"] == value


def test_the_dashboard_form_sets_it_through_the_service(staff_client, owner):
    new = {**NEW_AGENT, "organization": str(owner.organization.pk), "time_zone": "Asia/Tokyo"}
    response = staff_client.post("/admin/agents/agent/add/", new)
    assert response.status_code == 302, errors(response.content.decode())
    agent = Agent.objects.get()
    assert agent.time_zone == "Asia/Tokyo"

    response = staff_client.post(
        f"/admin/agents/agent/{agent.pk}/change/", edit_form(agent, time_zone="Nowhere/Atlantis")
    )
    assert response.status_code == 200
    assert any("Unknown time zone" in message for message in errors(response.content.decode()))
    agent.refresh_from_db()
    assert agent.time_zone == "Asia/Tokyo"
