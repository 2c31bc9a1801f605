"""The agent's `recordingEnabled` (off by default): set and read through the API and the dashboard form."""

from __future__ import annotations

from typing import Any

import pytest

from agents.models import Agent
from testing.dashboard import NEW_AGENT, edit_form, errors

ADD = "/admin/agents/agent/add/"
BASE = {"name": "Support", "instructions": "Help callers with their orders."}


def item(persona: Any, agent_id: str) -> dict[str, Any]:
    return persona.client.get(f"/public/v1/agents/{agent_id}").json()


def test_recording_is_off_by_default_and_can_be_turned_on_and_off(owner):
    created = owner.client.post("/public/v1/agents", BASE, format="json").json()["id"]
    assert item(owner, created)["recordingEnabled"] is False
    on = owner.client.post("/public/v1/agents", {**BASE, "recordingEnabled": True}, format="json").json()["id"]
    listed = {a["id"]: a for a in owner.client.get("/public/v1/agents").json()}
    assert listed[on]["recordingEnabled"] is True and listed[created]["recordingEnabled"] is False

    expected = item(owner, on)["updatedAt"]
    response = owner.client.patch(
        f"/public/v1/agents/{on}", {"recordingEnabled": False, "expectedUpdatedAt": expected}, format="json"
    )
    assert response.status_code == 200
    assert item(owner, on)["recordingEnabled"] is False
    replaced = owner.client.put(f"/public/v1/agents/{on}", {**BASE, "recordingEnabled": True}, format="json")
    assert replaced.status_code == 200 and item(owner, on)["recordingEnabled"] is True
    # A PUT without it takes the default (off), as with every other field.
    owner.client.put(f"/public/v1/agents/{on}", BASE, format="json")
    assert item(owner, on)["recordingEnabled"] is False


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_recording_enabled_must_be_a_boolean(owner, value):
    response = owner.client.post("/public/v1/agents", {**BASE, "recordingEnabled": value}, format="json")
    assert response.status_code == 400
    assert "recordingEnabled" in response.json()["issues"]


@pytest.fixture
def staff_client(client: Any, db: Any) -> Any:
    from django.contrib.auth.models import User

    client.force_login(User.objects.create_superuser("staff", "staff@example.com", "pw"))
    return client


def test_the_dashboard_form_turns_recording_on_and_off(staff_client, owner):
    response = staff_client.post(
        ADD, {**NEW_AGENT, "organization": str(owner.organization.pk), "recording_enabled": "on"}
    )
    assert response.status_code == 302, errors(response.content.decode())
    agent = Agent.objects.get()
    assert agent.recording_enabled is True
    page = staff_client.get(f"/admin/agents/agent/{agent.pk}/change/").content.decode()
    assert "Record calls" in page and 'name="recording_enabled"' in page
    response = staff_client.post(f"/admin/agents/agent/{agent.pk}/change/", edit_form(agent, recording_enabled=False))
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.recording_enabled is False


def test_bootstrapdemo_makes_an_active_demo_agent_that_records_its_calls(db, tmp_path, monkeypatch):
    from io import StringIO

    from django.core.management import call_command

    from accounts.management.commands import bootstrapdemo

    monkeypatch.setattr(bootstrapdemo, "DEMO_FILE", tmp_path / "demo.json")
    out = StringIO()
    call_command("bootstrapdemo", stdout=out)
    agent = Agent.objects.get()
    assert (agent.name, agent.status, agent.recording_enabled) == ("Demo agent", "active", True)
    assert f"demo agent:     {agent.pk}" in out.getvalue()
    call_command("bootstrapdemo", stdout=StringIO())  # once only
    assert Agent.objects.count() == 1
