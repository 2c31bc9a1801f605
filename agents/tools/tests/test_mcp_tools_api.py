"""GET/PUT /public/v1/agents/{id}/mcp-tools: replace-all selections with per-item rules."""

from __future__ import annotations

import uuid

import pytest

from agents.models import McpServer, McpToolSelection
from agents.tools import services

TOOLS = [
    {"name": "lookup_order", "description": "Look up an order", "inputSchema": {"type": "object"}},
    {"name": "cancel_order", "description": "Cancel an order", "inputSchema": {"type": "object"}},
]


def url(agent_id):
    return f"/public/v1/agents/{agent_id}/mcp-tools"


@pytest.fixture
def make_server(db):
    def make(organization, name="Orders", status="active", tools=TOOLS):
        return McpServer.objects.create(
            organization=organization, name=name, url="https://mcp.example.com/mcp", status=status, tools=tools
        )

    return make


@pytest.fixture
def agent(owner, make_agent):
    return make_agent(owner.organization)


def put(persona, agent_id, items):
    return persona.client.put(url(agent_id), items, format="json")


def test_put_replaces_the_selections_and_answers_what_get_returns(owner, agent, make_server):
    orders = make_server(owner.organization)
    crm = make_server(owner.organization, name="CRM", tools=[{"name": "find_contact", "description": "Find"}])
    response = put(
        owner,
        agent.id,
        [
            {"mcpServerId": str(orders.id), "toolName": "lookup_order", "enabled": True},
            {"mcpServerId": str(crm.id), "toolName": "find_contact", "enabled": False},
            {"mcpServerId": str(orders.id), "toolName": "cancel_order"},
        ],
    )
    assert response.status_code == 200
    expected = [
        {
            "mcpServerId": str(crm.id),
            "serverName": "CRM",
            "serverStatus": "active",
            "toolName": "find_contact",
            "description": "Find",
            "available": True,
            "enabled": False,
        },
        {
            "mcpServerId": str(orders.id),
            "serverName": "Orders",
            "serverStatus": "active",
            "toolName": "cancel_order",
            "description": "Cancel an order",
            "available": True,
            "enabled": True,
        },
        {
            "mcpServerId": str(orders.id),
            "serverName": "Orders",
            "serverStatus": "active",
            "toolName": "lookup_order",
            "description": "Look up an order",
            "available": True,
            "enabled": True,
        },
    ]
    assert response.json() == expected
    assert owner.client.get(url(agent.id)).json() == expected

    # A second PUT replaces everything; [] clears.
    response = put(owner, agent.id, [{"mcpServerId": str(orders.id), "toolName": "lookup_order", "enabled": False}])
    assert [(i["toolName"], i["enabled"]) for i in response.json()] == [("lookup_order", False)]
    assert put(owner, agent.id, []).json() == []
    assert owner.client.get(url(agent.id)).json() == []
    assert not McpToolSelection.objects.exists()


def test_a_new_agent_has_no_selections(owner, agent):
    response = owner.client.get(url(agent.id))
    assert response.status_code == 200 and response.json() == []


@pytest.mark.parametrize("status", ["inactive", "error"])
def test_only_active_servers_can_be_assigned(owner, agent, make_server, status):
    server = make_server(owner.organization, status=status)
    response = put(owner, agent.id, [{"mcpServerId": str(server.id), "toolName": "lookup_order", "enabled": True}])
    assert response.status_code == 400
    assert list(response.json()["issues"]) == ["0.mcpServerId"]
    assert status in response.json()["issues"]["0.mcpServerId"][0]


def test_every_rejected_item_is_named_and_nothing_changes(owner, outsider, agent, make_server):
    orders = make_server(owner.organization)
    foreign = make_server(outsider.organization, name="Theirs")
    put(owner, agent.id, [{"mcpServerId": str(orders.id), "toolName": "cancel_order", "enabled": True}])
    response = put(
        owner,
        agent.id,
        [
            {"mcpServerId": str(orders.id), "toolName": "lookup_order", "enabled": True},
            {"mcpServerId": str(foreign.id), "toolName": "lookup_order", "enabled": True},
            {"mcpServerId": str(orders.id), "toolName": "delete_everything", "enabled": True},
            {"mcpServerId": str(uuid.uuid4()), "toolName": "lookup_order", "enabled": True},
            {"mcpServerId": str(orders.id), "toolName": "lookup_order", "enabled": False},
        ],
    )
    assert response.status_code == 400
    issues = response.json()["issues"]
    assert set(issues) == {"1.mcpServerId", "2.toolName", "3.mcpServerId", "4.toolName"}
    assert issues["1.mcpServerId"] == ["MCP server not found."]  # another organization's server is not revealed
    assert "does not advertise" in issues["2.toolName"][0]
    assert "Duplicate" in issues["4.toolName"][0]
    assert "Theirs" not in response.content.decode()
    # All or nothing: the earlier selection is still there.
    assert [(i["toolName"]) for i in owner.client.get(url(agent.id)).json()] == ["cancel_order"]


@pytest.mark.parametrize(
    ("body", "issue"),
    [
        ({"mcpServerId": "x"}, None),
        ([{"mcpServerId": "not-a-uuid", "toolName": "lookup_order"}], "0.mcpServerId"),
        ([{"toolName": "lookup_order"}], "0.mcpServerId"),
        ([{"mcpServerId": "SERVER"}], "0.toolName"),
        ([{"mcpServerId": "SERVER", "toolName": 5}], "0.toolName"),
        ([{"mcpServerId": "SERVER", "toolName": "lookup_order", "enabled": "yes"}], "0.enabled"),
        ([{"mcpServerId": "SERVER", "toolName": "lookup_order"}, "nope"], "1"),
    ],
)
def test_malformed_bodies_are_400(owner, agent, make_server, body, issue):
    server = make_server(owner.organization)
    if isinstance(body, list):
        body = [
            {k: (str(server.id) if v == "SERVER" else v) for k, v in i.items()} if isinstance(i, dict) else i
            for i in body
        ]
    response = put(owner, agent.id, body)
    assert response.status_code == 400
    if issue:
        assert any(key.startswith(issue) for key in response.json()["issues"]), response.json()
    assert not McpToolSelection.objects.exists()


def test_too_many_items_are_refused(owner, agent, make_server):
    server = make_server(owner.organization)
    items = [{"mcpServerId": str(server.id), "toolName": "lookup_order"}] * 257
    assert put(owner, agent.id, items).status_code == 400


def test_another_organizations_agent_is_not_found_and_ids_must_be_uuids(owner, outsider, agent, make_server):
    server = make_server(owner.organization)
    item = [{"mcpServerId": str(server.id), "toolName": "lookup_order"}]
    assert outsider.client.get(url(agent.id)).status_code == 404
    assert put(outsider, agent.id, item).status_code == 404
    assert owner.client.get(url("not-a-uuid")).status_code == 400
    assert put(owner, "not-a-uuid", item).status_code == 400
    assert not McpToolSelection.objects.exists()


def test_a_tool_the_server_stops_advertising_stays_listed_as_unavailable(owner, agent, make_server):
    server = make_server(owner.organization)
    put(owner, agent.id, [{"mcpServerId": str(server.id), "toolName": "cancel_order"}])
    McpServer.objects.filter(pk=server.pk).update(tools=TOOLS[:1])
    (item,) = owner.client.get(url(agent.id)).json()
    assert (item["toolName"], item["available"], item["description"]) == ("cancel_order", False, None)


def test_selection_against_a_really_connected_server(owner, agent, mcp_server, allow_loopback):
    server = services.mcp_server_connect(organization=owner.organization, name="Live", url=mcp_server.url)
    response = put(owner, agent.id, [{"mcpServerId": str(server.id), "toolName": "lookup_order", "enabled": True}])
    assert response.status_code == 200
    assert response.json()[0]["description"] == "Look up an order by its id."
    response = put(owner, agent.id, [{"mcpServerId": str(server.id), "toolName": "not_advertised"}])
    assert response.status_code == 400 and "0.toolName" in response.json()["issues"]
