"""Staff create and edit agents in the dashboard through the API's services: a valid form saves, every
refused value is shown on the form and nothing is saved, a stale edit shows the current values. The agent
page lists its tools, MCP tool selections, documents, numbers and latest calls; numbers are assigned with
their own handoff number and MCP tools chosen from the agent page; agents are activated there or from the
list."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from agents.models import Agent, AgentTool, McpServer, McpToolSelection
from calls import services as calls_services
from knowledge.models import KnowledgeDocument
from telephony.models import PhoneNumber
from telephony.services.numbers import phone_number_claim
from testing.dashboard import NEW_AGENT, edit_form, errors, hidden_value

pytestmark = pytest.mark.django_db

ADD = "/admin/agents/agent/add/"


def change_url(agent: Agent) -> str:
    return f"/admin/agents/agent/{agent.pk}/change/"


# --- creating -------------------------------------------------------------------------------------


def test_a_new_agent_is_saved_as_a_draft_with_its_settings(staff_client: Client, owner: Any) -> None:
    response = staff_client.post(
        ADD,
        {
            **NEW_AGENT,
            "organization": str(owner.organization.pk),
            "status": "active",  # not on the form: a new agent is always a draft, as with the API
            "greeting_type": "static",
            "static_greeting": "Hello, this is Ava.",
            "language": "es-ES",
            "voice_name": "rex",
            "ai_identity_disclosure_template_id": "named_agent",
            "server_url": "https://hooks.example.com/agent",
            "new_server_headers": "X-Api-Key: key-4Rt7Wp2Nc6\nX-Tenant: acme",
            "new_server_secret": "whsec-Kq7Zr2Wm9Tx4",
            "handoff_phone_number": "+14155550123",
        },
    )

    assert response.status_code == 302, errors(response.content.decode())
    agent = Agent.objects.get()
    assert response["Location"] == change_url(agent)
    assert (agent.organization, agent.name, agent.status) == (owner.organization, "Ava", "draft")
    assert (agent.language, agent.voice_name, agent.ai_identity_disclosure_template_id) == (
        "es-ES",
        "rex",
        "named_agent",
    )
    assert (agent.greeting_type, agent.static_greeting) == ("static", "Hello, this is Ava.")
    assert agent.server_headers == {"X-Api-Key": "key-4Rt7Wp2Nc6", "X-Tenant": "acme"}
    assert agent.server_secret == "whsec-Kq7Zr2Wm9Tx4"
    assert agent.handoff_phone_number == "+14155550123"
    # The API reads it back as it was entered.
    item = owner.client.get(f"/public/v1/agents/{agent.pk}").json()
    assert item["staticGreeting"] == "Hello, this is Ava." and item["status"] == "draft"


def test_the_new_agent_form_picks_the_organization_by_name(staff_client: Client, owner: Any) -> None:
    page = staff_client.get(ADD).content.decode()
    assert 'class="admin-autocomplete' in page  # a searchable select, not a UUID box
    found = staff_client.get(
        "/admin/autocomplete/",
        {"term": "Acm", "app_label": "agents", "model_name": "agent", "field_name": "organization"},
    ).json()
    assert [item["text"] for item in found["results"]] == ["Acme"]
    for label in ("AI identity disclosure", "Ambient sound volume", "Instructions (prompt)", "Server URL"):
        assert label in page


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"handoff_phone_number": "555-0123"}, "handoff_phone_number", "E.164"),
        ({"server_url": "ftp://hooks.example.com/agent"}, "server_url", "Only http and https URLs are allowed."),
        ({"server_url": "https://user:pw@hooks.example.com/"}, "server_url", "Credentials in the URL are not allowed"),
        ({"instructions": "   "}, "instructions", "Required when promptType is static."),
        ({"language": "english"}, "language", "Must be a language tag"),
        (
            {"greeting_type": "static", "static_greeting": ""},
            "static_greeting",
            "Required when greetingType is static.",
        ),
        ({"prompt_type": "dynamic"}, "server_url", "A dynamic prompt requires serverUrl."),
        ({"agent_type": "static", "server_url": "https://hooks.example.com/"}, "server_url", "must be null"),
        ({"new_server_headers": "no colon here"}, "new_server_headers", "Write each header as 'Name: value'"),
        ({"new_server_headers": "Host: evil.example"}, "new_server_headers", "set by the service"),
        ({"ambient_sound_volume": "1.5"}, "ambient_sound_volume", "less than or equal to 1"),
        ({"max_duration_seconds": "20"}, "max_duration_seconds", "greater than or equal to 30"),
    ],
)
def test_a_refused_value_is_shown_on_the_form_and_nothing_is_saved(
    staff_client: Client, owner: Any, changes: dict[str, str], field: str, message: str
) -> None:
    response = staff_client.post(ADD, {**NEW_AGENT, "organization": str(owner.organization.pk), **changes})

    assert response.status_code == 200
    page = response.content.decode()
    assert any(message in error for error in errors(page)), errors(page)
    assert f"errors field-{field}" in page  # on its own field
    assert Agent.objects.count() == 0


def test_an_ambient_sound_beyond_the_plan_is_refused_on_its_field(staff_client: Client, make_persona: Any) -> None:
    launch = make_persona("Tiny", "launch")

    response = staff_client.post(
        ADD, {**NEW_AGENT, "organization": str(launch.organization.pk), "ambient_sound": "office1"}
    )

    assert response.status_code == 200
    page = response.content.decode()
    assert "Ambient sounds are available on the Studio and Agency plans" in page
    assert "errors field-ambient_sound" in page
    assert Agent.objects.count() == 0


# --- editing --------------------------------------------------------------------------------------


def test_an_edit_saves_through_the_service_and_keeps_write_only_secrets(
    staff_client: Client, owner: Any, make_agent: Any
) -> None:
    agent = make_agent(
        owner.organization,
        server_url="https://hooks.example.com/agent",
        server_headers={"Authorization": "Bearer sk-live-Zq8LmT3vX9"},
        server_secret="whsec-Kq7Zr2Wm9Tx4",
    )
    page = staff_client.get(change_url(agent)).content.decode()
    assert "sk-live-Zq8LmT3vX9" not in page and "whsec-Kq7Zr2Wm9Tx4" not in page
    assert "Authorization: (hidden)" in page and "set (hidden)" in page
    stamp = hidden_value(page, "expected_updated_at")

    form = edit_form(agent, name="Ava", instructions="Answer questions about orders.", expected_updated_at=stamp)
    response = staff_client.post(change_url(agent), form)

    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert (agent.name, agent.instructions) == ("Ava", "Answer questions about orders.")
    assert agent.server_headers == {"Authorization": "Bearer sk-live-Zq8LmT3vX9"}  # blank: kept
    assert agent.server_secret == "whsec-Kq7Zr2Wm9Tx4"
    assert agent.updated_at.isoformat() > stamp.replace("Z", "+00:00")  # the service moved updatedAt

    form = edit_form(agent, clear_server_headers="on", clear_server_secret="on")
    assert staff_client.post(change_url(agent), form).status_code == 302
    agent.refresh_from_db()
    assert (agent.server_headers, agent.server_secret) == ({}, None)


def test_a_stale_edit_says_so_and_shows_the_current_values(staff_client: Client, owner: Any, make_agent: Any) -> None:
    agent = make_agent(owner.organization, name="Support")
    stamp = hidden_value(staff_client.get(change_url(agent)).content.decode(), "expected_updated_at")
    # Meanwhile someone changes the agent through the API.
    api = owner.client.patch(
        f"/public/v1/agents/{agent.pk}",
        {"expectedUpdatedAt": stamp, "name": "Orders desk", "voiceName": "sal"},
        format="json",
    )
    assert api.status_code == 200

    response = staff_client.post(change_url(agent), edit_form(agent, name="Help desk", expected_updated_at=stamp))

    assert response.status_code == 200
    page = response.content.decode()
    assert any("Someone else saved this agent after you opened it; nothing was saved" in e for e in errors(page))
    assert "Your values differ in: Name, Voice" in page
    assert 'name="name" value="Orders desk"' in page
    assert '<option value="sal" selected>' in page
    agent.refresh_from_db()
    assert (agent.name, agent.voice_name) == ("Orders desk", "sal")
    current = hidden_value(page, "expected_updated_at")
    assert current == api.json()["updatedAt"]

    # Saving again from the refreshed form goes through.
    again = staff_client.post(change_url(agent), edit_form(agent, name="Help desk", expected_updated_at=current))
    assert again.status_code == 302
    agent.refresh_from_db()
    assert agent.name == "Help desk"


def test_activation_beyond_the_plan_allowance_is_refused_on_the_form(
    staff_client: Client, make_persona: Any, make_agent: Any
) -> None:
    launch = make_persona("Tiny", "launch")  # two active agents
    for name in ("One", "Two"):
        make_agent(launch.organization, name=name, status="active")
    third = make_agent(launch.organization, name="Three")

    response = staff_client.post(change_url(third), edit_form(third, status="active"))

    assert response.status_code == 200
    page = response.content.decode()
    assert "exceed the Launch plan&#x27;s allowance of 2 active agents" in page
    assert "errors field-status" in page
    third.refresh_from_db()
    assert third.status == "draft"


def test_the_list_actions_activate_and_deactivate_through_the_plan_rules(
    staff_client: Client, make_persona: Any, make_agent: Any
) -> None:
    launch = make_persona("Tiny", "launch")
    agents = [make_agent(launch.organization, name=name) for name in ("One", "Two", "Three")]

    response = staff_client.post(
        "/admin/agents/agent/", {"action": "activate", "_selected_action": [str(a.pk) for a in agents]}, follow=True
    )

    page = response.content.decode()
    assert "Now active: One, Two." in page
    assert "Three: not active: Activating this agent would exceed the Launch plan" in page
    assert [a.status for a in Agent.objects.order_by("created_at")] == ["active", "active", "draft"]

    staff_client.post("/admin/agents/agent/", {"action": "deactivate", "_selected_action": [str(agents[0].pk)]})
    agents[0].refresh_from_db()
    assert agents[0].status == "inactive"


def test_a_tool_rule_of_the_agent_type_is_refused_on_the_form(
    staff_client: Client, owner: Any, make_agent: Any
) -> None:
    agent = make_agent(owner.organization, server_url="https://hooks.example.com/agent")
    AgentTool.objects.create(agent=agent, name="order_status", parameter_schema={"type": "object"})

    response = staff_client.post(change_url(agent), edit_form(agent, agent_type="static", server_url=""))

    assert response.status_code == 200
    assert (
        "Static agents do not support custom tools; delete the agent&#x27;s 1 custom tool first."
        in response.content.decode()
    )
    agent.refresh_from_db()
    assert agent.agent_type == "webhook"


# --- the agent page -------------------------------------------------------------------------------


def test_the_agent_page_lists_its_tools_selections_documents_numbers_and_calls(
    staff_client: Client, owner: Any, make_agent: Any
) -> None:
    agent = make_agent(owner.organization, name="Ava", server_url="https://hooks.example.com/agent")
    tool = AgentTool.objects.create(agent=agent, name="order_status", parameter_schema={"type": "object"})
    server = McpServer.objects.create(
        organization=owner.organization,
        name="Orders",
        url="https://mcp.example.com/mcp",
        status="active",
        tools=[{"name": "lookup_order", "description": "Look up an order", "inputSchema": {"type": "object"}}],
    )
    McpToolSelection.objects.create(agent=agent, server=server, tool_name="lookup_order")
    document = KnowledgeDocument.objects.create(
        organization=owner.organization,
        agent=agent,
        name="Opening hours",
        type="markdown",
        size_bytes=10,
        status="ready",
    )
    number = phone_number_claim(organization=owner.organization, number="+14155550100")
    PhoneNumber.objects.filter(pk=number.pk).update(assigned_agent=agent, handoff_phone_number="+14155550199")
    call = calls_services.call_start(agent=agent, channel="web")

    page = staff_client.get(change_url(agent)).content.decode()

    assert f'href="/admin/agents/agenttool/{tool.pk}/change/">order_status</a>' in page
    assert f'href="/admin/agents/agenttool/{tool.pk}/test/">Test</a>' in page
    assert "MCP tool selections (1)" in page and "lookup_order" in page
    assert f'href="/admin/agents/mcpserver/{server.pk}/change/">Orders</a>' in page
    assert f'href="/admin/knowledge/knowledgedocument/{document.pk}/change/">Opening hours</a>' in page
    assert f'href="/admin/telephony/phonenumber/{number.pk}/change/">+14155550100</a>' in page
    assert "+14155550199" in page
    assert f'href="/admin/calls/call/{call.pk}/change/">' in page
    assert f"/admin/agents/agenttool/add/?agent={agent.pk}" in page
    assert f"/admin/knowledge/knowledgedocument/add/?agent={agent.pk}" in page


def test_a_number_is_assigned_with_its_own_handoff_number_and_unassigned(
    staff_client: Client, owner: Any, make_agent: Any
) -> None:
    agent = make_agent(owner.organization, name="Ava")
    number = phone_number_claim(organization=owner.organization, number="+14155550100")
    url = f"/admin/agents/agent/{agent.pk}/numbers/assign/"
    assert "+14155550100" in staff_client.get(url).content.decode()

    refused = staff_client.post(url, {"phone_number": str(number.pk), "handoff_phone_number": "0155 5501"})
    assert refused.status_code == 200
    assert any("E.164" in e for e in errors(refused.content.decode()))
    number.refresh_from_db()
    assert number.assigned_agent_id is None

    done = staff_client.post(url, {"phone_number": str(number.pk), "handoff_phone_number": "+14155550199"})
    assert done.status_code == 302 and done["Location"] == change_url(agent)
    number.refresh_from_db()
    assert (number.assigned_agent_id, number.handoff_phone_number) == (agent.pk, "+14155550199")
    listed = owner.client.get(f"/public/v1/agents/{agent.pk}/phone-numbers").json()
    assert listed[0]["handoffPhoneNumber"] == "+14155550199"

    staff_client.post(f"/admin/agents/agent/{agent.pk}/numbers/{number.pk}/unassign/")
    number.refresh_from_db()
    assert number.assigned_agent_id is None


def test_only_the_agents_own_organizations_claimed_numbers_can_be_assigned(
    staff_client: Client, owner: Any, outsider: Any, make_agent: Any
) -> None:
    agent = make_agent(owner.organization, name="Ava")
    theirs = phone_number_claim(organization=outsider.organization, number="+14155550111")

    response = staff_client.post(f"/admin/agents/agent/{agent.pk}/numbers/assign/", {"phone_number": str(theirs.pk)})

    assert response.status_code == 200
    assert "+14155550111" not in response.content.decode()
    theirs.refresh_from_db()
    assert theirs.assigned_agent_id is None


def test_mcp_tools_are_chosen_from_the_agent_page(staff_client: Client, owner: Any, make_agent: Any) -> None:
    agent = make_agent(owner.organization, name="Ava")
    server = McpServer.objects.create(
        organization=owner.organization,
        name="Orders",
        url="https://mcp.example.com/mcp",
        status="active",
        tools=[{"name": "lookup_order", "inputSchema": {"type": "object"}}, {"name": "cancel_order"}],
    )
    url = f"/admin/agents/agent/{agent.pk}/mcp-tools/"
    assert "Orders: cancel_order" in staff_client.get(url).content.decode()

    response = staff_client.post(url, {"tools": [f"{server.pk} lookup_order"]})

    assert response.status_code == 302
    assert list(McpToolSelection.objects.values_list("tool_name", "enabled")) == [("lookup_order", True)]
    api = owner.client.get(f"/public/v1/agents/{agent.pk}/mcp-tools").json()
    assert [item["toolName"] for item in api] == ["lookup_order"]


def test_deleting_an_agent_goes_through_the_service(staff_client: Client, owner: Any, make_agent: Any) -> None:
    agent = make_agent(owner.organization, name="Ava")
    number = phone_number_claim(organization=owner.organization, number="+14155550100")
    PhoneNumber.objects.filter(pk=number.pk).update(assigned_agent=agent, handoff_phone_number="+14155550199")

    response = staff_client.post(f"/admin/agents/agent/{agent.pk}/delete/", {"post": "yes"})

    assert response.status_code == 302
    assert not Agent.objects.exists()
    number.refresh_from_db()  # unassigned with its handoff number, still the organization's
    assert (number.assigned_agent_id, number.handoff_phone_number, number.organization) == (
        None,
        None,
        owner.organization,
    )


def test_the_call_endings_are_edited_on_the_form(staff_client: Client, owner: Any, make_agent: Any) -> None:
    agent = make_agent(owner.organization)
    page = staff_client.get(change_url(agent)).content.decode()
    assert "Call endings" in page and "Maximum call duration (seconds)" in page
    form = edit_form(agent, end_call_enabled=False, max_duration_seconds="600")
    response = staff_client.post(change_url(agent), form)
    assert response.status_code == 302, errors(response.content.decode())
    agent.refresh_from_db()
    assert (agent.end_call_enabled, agent.max_duration_seconds) == (False, 600)
