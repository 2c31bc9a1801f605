"""Agent.keypad through the public API: the default, a partial object normalized, PATCH, and 400s."""

from __future__ import annotations

import pytest

from agents.models import Agent

BASE = {"name": "Support", "instructions": "Help callers with their orders."}
DEFAULT = {"enabled": True, "timeoutMs": 2000, "terminator": "#"}


def create(persona, **fields):
    return persona.client.post("/public/v1/agents", {**BASE, **fields}, format="json")


def detail(persona, agent_id):
    response = persona.client.get(f"/public/v1/agents/{agent_id}")
    assert response.status_code == 200
    return response.json()


def test_a_new_agent_gathers_keys_until_two_seconds_or_hash(owner):
    response = create(owner)
    assert response.status_code == 200, response.json()
    agent_id = response.json()["id"]
    assert detail(owner, agent_id)["keypad"] == DEFAULT
    listed = {item["id"]: item for item in owner.client.get("/public/v1/agents").json()}
    assert listed[agent_id]["keypad"] == DEFAULT


def test_a_partial_keypad_is_stored_normalized_and_a_patch_replaces_it(owner):
    agent_id = create(owner, keypad={"timeoutMs": 3500, "terminator": "*"}).json()["id"]
    assert detail(owner, agent_id)["keypad"] == {"enabled": True, "timeoutMs": 3500, "terminator": "*"}
    expected = detail(owner, agent_id)["updatedAt"]
    response = owner.client.patch(
        f"/public/v1/agents/{agent_id}",
        {"keypad": {"enabled": False, "terminator": ""}, "expectedUpdatedAt": expected},
        format="json",
    )
    assert response.status_code == 200, response.json()
    stored = {"enabled": False, "timeoutMs": 2000, "terminator": ""}
    assert detail(owner, agent_id)["keypad"] == stored
    assert Agent.objects.get(pk=agent_id).keypad == stored
    # A PUT without keypad goes back to the default.
    response = owner.client.put(f"/public/v1/agents/{agent_id}", BASE, format="json")
    assert response.status_code == 200, response.json()
    assert detail(owner, agent_id)["keypad"] == DEFAULT


@pytest.mark.parametrize(
    ("keypad", "message"),
    [
        ("on", "Must be a JSON object"),
        ({"enabled": "yes"}, "enabled: must be true or false."),
        ({"timeoutMs": 100}, "timeoutMs: must be a whole number of milliseconds from 500 to 10000."),
        ({"timeoutMs": 10001}, "timeoutMs: must be a whole number of milliseconds from 500 to 10000."),
        ({"timeoutMs": 1500.5}, "timeoutMs: must be a whole number of milliseconds from 500 to 10000."),
        ({"timeoutMs": True}, "timeoutMs: must be a whole number of milliseconds from 500 to 10000."),
        ({"terminator": "1"}, 'terminator: must be "#", "*" or "" (no terminator).'),
        ({"terminator": None}, 'terminator: must be "#", "*" or "" (no terminator).'),
        ({"digits": 4}, "Unknown key 'digits'"),
    ],
)
def test_a_bad_keypad_is_a_400_naming_the_key(owner, keypad, message):
    response = create(owner, keypad=keypad)
    assert response.status_code == 400
    body = response.json()
    assert message in body["issues"]["keypad"][0], body
    assert not Agent.objects.exists()


def test_a_whole_float_timeout_is_taken_as_a_whole_number(owner):
    agent_id = create(owner, keypad={"timeoutMs": 1500.0}).json()["id"]
    assert detail(owner, agent_id)["keypad"]["timeoutMs"] == 1500
