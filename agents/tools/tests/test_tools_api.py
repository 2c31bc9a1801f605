"""Custom tools CRUD through the public API: fields, defaults, every validation and operation rule."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.models import Agent, AgentTool
from agents.tools.selectors import enabled_tools_problem
from agents.tools.services import MAX_TOOLS_PER_AGENT

HOOK = "https://hooks.example.com/agent"
SCHEMA = {"type": "object", "properties": {"orderId": {"type": "string"}}, "required": ["orderId"]}
TOOL = {"name": "lookup_order", "description": "Look up an order", "parameterSchema": SCHEMA}


def tools_url(agent_id, tool_id=None):
    base = f"/public/v1/agents/{agent_id}/tools"
    return f"{base}/{tool_id}" if tool_id else base


def create_tool(persona, agent, **fields):
    response = persona.client.post(tools_url(agent.id), {**TOOL, **fields}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()["id"]


def listed_tools(persona, agent):
    response = persona.client.get(tools_url(agent.id))
    assert response.status_code == 200
    return response.json()


@pytest.fixture
def webhook_agent(owner, make_agent):
    return make_agent(owner.organization, agent_type="webhook", server_url=HOOK)


@pytest.fixture
def http_agent(owner, make_agent):
    return make_agent(owner.organization, agent_type="http")


# --- create and list ---------------------------------------------------------------------------


def test_create_answers_201_with_the_id_and_applies_the_documented_defaults(owner, webhook_agent):
    response = owner.client.post(tools_url(webhook_agent.id), {"name": "ping"}, format="json")
    assert response.status_code == 201
    tool_id = response.json()["id"]
    assert response.json() == {"id": tool_id}
    assert listed_tools(owner, webhook_agent) == [
        {
            "id": tool_id,
            "name": "ping",
            "description": "",
            "parameterSchema": {"type": "object", "properties": {}},
            "responseSchema": None,
            "timeoutMs": 10000,
            "onError": "return_error",
            "enabled": True,
            "toolUrl": None,
            "toolMethod": "POST",
            "toolHeaders": {},
        }
    ]


def test_every_field_round_trips(owner, http_agent):
    body = {
        "name": "create-ticket_2",
        "description": "Open a support ticket",
        "parameterSchema": SCHEMA,
        "responseSchema": {"type": "object", "properties": {"ticketId": {"type": "string"}}},
        "timeoutMs": 30000,
        "onError": "return_empty",
        "enabled": False,
        "toolUrl": "https://api.example.com/tickets?src=voice",
        "toolMethod": "PUT",
        "toolHeaders": {"X-Api-Key": "k-123"},
    }
    tool_id = create_tool(owner, http_agent, **body)
    assert listed_tools(owner, http_agent) == [{"id": tool_id, **body}]


def test_the_list_is_shared_by_keys_of_the_same_organization(owner, teammate, webhook_agent):
    tool_id = create_tool(owner, webhook_agent)
    assert [t["id"] for t in listed_tools(teammate, webhook_agent)] == [tool_id]


# --- operation rule 5 ----------------------------------------------------------------------------


def test_static_agents_cannot_have_tools(owner, make_agent):
    agent = make_agent(owner.organization, agent_type="static")
    response = owner.client.post(tools_url(agent.id), TOOL, format="json")
    assert response.status_code == 400
    assert "Static agents do not support custom tools" in response.json()["error"]
    assert not AgentTool.objects.exists()


def test_a_webhook_agent_needs_a_saved_server_url_to_create_a_tool(owner, make_agent):
    agent = make_agent(owner.organization, agent_type="webhook", server_url=None)
    for enabled in (True, False):
        response = owner.client.post(tools_url(agent.id), {**TOOL, "enabled": enabled}, format="json")
        assert response.status_code == 400
        assert "serverUrl" in response.json()["issues"]
    assert not AgentTool.objects.exists()


def test_webhook_tools_have_no_tool_url(owner, webhook_agent):
    response = owner.client.post(tools_url(webhook_agent.id), {**TOOL, "toolUrl": HOOK}, format="json")
    assert response.status_code == 400
    assert "toolUrl" in response.json()["issues"]


def test_an_http_agents_tool_needs_a_tool_url(owner, http_agent):
    response = owner.client.post(tools_url(http_agent.id), TOOL, format="json")
    assert response.status_code == 400
    assert response.json()["issues"] == {"toolUrl": ["Required for tools of http agents."]}
    response = owner.client.post(tools_url(http_agent.id), {**TOOL, "toolUrl": None}, format="json")
    assert response.status_code == 400
    create_tool(owner, http_agent, toolUrl="https://api.example.com/orders")


def test_enabling_a_webhook_tool_needs_a_saved_server_url(owner, make_agent):
    agent = make_agent(owner.organization, agent_type="webhook", server_url=None)
    tool = AgentTool.objects.create(agent=agent, name="lookup_order", enabled=False)
    url = tools_url(agent.id, tool.id)

    response = owner.client.put(url, {**TOOL, "enabled": True}, format="json")
    assert response.status_code == 400
    assert "serverUrl" in response.json()["issues"]
    tool.refresh_from_db()
    assert tool.enabled is False

    response = owner.client.put(url, {**TOOL, "enabled": False, "description": "edited"}, format="json")
    assert response.status_code == 200
    tool.refresh_from_db()
    assert tool.description == "edited"


def test_put_on_a_static_agents_tool_is_refused(owner, make_agent):
    agent = make_agent(owner.organization, agent_type="static")
    tool = AgentTool.objects.create(agent=agent, name="legacy")
    response = owner.client.put(tools_url(agent.id, tool.id), {**TOOL, "enabled": False}, format="json")
    assert response.status_code == 400


# --- field validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"name": "has space"}, "name"),
        ({"name": "dots.not.allowed"}, "name"),
        ({"name": "x" * 65}, "name"),
        ({"name": ""}, "name"),
        ({"name": 123}, "name"),
        ({"name": "search_knowledge"}, "name"),
        ({"name": "transfer_call"}, "name"),
        ({"name": "end_call"}, "name"),
        ({"timeoutMs": 999}, "timeoutMs"),
        ({"timeoutMs": 30001}, "timeoutMs"),
        ({"timeoutMs": "5000"}, "timeoutMs"),
        ({"timeoutMs": 1500.5}, "timeoutMs"),
        ({"timeoutMs": True}, "timeoutMs"),
        ({"onError": "ignore"}, "onError"),
        ({"enabled": "yes"}, "enabled"),
        ({"toolMethod": "get"}, "toolMethod"),
        ({"toolMethod": "TRACE"}, "toolMethod"),
        ({"description": 5}, "description"),
        ({"parameterSchema": {"type": "nonsense"}}, "parameterSchema"),
        ({"parameterSchema": {"type": "object", "properties": {"a": {"type": 7}}}}, "parameterSchema"),
        ({"parameterSchema": {"type": "object", "required": "orderId"}}, "parameterSchema"),
        ({"parameterSchema": {"type": "string"}}, "parameterSchema"),
        ({"parameterSchema": ["not", "an", "object"]}, "parameterSchema"),
        ({"parameterSchema": None}, "parameterSchema"),
        ({"responseSchema": {"type": "object", "minProperties": -1}}, "responseSchema"),
        ({"responseSchema": "string"}, "responseSchema"),
        ({"toolHeaders": {"X-Key": 5}}, "toolHeaders"),
        ({"toolHeaders": {"bad header": "v"}}, "toolHeaders"),
        ({"toolHeaders": {"X-Key": "line\r\nbreak"}}, "toolHeaders"),
        ({"toolHeaders": ["X-Key"]}, "toolHeaders"),
        ({"toolHeaders": {"Host": "evil.example.com"}}, "toolHeaders"),
    ],
)
def test_invalid_fields_are_a_400_naming_the_field(owner, webhook_agent, fields, field):
    response = owner.client.post(tools_url(webhook_agent.id), {**TOOL, **fields}, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()["issues"]
    assert not AgentTool.objects.exists()


@pytest.mark.parametrize(
    "url",
    ["ftp://api.example.com/x", "https://user:secret@api.example.com/x", "api.example.com/x", "https:///nohost", 7],
)
def test_tool_urls_must_be_http_without_credentials(owner, http_agent, url):
    response = owner.client.post(tools_url(http_agent.id), {**TOOL, "toolUrl": url}, format="json")
    assert response.status_code == 400
    assert "toolUrl" in response.json()["issues"]


def test_a_tool_url_every_call_would_refuse_is_a_400_with_the_reason_and_nothing_is_saved(
    owner, http_agent, refused_url
):
    response = owner.client.post(tools_url(http_agent.id), {**TOOL, "toolUrl": refused_url.url}, format="json")
    reason = refused_url.reason_in(response, "toolUrl")
    assert not AgentTool.objects.exists()

    tool_id = create_tool(owner, http_agent, toolUrl="https://api.example.com/orders")
    response = owner.client.put(tools_url(http_agent.id, tool_id), {**TOOL, "toolUrl": refused_url.url}, format="json")
    assert refused_url.reason_in(response, "toolUrl") == reason
    assert [tool["toolUrl"] for tool in listed_tools(owner, http_agent)] == ["https://api.example.com/orders"]


def test_loopback_tool_urls_are_saved_when_the_operator_allows_loopback(owner, http_agent, settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8", "::1/128"]  # what `make run` sets
    tool_id = create_tool(owner, http_agent, toolUrl="http://127.0.0.1:9/orders")
    response = owner.client.put(
        tools_url(http_agent.id, tool_id), {**TOOL, "toolUrl": "http://[::1]:9/orders"}, format="json"
    )
    assert response.status_code == 200
    assert [tool["toolUrl"] for tool in listed_tools(owner, http_agent)] == ["http://[::1]:9/orders"]
    # Only loopback: the cloud metadata address stays refused.
    response = owner.client.put(
        tools_url(http_agent.id, tool_id), {**TOOL, "toolUrl": "http://169.254.169.254/"}, format="json"
    )
    assert response.status_code == 400 and "link-local" in response.json()["issues"]["toolUrl"][0]


def test_a_tool_url_whose_host_does_not_resolve_yet_is_saved(owner, http_agent):
    # DNS failures are refused call by call (the name may resolve later), never when saving.
    create_tool(owner, http_agent, toolUrl="https://no-such-host.invalid/orders")
    assert [tool["toolUrl"] for tool in listed_tools(owner, http_agent)] == ["https://no-such-host.invalid/orders"]


def test_name_is_required_and_timeouts_at_the_limits_are_accepted(owner, webhook_agent):
    response = owner.client.post(tools_url(webhook_agent.id), {"description": "no name"}, format="json")
    assert response.status_code == 400
    assert "name" in response.json()["issues"]
    create_tool(owner, webhook_agent, name="fast", timeoutMs=1000)
    create_tool(owner, webhook_agent, name="slow", timeoutMs=30000)


def test_schemas_with_a_declared_draft_are_checked_against_that_draft(owner, webhook_agent):
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {}}
    create_tool(owner, webhook_agent, parameterSchema=draft7)
    bad = {**draft7, "properties": {"a": {"minLength": "three"}}}
    response = owner.client.post(tools_url(webhook_agent.id), {**TOOL, "parameterSchema": bad}, format="json")
    assert response.status_code == 400


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"description": "nul \u0000 inside"}}},
        {"type": "object", "properties": {"k\u0000ey": {"type": "string"}}},
    ],
)
def test_schemas_holding_a_nul_character_are_400_on_every_database(owner, webhook_agent, schema):
    response = owner.client.post(tools_url(webhook_agent.pk), {**TOOL, "parameterSchema": schema}, format="json")
    assert response.status_code == 400
    assert [key.split(".")[0] for key in response.json()["issues"]] == ["parameterSchema"]
    response = owner.client.post(tools_url(webhook_agent.pk), {**TOOL, "responseSchema": schema}, format="json")
    assert response.status_code == 400
    assert not AgentTool.objects.exists()


def test_tool_names_are_unique_per_agent(owner, webhook_agent, make_agent):
    create_tool(owner, webhook_agent)
    response = owner.client.post(tools_url(webhook_agent.id), TOOL, format="json")
    assert response.status_code == 400
    assert response.json()["issues"] == {"name": ["The agent already has a tool named lookup_order."]}
    other = make_agent(owner.organization, agent_type="webhook", server_url=HOOK)
    create_tool(owner, other)  # the same name on another agent is fine
    assert AgentTool.objects.count() == 2


def test_non_object_and_malformed_bodies_are_400(owner, webhook_agent):
    response = owner.client.post(tools_url(webhook_agent.id), [TOOL], format="json")
    assert response.status_code == 400
    response = owner.client.post(tools_url(webhook_agent.id), "{not json", content_type="application/json")
    assert response.status_code == 400
    assert "error" in response.json()


def test_an_agent_holds_at_most_the_documented_number_of_tools(owner, webhook_agent):
    AgentTool.objects.bulk_create(AgentTool(agent=webhook_agent, name=f"t{i}") for i in range(MAX_TOOLS_PER_AGENT))
    response = owner.client.post(tools_url(webhook_agent.id), TOOL, format="json")
    assert response.status_code == 400
    assert AgentTool.objects.count() == MAX_TOOLS_PER_AGENT


# --- replace and delete ---------------------------------------------------------------------------


def test_put_replaces_every_field_and_resets_omitted_ones_to_defaults(owner, http_agent):
    tool_id = create_tool(
        owner,
        http_agent,
        toolUrl="https://api.example.com/a",
        toolHeaders={"X-A": "1"},
        timeoutMs=2000,
        onError="return_empty",
        responseSchema={"type": "object"},
    )
    response = owner.client.put(
        tools_url(http_agent.id, tool_id),
        {"name": "renamed", "toolUrl": "https://api.example.com/b"},
        format="json",
    )
    assert response.status_code == 200
    assert response.json() == {"id": tool_id}
    assert listed_tools(owner, http_agent) == [
        {
            "id": tool_id,
            "name": "renamed",
            "description": "",
            "parameterSchema": {"type": "object", "properties": {}},
            "responseSchema": None,
            "timeoutMs": 10000,
            "onError": "return_error",
            "enabled": True,
            "toolUrl": "https://api.example.com/b",
            "toolMethod": "POST",
            "toolHeaders": {},
        }
    ]


def test_put_validates_like_post(owner, webhook_agent):
    tool_id = create_tool(owner, webhook_agent)
    other_id = create_tool(owner, webhook_agent, name="other")
    url = tools_url(webhook_agent.id, tool_id)
    assert owner.client.put(url, {**TOOL, "timeoutMs": 40000}, format="json").status_code == 400
    assert owner.client.put(url, {**TOOL, "name": "other"}, format="json").status_code == 400
    assert owner.client.put(url, {**TOOL, "name": "transfer_call"}, format="json").status_code == 400
    assert owner.client.put(url, {**TOOL, "toolUrl": HOOK}, format="json").status_code == 400
    assert owner.client.put(url, {**TOOL, "description": "same name kept"}, format="json").status_code == 200
    names = {t["id"]: t["name"] for t in listed_tools(owner, webhook_agent)}
    assert names == {tool_id: "lookup_order", other_id: "other"}


def test_delete_answers_the_id_and_removes_the_tool(owner, webhook_agent):
    tool_id = create_tool(owner, webhook_agent)
    response = owner.client.delete(tools_url(webhook_agent.id, tool_id))
    assert response.status_code == 200
    assert response.json() == {"id": tool_id}
    assert listed_tools(owner, webhook_agent) == []
    assert owner.client.delete(tools_url(webhook_agent.id, tool_id)).status_code == 404


# --- ids and organizations -----------------------------------------------------------------------


def test_another_organizations_agent_and_tools_are_not_found(owner, outsider, webhook_agent):
    tool_id = create_tool(owner, webhook_agent)
    assert outsider.client.get(tools_url(webhook_agent.id)).status_code == 404
    assert outsider.client.post(tools_url(webhook_agent.id), TOOL, format="json").status_code == 404
    assert outsider.client.put(tools_url(webhook_agent.id, tool_id), TOOL, format="json").status_code == 404
    assert outsider.client.delete(tools_url(webhook_agent.id, tool_id)).status_code == 404
    assert AgentTool.objects.get(pk=tool_id).name == "lookup_order"


def test_a_tool_of_another_agent_is_not_found(owner, webhook_agent, make_agent):
    other = make_agent(owner.organization, agent_type="webhook", server_url=HOOK)
    tool_id = create_tool(owner, other)
    assert owner.client.put(tools_url(webhook_agent.id, tool_id), TOOL, format="json").status_code == 404
    assert owner.client.delete(tools_url(webhook_agent.id, tool_id)).status_code == 404
    assert owner.client.delete(tools_url(webhook_agent.id, uuid.uuid4())).status_code == 404


def test_non_uuid_ids_are_400(owner, webhook_agent):
    assert owner.client.get(tools_url("not-a-uuid")).status_code == 400
    assert owner.client.post(tools_url("123"), TOOL, format="json").status_code == 400
    response = owner.client.put(tools_url(webhook_agent.id, "nope"), TOOL, format="json")
    assert response.status_code == 400
    assert response.json()["issues"] == {"tool": ["Must be a UUID."]}
    assert owner.client.delete(tools_url(webhook_agent.id, "nope")).status_code == 400


def test_requests_without_a_key_are_401(anonymous, webhook_agent):
    assert anonymous.get(tools_url(webhook_agent.id)).status_code == 401


# --- toolCount in the agent list -------------------------------------------------------------------


def test_tool_count_in_the_agent_list_counts_each_agents_tools_in_one_query(owner, make_agent):
    agents = [make_agent(owner.organization, agent_type="webhook", server_url=HOOK) for _ in range(3)]
    for index, agent in enumerate(agents):
        for n in range(index):
            create_tool(owner, agent, name=f"tool_{n}", enabled=n % 2 == 0)
    with CaptureQueriesContext(connection) as few:
        counts = {item["id"]: item["toolCount"] for item in owner.client.get("/public/v1/agents").json()}
    assert counts == {str(a.id): i for i, a in enumerate(agents)}

    for _ in range(5):
        agent = make_agent(owner.organization, agent_type="webhook", server_url=HOOK)
        create_tool(owner, agent)
    with CaptureQueriesContext(connection) as many:
        owner.client.get("/public/v1/agents")
    assert len(many.captured_queries) == len(few.captured_queries)


# --- agent rule 4 on agent updates ----------------------------------------------------------------


def test_enabled_tools_problem_names_each_case(owner, make_agent):
    agent = make_agent(owner.organization, agent_type="webhook", server_url=HOOK)
    assert enabled_tools_problem(agent=agent, agent_type="static", server_url=None) is None
    AgentTool.objects.create(agent=agent, name="lookup_order", enabled=False)
    assert "Static agents" in enabled_tools_problem(agent=agent, agent_type="static", server_url=None)
    assert enabled_tools_problem(agent=agent, agent_type="webhook", server_url=None) is None  # only disabled
    assert enabled_tools_problem(agent=agent, agent_type="http", server_url=None) is None
    AgentTool.objects.create(agent=agent, name="enabled_one", enabled=True)
    assert "enabled_one" in enabled_tools_problem(agent=agent, agent_type="webhook", server_url=None)
    assert enabled_tools_problem(agent=agent, agent_type="webhook", server_url=HOOK) is None
    assert "enabled_one" in enabled_tools_problem(agent=agent, agent_type="http", server_url=None)
    AgentTool.objects.filter(name="enabled_one").update(tool_url="https://api.example.com/x")
    assert enabled_tools_problem(agent=agent, agent_type="http", server_url=None) is None


def _agent_put(persona, agent, **fields):
    body = {"name": agent.name, "instructions": "Help callers with their orders.", **fields}
    return persona.client.put(f"/public/v1/agents/{agent.id}", body, format="json")


def test_an_agent_update_that_could_not_hold_its_tools_is_a_400_and_changes_nothing(owner, webhook_agent):
    create_tool(owner, webhook_agent)
    for fields in ({"agentType": "static"}, {"agentType": "webhook", "serverUrl": None}, {"agentType": "http"}):
        response = _agent_put(owner, webhook_agent, **fields)
        assert response.status_code == 400, (fields, response.json())
    agent = Agent.objects.get(pk=webhook_agent.pk)
    assert (agent.agent_type, agent.server_url) == ("webhook", HOOK)

    # Once the tool is disabled, the webhook agent may drop its serverUrl.
    tool = AgentTool.objects.get()
    tool.enabled = False
    tool.save()
    assert _agent_put(owner, webhook_agent, agentType="webhook", serverUrl=None).status_code == 200
