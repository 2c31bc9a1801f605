"""The agent's call endings settings through the public API: endCallEnabled (default true) and
maxDurationSeconds (default 1800, 30 to 14400), their defaults, updates and every refusal."""

from __future__ import annotations

import pytest

from agents.models import Agent

BASE = {"name": "Support", "instructions": "Help callers with their orders."}


def create(persona, **fields):
    return persona.client.post("/public/v1/agents", {**BASE, **fields}, format="json")


def listed(persona, agent_id):
    return {item["id"]: item for item in persona.client.get("/public/v1/agents").json()}[agent_id]


def test_a_new_agent_offers_end_call_and_ends_calls_after_30_minutes(owner):
    agent_id = create(owner).json()["id"]
    item = listed(owner, agent_id)
    assert (item["endCallEnabled"], item["maxDurationSeconds"]) == (True, 1800)
    detail = owner.client.get(f"/public/v1/agents/{agent_id}").json()
    assert (detail["endCallEnabled"], detail["maxDurationSeconds"]) == (True, 1800)


def test_both_are_stored_on_create_and_changed_by_patch_and_reset_by_put(owner):
    response = create(owner, endCallEnabled=False, maxDurationSeconds=30)
    assert response.status_code == 200, response.json()
    agent_id = response.json()["id"]
    item = listed(owner, agent_id)
    assert (item["endCallEnabled"], item["maxDurationSeconds"]) == (False, 30)

    patched = owner.client.patch(
        f"/public/v1/agents/{agent_id}",
        {"expectedUpdatedAt": item["updatedAt"], "maxDurationSeconds": 14400, "endCallEnabled": True},
        format="json",
    )
    assert patched.status_code == 200, patched.json()
    item = listed(owner, agent_id)
    assert (item["endCallEnabled"], item["maxDurationSeconds"]) == (True, 14400)

    # A PUT without them puts the defaults back (like every other field).
    put = owner.client.put(f"/public/v1/agents/{agent_id}", {**BASE, "endCallEnabled": False}, format="json")
    assert put.status_code == 200, put.json()
    item = listed(owner, agent_id)
    assert (item["endCallEnabled"], item["maxDurationSeconds"]) == (False, 1800)


@pytest.mark.parametrize(
    ("fields", "issue"),
    [
        ({"maxDurationSeconds": 29}, "maxDurationSeconds"),
        ({"maxDurationSeconds": 14401}, "maxDurationSeconds"),
        ({"maxDurationSeconds": 0}, "maxDurationSeconds"),
        ({"maxDurationSeconds": -5}, "maxDurationSeconds"),
        ({"maxDurationSeconds": "600"}, "maxDurationSeconds"),
        ({"maxDurationSeconds": 600.5}, "maxDurationSeconds"),
        ({"maxDurationSeconds": True}, "maxDurationSeconds"),
        ({"maxDurationSeconds": None}, "maxDurationSeconds"),
        ({"maxDurationSeconds": 10**30}, "maxDurationSeconds"),
        ({"endCallEnabled": "yes"}, "endCallEnabled"),
        ({"endCallEnabled": 1}, "endCallEnabled"),
        ({"endCallEnabled": None}, "endCallEnabled"),
    ],
)
def test_invalid_values_are_400_with_the_field_named(owner, fields, issue):
    response = create(owner, **fields)
    assert response.status_code == 400
    assert issue in response.json()["issues"], response.json()
    assert not Agent.objects.exists()


def test_an_invalid_patch_is_400_and_changes_nothing(owner):
    agent_id = create(owner, maxDurationSeconds=600).json()["id"]
    item = listed(owner, agent_id)
    response = owner.client.patch(
        f"/public/v1/agents/{agent_id}",
        {"expectedUpdatedAt": item["updatedAt"], "maxDurationSeconds": 20},
        format="json",
    )
    assert response.status_code == 400
    assert "maxDurationSeconds" in response.json()["issues"]
    assert listed(owner, agent_id)["maxDurationSeconds"] == 600
