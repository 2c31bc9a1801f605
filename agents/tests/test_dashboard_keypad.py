"""The agent's keypad on the dashboard form: shown, saved through the service, refused with the API's
message on its field, and kept by a form that does not carry it."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from agents.models import Agent
from testing.dashboard import NEW_AGENT, edit_form, errors

pytestmark = pytest.mark.django_db

ADD = "/admin/agents/agent/add/"


def change_url(agent: Agent) -> str:
    return f"/admin/agents/agent/{agent.pk}/change/"


def test_the_keypad_is_shown_and_edited_on_the_form(staff_client: Client, owner: Any, make_agent: Any) -> None:
    agent = make_agent(owner.organization)
    page = staff_client.get(change_url(agent)).content.decode()
    assert "Phone keypad" in page and "Keypad timeout (ms)" in page
    assert 'name="keypad_timeout_ms" value="2000"' in page
    form = edit_form(agent, keypad_timeout_ms="3500", keypad_terminator="*")  # keypad_enabled unchecked
    response = staff_client.post(change_url(agent), form)
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.keypad == {"enabled": False, "timeoutMs": 3500, "terminator": "*"}
    page = staff_client.get(change_url(agent)).content.decode()
    assert 'name="keypad_timeout_ms" value="3500"' in page


def test_a_form_without_the_keypad_keeps_it(staff_client: Client, owner: Any, make_agent: Any) -> None:
    agent = make_agent(owner.organization, keypad={"enabled": False, "timeoutMs": 800, "terminator": ""})
    response = staff_client.post(change_url(agent), edit_form(agent, max_duration_seconds="600"))
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.keypad == {"enabled": False, "timeoutMs": 800, "terminator": ""}


def test_a_new_agent_takes_the_keypad_typed_in(staff_client: Client, owner: Any) -> None:
    keypad = {"keypad_enabled": "on", "keypad_timeout_ms": "5000", "keypad_terminator": "#"}
    response = staff_client.post(ADD, {**NEW_AGENT, "organization": str(owner.organization.pk), **keypad})
    assert response.status_code == 302, errors(response.content.decode())
    assert Agent.objects.get().keypad == {"enabled": True, "timeoutMs": 5000, "terminator": "#"}


def test_a_refused_timeout_is_shown_on_its_field_and_nothing_is_saved(staff_client: Client, owner: Any) -> None:
    keypad = {"keypad_enabled": "on", "keypad_timeout_ms": "100", "keypad_terminator": "#"}
    response = staff_client.post(ADD, {**NEW_AGENT, "organization": str(owner.organization.pk), **keypad})
    assert response.status_code == 200
    page = response.content.decode()
    assert any("timeoutMs: must be a whole number of milliseconds from 500 to 10000." in e for e in errors(page))
    assert "errors field-keypad_timeout_ms" in page
    assert Agent.objects.count() == 0
