"""Agent.transfer (how transfer_call passes the caller to a person) through the public API and the dashboard's
agent form: the default, a partial setting filled with defaults and stored normalized, 400s naming the key
inside the setting (nothing stored), PATCH keeping or replacing it, the list item showing it, and the form's
structured fields and JSON box saving through the same service."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from agents.models import Agent
from kit.fields import iso
from testing import agent_api
from testing.dashboard import edit_form, errors, page_form

BASE = {"name": "Front desk", "instructions": "Answer questions about the store."}
DEFAULT = {"mode": "cold", "briefing": "summary", "message": "", "ringTimeoutSeconds": 30}
BRIEFING = "A caller about order {{order_id}}: they want a refund."


def create(persona, **fields):
    return agent_api.created(persona, {**BASE, **fields})


detail = agent_api.read


listed = agent_api.listed


patch = agent_api.patched


def test_a_new_agent_transfers_cold_and_the_list_item_shows_it(owner):
    agent_id = create(owner)
    assert detail(owner, agent_id)["transfer"] == DEFAULT
    assert listed(owner, agent_id)["transfer"] == DEFAULT
    assert Agent.objects.get(pk=agent_id).transfer == DEFAULT


def test_a_partial_setting_is_stored_normalized_with_every_key(owner):
    sent = {"mode": "warm", "briefing": "static", "message": f"  {BRIEFING}\n", "ringTimeoutSeconds": 45.0}
    agent_id = create(owner, transfer=sent)
    stored = {"mode": "warm", "briefing": "static", "message": BRIEFING, "ringTimeoutSeconds": 45}
    assert detail(owner, agent_id)["transfer"] == stored
    assert listed(owner, agent_id)["transfer"] == stored
    row = Agent.objects.get(pk=agent_id).transfer
    assert row == stored and isinstance(row["ringTimeoutSeconds"], int)

    # Only the mode: the other keys take their defaults.
    other = create(owner, name="Billing", transfer={"mode": "warm"})
    assert detail(owner, other)["transfer"] == {**DEFAULT, "mode": "warm"}
    assert Agent.objects.get(pk=other).transfer == {**DEFAULT, "mode": "warm"}


@pytest.mark.parametrize(
    "setting",
    [
        {"ringTimeoutSeconds": 5},
        {"ringTimeoutSeconds": 120},
        {"briefing": "static", "message": "x" * 1000},
        {"message": ""},  # a summary briefing needs no message
        {},
    ],
)
def test_the_bounds_are_allowed(owner, setting):
    agent_id = create(owner, transfer=setting)
    assert detail(owner, agent_id)["transfer"] == {**DEFAULT, **setting}


@pytest.mark.parametrize(
    ("setting", "field", "says"),
    [
        ("warm", "transfer", "Must be a JSON object with mode, briefing, message and ringTimeoutSeconds."),
        (None, "transfer", "This field may not be null."),
        ({"mode": "hot"}, "transfer.mode", "Must be one of cold, warm, not 'hot'."),
        ({"mode": None}, "transfer.mode", "Must be one of cold, warm, not None."),
        ({"briefing": "transcript"}, "transfer.briefing", "Must be one of summary, static, not 'transcript'."),
        ({"briefing": 1}, "transfer.briefing", "Must be one of summary, static, not 1."),
        ({"message": None}, "transfer.message", "Must be a string, not None."),
        ({"message": ["hello"]}, "transfer.message", "Must be a string, not ['hello']."),
        ({"message": "x" * 1001}, "transfer.message", "At most 1000 characters (this one has 1001)."),
        ({"briefing": "static"}, "transfer.message", 'Required when briefing is "static"'),
        ({"mode": "warm", "briefing": "static", "message": " \n "}, "transfer.message", "Required when briefing"),
        ({"ringTimeoutSeconds": 4}, "transfer.ringTimeoutSeconds", "whole number of seconds from 5 to 120, not 4."),
        ({"ringTimeoutSeconds": 121}, "transfer.ringTimeoutSeconds", "from 5 to 120, not 121."),
        ({"ringTimeoutSeconds": 30.5}, "transfer.ringTimeoutSeconds", "from 5 to 120, not 30.5."),
        ({"ringTimeoutSeconds": True}, "transfer.ringTimeoutSeconds", "from 5 to 120, not True."),
        ({"ringTimeoutSeconds": "30"}, "transfer.ringTimeoutSeconds", "from 5 to 120, not '30'."),
        ({"ringTimeoutSeconds": None}, "transfer.ringTimeoutSeconds", "from 5 to 120, not None."),
        ({"mode": "warm", "timeout": 30}, "transfer.timeout", "Unknown key; the keys are mode, briefing, message"),
    ],
)
def test_a_bad_setting_is_a_400_naming_the_key(owner, setting, field, says):
    response = owner.client.post("/public/v1/agents", {**BASE, "transfer": setting}, format="json")
    assert response.status_code == 400, response.json()
    body = response.json()
    assert says in body["issues"][field][0], body
    assert body["error"].startswith(f"Invalid request: {field}: "), body
    assert not Agent.objects.exists()


def test_a_message_that_cannot_be_stored_is_a_400_naming_it(owner):
    # The body's parser refuses NUL (and lone surrogates) anywhere, naming the place.
    response = owner.client.post("/public/v1/agents", {**BASE, "transfer": {"message": "a\x00b"}}, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["issues"]["transfer.message"] == ["Must not contain the NUL character (\\u0000)."]
    assert not Agent.objects.exists()


def test_a_patch_keeps_the_setting_or_replaces_it(owner):
    warm = {"mode": "warm", "briefing": "static", "message": BRIEFING, "ringTimeoutSeconds": 20}
    agent_id = create(owner, transfer=warm)

    # A PATCH without the field keeps it.
    response = patch(owner, agent_id, name="Front desk (day)")
    assert response.status_code == 200, response.json()
    assert detail(owner, agent_id)["transfer"] == warm

    # A PATCH with it replaces the whole setting: a key left out takes its default.
    response = patch(owner, agent_id, transfer={"mode": "warm", "ringTimeoutSeconds": 60})
    assert response.status_code == 200, response.json()
    assert detail(owner, agent_id)["transfer"] == {**DEFAULT, "mode": "warm", "ringTimeoutSeconds": 60}
    assert listed(owner, agent_id)["transfer"] == {**DEFAULT, "mode": "warm", "ringTimeoutSeconds": 60}

    # A bad one changes nothing.
    response = patch(owner, agent_id, transfer={"briefing": "static", "message": ""})
    assert response.status_code == 400
    assert response.json()["issues"]["transfer.message"][0].startswith('Required when briefing is "static"')
    assert detail(owner, agent_id)["transfer"] == {**DEFAULT, "mode": "warm", "ringTimeoutSeconds": 60}

    # A PUT without the field puts the default back.
    response = owner.client.put(f"/public/v1/agents/{agent_id}", BASE, format="json")
    assert response.status_code == 200, response.json()
    assert detail(owner, agent_id)["transfer"] == DEFAULT


def test_the_openapi_document_describes_the_setting(owner):
    document = owner.client.get("/public/v1/openapi.json").json()
    schemas = document["components"]["schemas"]
    for schema in ("AgentWriteRequest", "PatchedAgentPatchRequest"):
        setting = schemas[schema]["properties"]["transfer"]
        assert setting["additionalProperties"] is False
        assert setting["properties"]["mode"]["enum"] == ["cold", "warm"]
        assert setting["properties"]["briefing"]["enum"] == ["summary", "static"]
        assert setting["properties"]["message"]["maxLength"] == 1000
        ring = setting["properties"]["ringTimeoutSeconds"]
        assert (ring["type"], ring["minimum"], ring["maximum"]) == ("integer", 5, 120)
        assert setting["then"]["required"] == ["message"]
    item = schemas["AgentListItem"]["properties"]["transfer"]
    shown = schemas[item["$ref"].rsplit("/", 1)[1]] if "$ref" in item else item
    assert set(shown["properties"]) == set(DEFAULT) and set(shown["required"]) == set(DEFAULT)


# --- the dashboard's agent form ----------------------------------------------------------------------


def field_errors(page: str, field: str) -> list[str]:
    """The messages shown on one field of the page (its row's error list)."""
    start = page.find(f'field-{field}"')
    assert start != -1, f"no field {field} on the page"
    row = page[page.rfind("<div", 0, start) : page.find("</div>", start)]
    return errors(row)


def api_message(owner: Any, agent: Agent, body: dict[str, Any]) -> list[str]:
    """What the API answers to the same value (its issues, as the form shows them)."""
    agent.refresh_from_db()
    body = {**body, "expectedUpdatedAt": iso(agent.updated_at)}
    response = owner.client.patch(f"/public/v1/agents/{agent.pk}", body, format="json")
    assert response.status_code == 400, response.content
    return [message for messages in response.json()["issues"].values() for message in messages]


def test_the_form_fields_save_the_setting_and_show_the_apis_message(
    staff_client: Client, owner: Any, make_agent: Any
) -> None:
    agent = make_agent(owner.organization, name="Ava")
    url = f"/admin/agents/agent/{agent.pk}/change/"
    page = staff_client.get(url).content.decode()
    assert "Transfer to a person" in page
    shown = page_form(page)
    assert (shown["transfer_mode"], shown["transfer_briefing"], shown["transfer_ring_timeout_seconds"]) == (
        "cold",
        "summary",
        "30",
    )

    fields = {"transfer_editor": "form", "transfer_mode": "warm", "transfer_briefing": "static"}
    # The static briefing without a message: the API's message on the message's field, nothing saved.
    response = staff_client.post(url, edit_form(agent, **fields, transfer_message="  "))
    assert response.status_code == 200
    shown_errors = field_errors(response.content.decode(), "transfer_message")
    assert shown_errors == api_message(owner, agent, {"transfer": {"briefing": "static", "message": "  "}})
    assert shown_errors == ['Required when briefing is "static" (what the person hears before taking the call).']

    # A ring time out of bounds: on the ring time's field.
    response = staff_client.post(
        url, edit_form(agent, **fields, transfer_message=BRIEFING, transfer_ring_timeout_seconds="200")
    )
    assert response.status_code == 200
    shown_errors = field_errors(response.content.decode(), "transfer_ring_timeout_seconds")
    assert shown_errors == api_message(owner, agent, {"transfer": {"ringTimeoutSeconds": 200}})
    assert shown_errors == ["Must be a whole number of seconds from 5 to 120, not 200."]
    agent.refresh_from_db()
    assert agent.transfer == DEFAULT

    response = staff_client.post(
        url, edit_form(agent, **fields, transfer_message=f" {BRIEFING} ", transfer_ring_timeout_seconds="45")
    )
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.transfer == {"mode": "warm", "briefing": "static", "message": BRIEFING, "ringTimeoutSeconds": 45}

    # The ring time left blank takes its default.
    response = staff_client.post(url, edit_form(agent, **fields, transfer_message=BRIEFING))
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.transfer == {"mode": "warm", "briefing": "static", "message": BRIEFING, "ringTimeoutSeconds": 30}

    # The page shows the saved setting: posted back unchanged, nothing changes.
    shown = page_form(staff_client.get(url).content.decode())
    assert (shown["transfer_mode"], shown["transfer_message"]) == ("warm", BRIEFING)
    assert json.loads(shown["transfer"]) == agent.transfer
    response = staff_client.post(url, shown)
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.transfer == {"mode": "warm", "briefing": "static", "message": BRIEFING, "ringTimeoutSeconds": 30}


def test_the_json_box_saves_the_setting_shows_an_error_and_blank_keeps_it(
    staff_client: Client, owner: Any, make_agent: Any
) -> None:
    agent = make_agent(owner.organization, name="Ava")
    url = f"/admin/agents/agent/{agent.pk}/change/"

    response = staff_client.post(url, edit_form(agent, transfer=json.dumps({"mode": "warm", "ringTimeoutSeconds": 2})))
    assert response.status_code == 200
    assert any(
        "Must be a whole number of seconds from 5 to 120, not 2." in e for e in errors(response.content.decode())
    )
    agent.refresh_from_db()
    assert agent.transfer == DEFAULT

    response = staff_client.post(url, edit_form(agent, transfer=json.dumps({"mode": "warm"})))
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.transfer == {**DEFAULT, "mode": "warm"}

    # Left blank (or not on the page): the stored setting stays.
    for blank in ({"transfer": ""}, {}):
        response = staff_client.post(url, edit_form(agent, **blank))
        assert response.status_code == 302, errors(response.content.decode())
        agent.refresh_from_db()
        assert agent.transfer == {**DEFAULT, "mode": "warm"}
