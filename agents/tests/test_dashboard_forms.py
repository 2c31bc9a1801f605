"""The agent page's structured editors (agents/dashboard_forms.py) through the dashboard's URLs: the analysis
plan, voicemail and interruption settings each save from real fields through the API's service, a bad value
shows the API's own message on the field it concerns, and the JSON editor round-trips with the form (the
page's fields, posted back unchanged with either editor, leave the stored setting as it was)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from agents.models import Agent
from kit.fields import iso
from testing.dashboard import edit_form, errors, page_form

pytestmark = pytest.mark.django_db

BOOKING = {
    "type": "object",
    "properties": {
        "date": {"type": "string", "description": "The day the caller asked for"},
        "people": {"type": "integer", "description": "How many people"},
    },
    "required": ["date"],
}
NESTED = {
    "type": "object",
    "properties": {
        "items": {"type": "array", "items": {"type": "string"}, "description": "What the caller ordered"},
    },
}


def field_errors(page: str, field: str) -> list[str]:
    """The messages shown on one field of the page (its row's error list)."""
    start = page.find(f'field-{field}"')
    assert start != -1, f"no field {field} on the page"
    row = page[page.rfind("<div", 0, start) : page.find("</div>", start)]
    return errors(row)


@pytest.fixture
def agent(owner: Any, make_agent: Any) -> Agent:
    return make_agent(owner.organization, name="Ava")


@pytest.fixture
def url(agent: Agent) -> str:
    return f"/admin/agents/agent/{agent.pk}/change/"


def api_message(owner: Any, agent: Agent, body: dict[str, Any]) -> list[str]:
    """What the API answers to the same value (its issues, as the form shows them)."""
    agent.refresh_from_db()
    body = {**body, "expectedUpdatedAt": iso(agent.updated_at)}
    response = owner.client.patch(f"/public/v1/agents/{agent.pk}", body, format="json")
    assert response.status_code == 400, response.content
    return [message for messages in response.json()["issues"].values() for message in messages]


def plan_form(agent: Agent, **changes: Any) -> dict[str, Any]:
    base = {
        "analysis_plan_editor": "form",
        "plan_summary_enabled": "on",
        "plan_summary_prompt": "",
        "plan_structured_prompt": "",
        "plan_success_rubric": "",
        "plan_success_scale": "pass-fail",
    }
    return edit_form(agent, **{**base, **changes})


def test_the_analysis_plan_form_saves_through_the_service(staff_client: Client, agent: Agent, url: str) -> None:
    page = staff_client.get(url).content.decode()
    assert 'name="plan_summary_enabled"' in page and 'name="plan_structured_fields-0-name"' in page
    assert "agents/structured-forms.js" in page  # the toggle and the rows' script: a file (the CSP allows no inline)

    response = staff_client.post(
        url,
        plan_form(
            agent,
            plan_summary_enabled="",
            plan_structured_enabled="on",
            **{
                "plan_structured_fields-0-name": "date",
                "plan_structured_fields-0-type": "string",
                "plan_structured_fields-0-description": "The day the caller asked for",
                "plan_structured_fields-0-required": "on",
                "plan_structured_fields-1-name": "people",
                "plan_structured_fields-1-type": "integer",
                "plan_structured_fields-1-description": "How many people",
                "plan_structured_fields-2-name": "",  # the blank row the page offers
                "plan_structured_fields-2-type": "string",
            },
            plan_success_enabled="on",
            plan_success_rubric="The caller booked a table.",
            plan_success_scale="1-10",
        ),
    )
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.analysis_plan == {
        "summary": {"enabled": False, "prompt": None},
        "structuredData": {"enabled": True, "schema": BOOKING, "prompt": None},
        "successEvaluation": {"enabled": True, "rubric": "The caller booked a table.", "scale": "1-10"},
    }


def test_a_bad_plan_shows_the_apis_message_on_its_field(
    staff_client: Client, owner: Any, agent: Agent, url: str
) -> None:
    response = staff_client.post(url, plan_form(agent, plan_structured_enabled="on"))
    assert response.status_code == 200
    shown = field_errors(response.content.decode(), "plan_structured_fields")
    assert shown == ["structuredData.schema: required when structuredData is enabled."]
    assert shown == api_message(owner, agent, {"analysisPlan": {"structuredData": {"enabled": True}}})

    no_description = {"plan_structured_fields-0-name": "date", "plan_structured_fields-0-type": "string"}
    response = staff_client.post(url, plan_form(agent, plan_structured_enabled="on", **no_description))
    shown = field_errors(response.content.decode(), "plan_structured_fields")
    schema = {"type": "object", "properties": {"date": {"type": "string", "description": ""}}}
    assert shown == api_message(owner, agent, {"analysisPlan": {"structuredData": {"schema": schema}}})
    assert "property 'date' needs a description" in shown[0]

    response = staff_client.post(url, plan_form(agent, plan_success_enabled="on"))
    shown = field_errors(response.content.decode(), "plan_success_rubric")
    assert shown == ["successEvaluation.rubric: required when successEvaluation is enabled."]
    agent.refresh_from_db()
    assert agent.analysis_plan["structuredData"]["enabled"] is False  # nothing was saved


def test_the_voicemail_form_saves_and_shows_the_apis_message(
    staff_client: Client, owner: Any, agent: Agent, url: str
) -> None:
    fields = {"voicemail_editor": "form", "voicemail_detection": "provider", "voicemail_action": "leave-message"}
    response = staff_client.post(url, edit_form(agent, **fields, voicemail_message=""))
    assert response.status_code == 200
    shown = field_errors(response.content.decode(), "voicemail_message")
    assert shown == api_message(owner, agent, {"voicemail": {"detection": "provider", "action": "leave-message"}})
    assert shown == ["message: required when action is leave-message (what the agent says after the beep)."]

    message = "Hi {{name}}, this is Ava from Acme: please call us back."
    response = staff_client.post(url, edit_form(agent, **fields, voicemail_message=message))
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.voicemail == {"detection": "provider", "action": "leave-message", "message": message}


def test_the_interruption_form_saves_and_shows_the_apis_message(
    staff_client: Client, owner: Any, agent: Agent, url: str
) -> None:
    fields = {"interruption_editor": "form", "interruption_mode": "vad", "interruption_resume_after_ms": "600"}
    response = staff_client.post(url, edit_form(agent, **fields, interruption_min_words="7"))
    assert response.status_code == 200
    shown = field_errors(response.content.decode(), "interruption_min_words")
    assert shown == api_message(owner, agent, {"interruption": {"minWords": 7}})
    assert shown == ["Must be a whole number of words from 0 to 5, not 7."]

    too_long = "x" * 41
    response = staff_client.post(
        url, edit_form(agent, **fields, interruption_min_words="2", interruption_backchannels=f"okay\n{too_long}")
    )
    shown = field_errors(response.content.decode(), "interruption_backchannels")
    assert shown == api_message(owner, agent, {"interruption": {"backchannels": ["okay", too_long]}})

    response = staff_client.post(
        url, edit_form(agent, **fields, interruption_min_words="2", interruption_backchannels="okay\n right \n\nokay")
    )
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.interruption == {"mode": "vad", "minWords": 2, "backchannels": ["okay", "right"], "resumeAfterMs": 600}

    # The language's own list again: backchannels null.
    response = staff_client.post(
        url,
        edit_form(agent, **fields, interruption_min_words="2", interruption_default_backchannels="on"),
    )
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.interruption["backchannels"] is None


def test_the_json_editor_round_trips_with_the_form(staff_client: Client, agent: Agent, url: str) -> None:
    plan = {
        "summary": {"enabled": True, "prompt": "Two sentences."},
        "structuredData": {"enabled": True, "schema": BOOKING, "prompt": "Dates as YYYY-MM-DD."},
        "successEvaluation": {"enabled": True, "rubric": "A table was booked.", "scale": "pass-fail"},
    }
    voicemail = {"detection": "provider", "action": "leave-message", "message": "Please call back."}
    interruption = {"mode": "adaptive", "minWords": 3, "backchannels": ["okay", "I see"], "resumeAfterMs": 250}
    json_edit = {
        "analysis_plan_editor": "json",
        "voicemail_editor": "json",
        "interruption_editor": "json",
        "analysis_plan": json.dumps(plan),
        "voicemail": json.dumps(voicemail),
        "interruption": json.dumps(interruption),
    }
    response = staff_client.post(url, edit_form(agent, **json_edit))
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    stored = (agent.analysis_plan, agent.voicemail, agent.interruption)
    assert stored == (plan, voicemail, interruption)

    # The form shows every value saved as JSON: posted back with the form editors, nothing changes.
    shown = page_form(staff_client.get(url).content.decode())
    assert shown["analysis_plan_editor"] == "form"
    assert shown["plan_structured_fields-1-name"] == "people" and shown["plan_structured_fields-0-required"] == "on"
    assert shown["interruption_backchannels"] == "okay\nI see" and shown["voicemail_message"] == "Please call back."
    response = staff_client.post(url, shown)
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert (agent.analysis_plan, agent.voicemail, agent.interruption) == stored

    # And the JSON boxes show what the form saved: posted back as JSON, nothing changes either.
    shown = page_form(staff_client.get(url).content.decode())
    assert json.loads(shown["analysis_plan"]) == plan and json.loads(shown["interruption"]) == interruption
    shown.update(analysis_plan_editor="json", voicemail_editor="json", interruption_editor="json")
    response = staff_client.post(url, shown)
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert (agent.analysis_plan, agent.voicemail, agent.interruption) == stored


def test_a_schema_the_table_cannot_show_opens_as_json_and_is_kept(staff_client: Client, agent: Agent, url: str) -> None:
    plan = {"structuredData": {"enabled": True, "schema": NESTED}}
    response = staff_client.post(url, edit_form(agent, analysis_plan_editor="json", analysis_plan=json.dumps(plan)))
    assert response.status_code == 302, errors(response.content.decode())
    shown = page_form(staff_client.get(url).content.decode())
    assert shown["analysis_plan_editor"] == "json"  # the table would lose the list's items: JSON first
    assert not shown.get("plan_structured_fields-0-name")

    # Saved with the form anyway (another part changed, no row typed): the schema stays as stored.
    shown.update(analysis_plan_editor="form", plan_summary_prompt="One sentence.")
    response = staff_client.post(url, shown)
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert agent.analysis_plan["structuredData"]["schema"] == NESTED
    assert agent.analysis_plan["summary"]["prompt"] == "One sentence."


def test_a_new_agent_is_created_with_the_structured_fields(staff_client: Client, owner: Any) -> None:
    from testing.dashboard import NEW_AGENT

    page = staff_client.get("/admin/agents/agent/add/").content.decode()
    shown = page_form(page)
    assert shown["plan_summary_enabled"] == "on" and shown["voicemail_detection"] == "off"  # the defaults
    body = {
        **NEW_AGENT,
        "organization": str(owner.organization.pk),
        "voicemail_editor": "form",
        "voicemail_detection": "provider",
        "voicemail_action": "hang-up",
        "voicemail_message": "",
    }
    response = staff_client.post("/admin/agents/agent/add/", body)
    assert response.status_code == 302, errors(response.content.decode())
    created = Agent.objects.get(name="Ava", organization=owner.organization)
    assert created.voicemail == {"detection": "provider", "action": "hang-up", "message": ""}
