"""Agent.voicemail through the public API and the dashboard form: the default, a normalized setting, and
400s with clear messages for bad ones (nothing stored)."""

from __future__ import annotations

import json

import pytest

from agents.models import Agent
from testing import agent_api

BASE = {"name": "Reminders", "instructions": "Remind people of their appointments."}
DEFAULT = {"detection": "off", "action": "hang-up", "message": ""}
MESSAGE = "Hi {{first_name}}, this is Acme Dental reminding you of your appointment tomorrow. Call us back."


def create(persona, **fields):
    return agent_api.created(persona, {**BASE, **fields})


detail = agent_api.read


def test_a_new_agent_does_not_detect_machines(owner):
    agent_id = create(owner)
    assert detail(owner, agent_id)["voicemail"] == DEFAULT
    listed = {item["id"]: item for item in owner.client.get("/public/v1/agents").json()}
    assert listed[agent_id]["voicemail"] == DEFAULT


def test_a_setting_is_stored_normalized_and_a_patch_replaces_it(owner):
    agent_id = create(owner, voicemail={"detection": "provider", "action": "leave-message", "message": f" {MESSAGE}\n"})
    assert detail(owner, agent_id)["voicemail"] == {
        "detection": "provider",
        "action": "leave-message",
        "message": MESSAGE,  # trimmed
    }
    expected = detail(owner, agent_id)["updatedAt"]
    response = owner.client.patch(
        f"/public/v1/agents/{agent_id}",
        {"expectedUpdatedAt": expected, "voicemail": {"detection": "provider"}},
        format="json",
    )
    assert response.status_code == 200, response.json()
    # A key left out takes its default.
    assert detail(owner, agent_id)["voicemail"] == {"detection": "provider", "action": "hang-up", "message": ""}
    # A PUT without the field puts the default back.
    response = owner.client.put(f"/public/v1/agents/{agent_id}", BASE, format="json")
    assert response.status_code == 200, response.json()
    assert detail(owner, agent_id)["voicemail"] == DEFAULT


@pytest.mark.parametrize(
    ("setting", "says"),
    [
        ("provider", "Must be a JSON object with detection, action and message."),
        ({"detection": "twilio"}, "detection: must be one of off, provider, not 'twilio'."),
        ({"detection": "provider", "action": "voicemail"}, "action: must be one of hang-up, leave-message"),
        ({"action": "leave-message"}, "message: required when action is leave-message"),
        ({"action": "leave-message", "message": "   "}, "message: required when action is leave-message"),
        ({"detection": "provider", "message": "x" * 1001}, "message: at most 1000 characters (this one has 1001)."),
        ({"message": 42}, "message: must be a string."),
        ({"message": "a\x00b"}, "message: Must not contain the NUL character"),
        ({"detection": "provider", "beep": True}, "Unknown key 'beep'"),
    ],
)
def test_a_bad_setting_is_a_400_naming_the_key(owner, setting, says):
    response = owner.client.post("/public/v1/agents", {**BASE, "voicemail": setting}, format="json")
    assert response.status_code == 400, response.json()
    body = response.json()
    # Text that cannot be stored is refused at the edge, naming the path inside the setting.
    issues = [f"{key}: {value[0]}" for key, value in body["issues"].items() if key.split(".")[0] == "voicemail"]
    assert issues and says in issues[0], body
    assert says in body["error"] or "voicemail" in body["error"], body
    assert not Agent.objects.exists()


def test_a_message_of_exactly_the_limit_is_kept(owner):
    message = "y" * 1000
    agent_id = create(owner, voicemail={"detection": "provider", "action": "leave-message", "message": message})
    assert detail(owner, agent_id)["voicemail"]["message"] == message


def test_a_bad_setting_in_a_patch_changes_nothing(owner):
    agent_id = create(owner)
    expected = detail(owner, agent_id)["updatedAt"]
    response = owner.client.patch(
        f"/public/v1/agents/{agent_id}",
        {"expectedUpdatedAt": expected, "voicemail": {"detection": "provider", "action": "leave-message"}},
        format="json",
    )
    assert response.status_code == 400
    assert detail(owner, agent_id)["voicemail"] == DEFAULT


def test_the_openapi_document_describes_the_setting(owner):
    document = owner.client.get("/public/v1/openapi.json").json()
    request = document["components"]["schemas"]["AgentWriteRequest"]["properties"]["voicemail"]
    assert request["properties"]["detection"]["enum"] == ["off", "provider"]
    assert request["properties"]["action"]["enum"] == ["hang-up", "leave-message"]
    assert request["properties"]["message"]["maxLength"] == 1000
    assert request["then"]["required"] == ["message"]


# --- the dashboard's agent form ----------------------------------------------------------------------


def test_the_agent_form_sets_the_setting_and_shows_a_bad_one_on_its_field(client, owner, make_agent):
    from django.contrib.auth.models import User

    from testing.dashboard import edit_form, errors

    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    agent = make_agent(owner.organization)
    url = f"/admin/agents/agent/{agent.pk}/change/"
    assert "Voicemail (outbound calls)" in client.get(url).content.decode()

    bad = {"detection": "provider", "action": "leave-message"}
    response = client.post(url, edit_form(agent, voicemail=json.dumps(bad)))
    assert response.status_code == 200
    assert any("message: required when action is leave-message" in e for e in errors(response.content.decode()))
    agent.refresh_from_db()
    assert agent.voicemail == DEFAULT

    good = {"detection": "provider", "action": "leave-message", "message": MESSAGE}
    response = client.post(url, edit_form(agent, voicemail=json.dumps(good)))
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.voicemail == good

    # Left blank: the stored setting stays.
    response = client.post(url, edit_form(agent, voicemail=""))
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.voicemail == good
