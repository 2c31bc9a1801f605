"""Agent.analysisPlan through the public API: defaults, a full plan, replacement, and 400s for bad plans."""

from __future__ import annotations

import copy
import json

import pytest

from agents.models import Agent
from testing import agent_api

BASE = {"name": "Support", "instructions": "Help callers with their orders."}
DEFAULT = {
    "summary": {"enabled": True, "prompt": None},
    "structuredData": {"enabled": False, "schema": None, "prompt": None},
    "successEvaluation": {"enabled": False, "rubric": None, "scale": "pass-fail"},
}
BOOKING = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "The caller's full name"},
        "party_size": {"type": "integer", "minimum": 1, "description": "How many people the table is for"},
    },
    "required": ["name"],
}


def create(persona, **fields):
    return agent_api.created(persona, {**BASE, **fields})


detail = agent_api.read


def test_a_new_agent_summarizes_its_calls_and_nothing_else(owner):
    agent_id = create(owner)
    assert detail(owner, agent_id)["analysisPlan"] == DEFAULT
    listed = {item["id"]: item for item in owner.client.get("/public/v1/agents").json()}
    assert listed[agent_id]["analysisPlan"] == DEFAULT


def test_a_full_plan_is_stored_normalized_and_a_patch_replaces_it(owner):
    plan = {
        "summary": {"prompt": "Mention the booking date."},
        "structuredData": {"enabled": True, "schema": BOOKING},
        "successEvaluation": {"enabled": True, "rubric": "A table was booked.", "scale": "1-10"},
    }
    agent_id = create(owner, analysisPlan=plan)
    assert detail(owner, agent_id)["analysisPlan"] == {
        # A part sent without `enabled` is on.
        "summary": {"enabled": True, "prompt": "Mention the booking date."},
        "structuredData": {"enabled": True, "schema": BOOKING, "prompt": None},
        "successEvaluation": {"enabled": True, "rubric": "A table was booked.", "scale": "1-10"},
    }
    expected = detail(owner, agent_id)["updatedAt"]
    response = owner.client.patch(
        f"/public/v1/agents/{agent_id}",
        {"expectedUpdatedAt": expected, "analysisPlan": {"summary": {"enabled": False}}},
        format="json",
    )
    assert response.status_code == 200, response.json()
    # The whole plan is replaced: the parts left out are back to their defaults.
    assert detail(owner, agent_id)["analysisPlan"] == {**DEFAULT, "summary": {"enabled": False, "prompt": None}}
    # A PATCH without analysisPlan keeps it.
    expected = detail(owner, agent_id)["updatedAt"]
    response = owner.client.patch(
        f"/public/v1/agents/{agent_id}", {"expectedUpdatedAt": expected, "name": "Desk"}, format="json"
    )
    assert response.status_code == 200
    assert detail(owner, agent_id)["analysisPlan"]["summary"]["enabled"] is False


def without_description():
    schema = copy.deepcopy(BOOKING)
    del schema["properties"]["party_size"]["description"]
    return schema


@pytest.mark.parametrize(
    ("plan", "says"),
    [
        ("summarize please", "Must be a JSON object"),
        ([], "Must be a JSON object"),
        ({"sentiment": {"enabled": True}}, "Unknown key 'sentiment'"),
        ({"summary": True}, "summary: must be a JSON object"),
        ({"summary": {"enabled": "yes"}}, "summary.enabled: must be true or false"),
        ({"summary": {"style": "short"}}, "summary: unknown key 'style'"),
        ({"summary": {"prompt": 42}}, "summary.prompt: must be a string"),
        ({"summary": {"prompt": "x" * 4001}}, "summary.prompt: at most 4000 characters"),
        ({"structuredData": {"enabled": True}}, "structuredData.schema: required when structuredData is enabled"),
        ({"structuredData": {"schema": "name, email"}}, "structuredData.schema: must be a JSON Schema object"),
        ({"structuredData": {"schema": {"type": "strin"}}}, "structuredData.schema: Not a valid JSON Schema"),
        (
            {"structuredData": {"schema": {"type": "object", "properties": {"a": {"type": 5}}}}},
            "Not a valid JSON Schema",
        ),
        ({"structuredData": {"schema": {"type": "array"}}}, 'the schema needs "type": "object"'),
        ({"structuredData": {"schema": {"type": "object"}}}, "needs at least one property"),
        ({"structuredData": {"schema": without_description()}}, "property 'party_size' needs a description"),
        ({"successEvaluation": {"enabled": True}}, "successEvaluation.rubric: required when successEvaluation"),
        ({"successEvaluation": {"rubric": "   "}}, "successEvaluation.rubric: required"),
        ({"successEvaluation": {"rubric": "Booked.", "scale": "1-5"}}, "successEvaluation.scale: must be one of"),
        ({"summary": {"prompt": "a\x00b"}}, "summary.prompt: Must not contain the NUL character"),
        (
            {"structuredData": {"schema": {"type": "object", "properties": {"a\x00": {}}}}},
            "properties: A key must not contain the NUL character",
        ),
    ],
)
def test_a_bad_plan_is_a_400_naming_the_key(owner, plan, says):
    response = owner.client.post("/public/v1/agents", {**BASE, "analysisPlan": plan}, format="json")
    assert response.status_code == 400, response.json()
    body = response.json()
    # The plan's own checks name `analysisPlan`; text that cannot be stored is refused at the edge, naming
    # the path inside it (`analysisPlan.summary.prompt`).
    issues = [f"{key}: {value[0]}" for key, value in body["issues"].items() if key.split(".")[0] == "analysisPlan"]
    assert issues and says in issues[0], body
    assert not Agent.objects.exists()


def test_text_no_database_can_keep_is_a_400(owner):
    body = '{"name": "x", "instructions": "y", "analysisPlan": {"summary": {"prompt": "a\\ud800b"}}}'
    response = owner.client.post("/public/v1/agents", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["issues"] == {
        "analysisPlan.summary.prompt": [
            "Must not contain a lone UTF-16 surrogate (\\ud800-\\udfff): it is not a Unicode character."
        ]
    }


def test_a_bad_plan_in_a_patch_changes_nothing(owner):
    agent_id = create(owner)
    expected = detail(owner, agent_id)["updatedAt"]
    response = owner.client.patch(
        f"/public/v1/agents/{agent_id}",
        {"expectedUpdatedAt": expected, "analysisPlan": {"structuredData": {"enabled": True}}},
        format="json",
    )
    assert response.status_code == 400
    assert detail(owner, agent_id)["analysisPlan"] == DEFAULT


# --- the dashboard's agent form ----------------------------------------------------------------------


def test_the_agent_form_sets_the_plan_and_shows_a_bad_one_on_its_field(client, owner, make_agent):
    from django.contrib.auth.models import User

    from testing.dashboard import edit_form, errors

    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    agent = make_agent(owner.organization)
    url = f"/admin/agents/agent/{agent.pk}/change/"
    assert "Post-call analysis" in client.get(url).content.decode()

    bad = {"structuredData": {"enabled": True}}
    response = client.post(url, edit_form(agent, analysis_plan=json.dumps(bad)))
    assert response.status_code == 200
    assert "structuredData.schema: required when structuredData is enabled." in errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.analysis_plan == DEFAULT

    good = {"structuredData": {"schema": BOOKING}, "summary": {"enabled": False}}
    response = client.post(url, edit_form(agent, analysis_plan=json.dumps(good)))
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.analysis_plan["structuredData"] == {"enabled": True, "schema": BOOKING, "prompt": None}
    assert agent.analysis_plan["summary"]["enabled"] is False
