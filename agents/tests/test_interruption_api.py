"""Agent.interruption through the public API and the dashboard form: the default, a partial setting filled
with defaults and stored normalized, and 400s naming the key inside the setting (nothing stored)."""

from __future__ import annotations

import json

import pytest

from agents.models import Agent
from testing import agent_api

BASE = {"name": "Front desk", "instructions": "Answer questions about the store."}
DEFAULT = {"mode": "adaptive", "minWords": 1, "backchannels": None, "resumeAfterMs": 400}


def create(persona, **fields):
    return agent_api.created(persona, {**BASE, **fields})


detail = agent_api.read


patch = agent_api.patched


def test_a_new_agent_is_interrupted_adaptively_with_its_languages_backchannels(owner):
    agent_id = create(owner)
    assert detail(owner, agent_id)["interruption"] == DEFAULT
    listed = {item["id"]: item for item in owner.client.get("/public/v1/agents").json()}
    assert listed[agent_id]["interruption"] == DEFAULT


def test_a_partial_setting_is_filled_with_defaults_and_a_patch_replaces_it(owner):
    agent_id = create(owner, interruption={"mode": "vad", "resumeAfterMs": 600.0})
    assert detail(owner, agent_id)["interruption"] == {**DEFAULT, "mode": "vad", "resumeAfterMs": 600}

    response = patch(
        owner, agent_id, interruption={"minWords": 2, "backchannels": ["  Okay ", "OK!", "sounds  good", "okay"]}
    )
    assert response.status_code == 200, response.json()
    # Trimmed, one space, a phrase said the same way twice ("OK!" is "okay") kept once.
    assert detail(owner, agent_id)["interruption"] == {
        **DEFAULT,
        "minWords": 2,
        "backchannels": ["Okay", "sounds good"],
    }
    assert Agent.objects.get(pk=agent_id).interruption["backchannels"] == ["Okay", "sounds good"]

    response = patch(owner, agent_id, interruption={"mode": "off", "backchannels": []})
    assert response.status_code == 200, response.json()
    assert detail(owner, agent_id)["interruption"] == {**DEFAULT, "mode": "off", "backchannels": []}

    # A PUT without the field puts the default back.
    response = owner.client.put(f"/public/v1/agents/{agent_id}", BASE, format="json")
    assert response.status_code == 200, response.json()
    assert detail(owner, agent_id)["interruption"] == DEFAULT


@pytest.mark.parametrize(
    ("setting", "field", "says"),
    [
        ("adaptive", "interruption", "Must be a JSON object with mode, minWords, backchannels and resumeAfterMs."),
        ({"mode": "smart"}, "interruption.mode", "Must be one of adaptive, vad, off, not 'smart'."),
        ({"mode": None}, "interruption.mode", "Must be one of adaptive, vad, off, not None."),
        ({"minWords": 6}, "interruption.minWords", "Must be a whole number of words from 0 to 5, not 6."),
        ({"minWords": 1.5}, "interruption.minWords", "Must be a whole number of words from 0 to 5"),
        ({"minWords": True}, "interruption.minWords", "Must be a whole number of words from 0 to 5"),
        ({"resumeAfterMs": -1}, "interruption.resumeAfterMs", "from 0 to 5000, not -1."),
        ({"resumeAfterMs": "400"}, "interruption.resumeAfterMs", "from 0 to 5000, not '400'."),
        ({"backchannels": "okay"}, "interruption.backchannels", "Must be a list of phrases, or null"),
        ({"backchannels": ["okay"] * 51}, "interruption.backchannels", "At most 50 phrases (this list has 51)."),
        ({"backchannels": ["okay", 3]}, "interruption.backchannels.1", "Must be a string."),
        ({"backchannels": ["okay", "?!"]}, "interruption.backchannels.1", "Must hold at least one word."),
        ({"backchannels": ["x" * 41]}, "interruption.backchannels.0", "At most 40 characters (this one has 41)."),
        ({"mode": "vad", "resume": 400}, "interruption.resume", "Unknown key; the keys are mode, minWords"),
    ],
)
def test_a_bad_setting_is_a_400_naming_the_key(owner, setting, field, says):
    response = owner.client.post("/public/v1/agents", {**BASE, "interruption": setting}, format="json")
    assert response.status_code == 400, response.json()
    body = response.json()
    assert says in body["issues"][field][0], body
    assert body["error"].startswith(f"Invalid request: {field}: "), body
    assert not Agent.objects.exists()


def test_a_bad_setting_in_a_patch_changes_nothing(owner):
    agent_id = create(owner, interruption={"mode": "off"})
    response = patch(owner, agent_id, interruption={"mode": "vad", "minWords": 9})
    assert response.status_code == 400
    assert detail(owner, agent_id)["interruption"] == {**DEFAULT, "mode": "off"}


def test_the_openapi_document_describes_the_setting(owner):
    document = owner.client.get("/public/v1/openapi.json").json()
    for schema in ("AgentWriteRequest", "PatchedAgentPatchRequest"):
        setting = document["components"]["schemas"][schema]["properties"]["interruption"]
        assert setting["additionalProperties"] is False
        assert setting["properties"]["mode"]["enum"] == ["adaptive", "vad", "off"]
        assert (setting["properties"]["minWords"]["minimum"], setting["properties"]["minWords"]["maximum"]) == (0, 5)
        assert setting["properties"]["resumeAfterMs"]["maximum"] == 5000
        assert setting["properties"]["backchannels"]["type"] == ["array", "null"]


# --- the dashboard's agent form ----------------------------------------------------------------------


def test_the_agent_form_sets_the_setting_and_shows_a_bad_one_on_its_field(client, owner, make_agent):
    from django.contrib.auth.models import User

    from testing.dashboard import edit_form, errors

    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    agent = make_agent(owner.organization)
    url = f"/admin/agents/agent/{agent.pk}/change/"
    assert "Interruptions" in client.get(url).content.decode()

    response = client.post(url, edit_form(agent, interruption=json.dumps({"mode": "always"})))
    assert response.status_code == 200
    assert any("Must be one of adaptive, vad, off, not 'always'." in e for e in errors(response.content.decode()))
    agent.refresh_from_db()
    assert agent.interruption == DEFAULT

    response = client.post(url, edit_form(agent, interruption=json.dumps({"mode": "off"})))
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.interruption == {**DEFAULT, "mode": "off"}

    # Left blank: the stored setting stays.
    response = client.post(url, edit_form(agent, interruption=""))
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.interruption == {**DEFAULT, "mode": "off"}
