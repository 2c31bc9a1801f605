"""The agent tests API (POST/GET /agents/{id}/tests, GET/PATCH/DELETE /agents/{id}/tests/{testId}) and
POST /calls/{id}/tests: the stored shapes, every rule's 400 naming its place, organization scoping (404)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from agents.models import Agent, AgentTool, McpServer, McpServerStatus, McpToolSelection
from calls import services as calls
from calls.models import Call
from knowledge.models import DocumentStatus, DocumentType, KnowledgeDocument
from realtime.models import AgentTest

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(owner: Any, make_agent: Any) -> Agent:
    """A webhook agent offering a custom tool, an MCP tool, search_knowledge, transfer_call and end_call."""
    agent = make_agent(
        owner.organization,
        name="Ava",
        server_url="https://hooks.example.com/agent",
        handoff_phone_number="+14155550100",
    )
    AgentTool.objects.create(agent=agent, name="lookup_order", description="Find an order.")
    AgentTool.objects.create(agent=agent, name="disabled_tool", enabled=False)
    server = McpServer.objects.create(
        organization=owner.organization,
        name="Orders MCP",
        url="https://mcp.example.com/mcp",
        status=McpServerStatus.ACTIVE,
        tools=[{"name": "cancel.order", "description": "Cancel an order.", "inputSchema": {"type": "object"}}],
    )
    McpToolSelection.objects.create(agent=agent, server=server, tool_name="cancel.order")
    KnowledgeDocument.objects.create(
        organization=owner.organization,
        agent=agent,
        name="Returns",
        type=DocumentType.MARKDOWN,
        size_bytes=10,
        status=DocumentStatus.READY,
        pages=["Returns within 30 days."],
    )
    return agent


def url(agent: Agent, test_id: Any = None) -> str:
    base = f"/public/v1/agents/{agent.pk}/tests"
    return f"{base}/{test_id}" if test_id else base


FULL = {
    "name": "Order status is looked up",
    "kind": "tool_call",
    "turns": [{"user": "Where is my order 42?"}, {"user": "Thanks, bye"}],
    "variables": {"customer_name": "Ann"},
    "toolMocks": [
        {"tool": "lookup_order", "when": {"argumentsInclude": {"order": "42"}}, "result": {"status": "shipped"}},
        {"tool": "lookup_order", "error": "The order service is down."},
        {"tool": "cancel_order", "result": "cancelled"},
    ],
    "expect": {
        "toolCalls": [{"name": "lookup_order", "argumentsInclude": {"order": "42"}}],
        "replyContains": ["shipped"],
        "replyMatches": r"(?i)ship+ed",
        "transferred": False,
        "ended": True,
        "criteria": ["The agent tells the caller the order has shipped."],
    },
    "tags": ["smoke", "orders", "smoke"],
    "allowRealTools": False,
}


def create(owner: Any, agent: Agent, body: dict[str, Any]) -> Any:
    return owner.client.post(url(agent), body, format="json")


def test_a_test_is_created_read_listed_changed_and_deleted(owner: Any, agent: Agent) -> None:
    response = create(owner, agent, FULL)
    assert response.status_code == 201, response.json()
    test = response.json()
    assert test["agentId"] == str(agent.pk)
    assert test["name"] == FULL["name"] and test["kind"] == "tool_call"
    assert test["turns"] == FULL["turns"] and test["caller"] is None
    assert test["variables"] == {"customer_name": "Ann"}
    assert test["toolMocks"] == [
        {"tool": "lookup_order", "when": {"argumentsInclude": {"order": "42"}}, "result": {"status": "shipped"}},
        {"tool": "lookup_order", "when": None, "error": "The order service is down."},
        {"tool": "cancel_order", "when": None, "result": "cancelled"},
    ]
    assert test["expect"] == FULL["expect"]
    assert test["tags"] == ["smoke", "orders"]  # once each
    assert test["allowRealTools"] is False and test["createdAt"] and test["updatedAt"]
    stored = AgentTest.objects.get(pk=test["id"])
    assert stored.organization_id == owner.organization.pk and stored.tool_mocks == test["toolMocks"]

    assert owner.client.get(url(agent, test["id"])).json() == test

    second = create(owner, agent, {"name": "Greets", "kind": "reply", "turns": [{"user": "Hello"}], "tags": ["x"]})
    assert second.status_code == 201
    listed = owner.client.get(url(agent)).json()
    assert [t["id"] for t in listed] == [test["id"], second.json()["id"]]  # oldest first
    assert [t["name"] for t in owner.client.get(url(agent), {"tag": "smoke"}).json()] == [FULL["name"]]
    assert [t["name"] for t in owner.client.get(url(agent), {"limit": 1, "offset": 1}).json()] == ["Greets"]
    assert owner.client.get(url(agent), {"limit": 0}).status_code == 400

    patched = owner.client.patch(
        url(agent, test["id"]), {"name": "Renamed", "expect": {"noToolCalls": True}}, format="json"
    )
    assert patched.status_code == 200, patched.json()
    assert patched.json()["name"] == "Renamed" and patched.json()["expect"] == {"noToolCalls": True}
    assert patched.json()["turns"] == FULL["turns"]  # what the body leaves out stays

    deleted = owner.client.delete(url(agent, test["id"]))
    assert deleted.status_code == 200 and deleted.json() == {"id": test["id"]}
    assert owner.client.get(url(agent, test["id"])).status_code == 404


def test_a_conversation_test_has_a_simulated_caller_or_turns(owner: Any, agent: Agent) -> None:
    response = create(
        owner,
        agent,
        {
            "name": "Angry caller",
            "kind": "conversation",
            "caller": {"persona": "An impatient customer", "goal": "Cancel order 42"},
        },
    )
    assert response.status_code == 201, response.json()
    assert response.json()["caller"] == {"persona": "An impatient customer", "goal": "Cancel order 42", "maxTurns": 10}
    assert response.json()["turns"] == []
    scripted = create(owner, agent, {"name": "Scripted", "kind": "conversation", "turns": [{"user": "Hi"}]})
    assert scripted.status_code == 201 and scripted.json()["caller"] is None


def refusal(response: Any, field: str) -> str:
    assert response.status_code == 400, response.json()
    body = response.json()
    assert field in body["issues"], body
    [message] = body["issues"][field]
    assert body["error"] == f"Invalid {field}: {message}"
    return message


REPLY = {"name": "t", "kind": "reply", "turns": [{"user": "Hello"}]}


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"kind": "reply", "turns": [{"user": "Hi"}]}, "name", "Required"),
        ({**REPLY, "name": "   "}, "name", "blank"),
        ({**REPLY, "name": "x" * 201}, "name", "At most 200"),
        ({**REPLY, "kind": "quiz"}, "kind", "reply, tool_call, conversation"),
        ({**REPLY, "turns": []}, "turns", "at least one turn"),
        ({**REPLY, "turns": None}, "turns", "at least one turn"),
        ({**REPLY, "turns": [{"user": "hi"}] * 51}, "turns", "At most 50"),
        ({**REPLY, "turns": [{"user": ""}]}, "turns.0.user", "blank"),
        ({**REPLY, "turns": [{"user": "x" * 2001}]}, "turns.0.user", "At most 2000"),
        ({**REPLY, "turns": [{"said": "hi"}]}, "turns.0", "Unknown key 'said'"),
        ({**REPLY, "turns": ["hi"]}, "turns.0", "Must be an object"),
        ({**REPLY, "caller": {"persona": "p", "goal": "g"}}, "caller", "Only conversation tests"),
        ({"name": "c", "kind": "conversation"}, "caller", "needs a simulated caller"),
        (
            {"name": "c", "kind": "conversation", "caller": {"persona": "p", "goal": "g", "maxTurns": 21}},
            "caller.maxTurns",
            "from 1 to 20",
        ),
        (
            {"name": "c", "kind": "conversation", "caller": {"persona": "p", "goal": "g", "maxTurns": 0}},
            "caller.maxTurns",
            "from 1 to 20",
        ),
        ({"name": "c", "kind": "conversation", "caller": {"persona": "p"}}, "caller.goal", "Required"),
        ({**REPLY, "variables": {"1bad": "x"}}, "variables", "not a valid variable name"),
        ({**REPLY, "variables": {"name": 3}}, "variables", "must be a string"),
        ({**REPLY, "toolMocks": [{"tool": "lookup_order"}]}, "toolMocks.0", "exactly one of result"),
        (
            {**REPLY, "toolMocks": [{"tool": "lookup_order", "result": 1, "error": "x"}]},
            "toolMocks.0",
            "exactly one of result",
        ),
        ({**REPLY, "toolMocks": [{"result": 1}]}, "toolMocks.0.tool", "Required"),
        (
            {**REPLY, "toolMocks": [{"tool": "lookup_order", "when": {"argumentsInclude": [1]}, "result": 1}]},
            "toolMocks.0.when.argumentsInclude",
            "Must be an object",
        ),
        (
            {**REPLY, "toolMocks": [{"tool": "lookup_order", "when": {}, "result": 1}]},
            "toolMocks.0.when.argumentsInclude",
            "Required",
        ),
        ({**REPLY, "toolMocks": [{"tool": "lookup_order", "result": "a\u0000b"}]}, "toolMocks.0.result", "NUL"),
        ({**REPLY, "toolMocks": [{"tool": "lookup_order", "error": ""}]}, "toolMocks.0.error", "blank"),
        ({**REPLY, "expect": {"replyMatches": "(unclosed"}}, "expect.replyMatches", "Not a valid regular expression"),
        ({**REPLY, "expect": {"sounds": "nice"}}, "expect", "Unknown key 'sounds'"),
        ({**REPLY, "expect": {"noToolCalls": "yes"}}, "expect.noToolCalls", "true or false"),
        (
            {**REPLY, "expect": {"noToolCalls": True, "toolCalls": [{"name": "end_call"}]}},
            "expect.noToolCalls",
            "Contradicts",
        ),
        ({**REPLY, "expect": {"replyContains": "shipped"}}, "expect.replyContains", "Must be an array"),
        ({**REPLY, "expect": {"criteria": ["ok", " "]}}, "expect.criteria.1", "blank"),
        ({**REPLY, "expect": {"toolCalls": [{"argumentsInclude": {}}]}}, "expect.toolCalls.0.name", "Required"),
        ({**REPLY, "tags": ["has space"]}, "tags.0", "1 to 64 letters"),
        ({**REPLY, "tags": "smoke"}, "tags", "Must be an array"),
        ({**REPLY, "allowRealTools": "no"}, "allowRealTools", "true or false"),
    ],
)
def test_every_rule_is_a_400_naming_its_place(owner: Any, agent: Agent, body: dict, field: str, says: str) -> None:
    message = refusal(create(owner, agent, body), field)
    assert says in message
    assert not AgentTest.objects.exists()


def test_an_invalid_regex_names_the_regex_error(owner: Any, agent: Agent) -> None:
    message = refusal(create(owner, agent, {**REPLY, "expect": {"replyMatches": "ship(ped"}}), "expect.replyMatches")
    assert message == "Not a valid regular expression: missing ), unterminated subpattern at position 4."


def test_an_unknown_tool_in_a_mock_or_an_expectation_is_named(owner: Any, agent: Agent) -> None:
    offered = "lookup_order, cancel_order, search_knowledge, transfer_call, end_call"
    message = refusal(
        create(owner, agent, {**REPLY, "toolMocks": [{"tool": "refund", "result": {}}]}), "toolMocks.0.tool"
    )
    assert message == f"unknown tool 'refund': the agent offers {offered}."
    # A disabled custom tool is not offered; an MCP tool is known by the name the model sees.
    refusal(create(owner, agent, {**REPLY, "toolMocks": [{"tool": "disabled_tool", "result": {}}]}), "toolMocks.0.tool")
    refusal(create(owner, agent, {**REPLY, "toolMocks": [{"tool": "cancel.order", "result": {}}]}), "toolMocks.0.tool")
    message = refusal(
        create(owner, agent, {**REPLY, "expect": {"toolCalls": [{"name": "send_digits"}]}}), "expect.toolCalls.0.name"
    )
    assert "unknown tool 'send_digits'" in message  # phone only: a test session is a web session


def test_native_tools_are_offered_as_the_agent_offers_them(owner: Any, make_agent: Any) -> None:
    bare = make_agent(owner.organization, name="Bare", end_call_enabled=False)
    message = refusal(
        create(owner, bare, {**REPLY, "toolMocks": [{"tool": "end_call", "result": {}}]}), "toolMocks.0.tool"
    )
    assert message == "unknown tool 'end_call': the agent offers no tools."


def test_patch_checks_the_changed_test_whole(owner: Any, agent: Agent) -> None:
    test = create(owner, agent, FULL).json()
    refusal(owner.client.patch(url(agent, test["id"]), {"turns": []}, format="json"), "turns")
    refusal(
        owner.client.patch(url(agent, test["id"]), {"expect": {"replyMatches": "[a-"}}, format="json"),
        "expect.replyMatches",
    )
    refusal(owner.client.patch(url(agent, test["id"]), {"name": None}, format="json"), "name")
    assert owner.client.patch(url(agent, test["id"]), [1], format="json").status_code == 400
    assert owner.client.get(url(agent, test["id"])).json() == test  # nothing changed
    cleared = owner.client.patch(url(agent, test["id"]), {"toolMocks": None, "tags": []}, format="json")
    assert cleared.status_code == 200 and cleared.json()["toolMocks"] == [] and cleared.json()["tags"] == []


def test_another_organizations_agent_or_test_is_a_404(owner: Any, outsider: Any, agent: Agent, make_agent: Any) -> None:
    test = create(owner, agent, FULL).json()
    for response in (
        outsider.client.get(url(agent)),
        outsider.client.post(url(agent), FULL, format="json"),
        outsider.client.get(url(agent, test["id"])),
        outsider.client.patch(url(agent, test["id"]), {"name": "mine"}, format="json"),
        outsider.client.delete(url(agent, test["id"])),
    ):
        assert response.status_code == 404
        assert response.json() == {"error": "Agent not found"}
    # The outsider's own agent does not reach the owner's test either.
    theirs = make_agent(outsider.organization, name="Theirs")
    response = outsider.client.get(url(theirs, test["id"]))
    assert response.status_code == 404 and response.json() == {"error": "Test not found"}
    other = make_agent(owner.organization, name="Other")
    assert owner.client.get(url(other, test["id"])).status_code == 404  # a test of another agent
    assert owner.client.get(url(agent, "not-a-uuid")).status_code == 400
    assert AgentTest.objects.get(pk=test["id"]).name == FULL["name"]


def test_a_body_that_is_not_an_object_is_a_400(owner: Any, agent: Agent) -> None:
    response = owner.client.post(url(agent), [REPLY], format="json")
    assert response.status_code == 400 and response.json()["error"] == "The request body must be a JSON object."


# --- POST /calls/{id}/tests -----------------------------------------------------------------------------


def recorded_call(agent: Agent, *, tools: bool = True) -> Call:
    call = Call.objects.create(
        organization=agent.organization,
        agent=agent,
        agent_name=agent.name,
        channel="phone",
        from_number="+14155552671",
        to_number="+14155550100",
        started_at=datetime(2026, 11, 20, 14, 5, tzinfo=UTC),
        variables={"customer_name": "Ann"},
    )
    calls.call_message_add(call=call, role="assistant", content="Hello, how can I help?")
    calls.call_message_add(call=call, role="user", content="Where is my order 42?")
    if tools:
        calls.call_tool_invocation_add(
            call=call,
            tool_name="lookup_order",
            request={"order": "42"},
            response='{"status": "shipped"}',
            status="success",
            duration_ms=80,
        )
        calls.call_tool_invocation_add(
            call=call,
            tool_name="send_digits",
            request={"digits": "1"},
            response="{}",
            status="success",
            duration_ms=5,
        )
    calls.call_message_add(call=call, role="assistant", content="It has shipped.")
    calls.call_message_add(call=call, role="user", content="Great, transfer me to a person please.")
    if tools:
        calls.call_tool_invocation_add(
            call=call, tool_name="transfer_call", request={}, response="{}", status="success", duration_ms=5
        )
    calls.call_finish(call=call, status="completed")
    return call


def test_a_recorded_call_becomes_a_reply_test(owner: Any, agent: Agent) -> None:
    call = recorded_call(agent)
    response = owner.client.post(f"/public/v1/calls/{call.pk}/tests")
    assert response.status_code == 201, response.json()
    test = response.json()
    assert test["agentId"] == str(agent.pk)
    assert test["name"] == "From call 2026-11-20 14:05 UTC"
    assert test["kind"] == "reply"
    assert test["turns"] == [{"user": "Where is my order 42?"}, {"user": "Great, transfer me to a person please."}]
    assert test["variables"] == {"customer_name": "Ann"}
    # send_digits (phone only) is not offered to a test session: left out.
    assert test["expect"] == {
        "toolCalls": [{"name": "lookup_order", "argumentsInclude": {"order": "42"}}, {"name": "transfer_call"}]
    }
    assert test["tags"] == ["from-call"] and test["toolMocks"] == []
    assert owner.client.get(url(agent, test["id"])).json() == test


def test_a_call_without_tool_calls_expects_none(owner: Any, agent: Agent) -> None:
    call = recorded_call(agent, tools=False)
    test = owner.client.post(f"/public/v1/calls/{call.pk}/tests").json()
    assert test["expect"] == {"noToolCalls": True}


def test_a_call_without_caller_turns_or_agent_is_refused(owner: Any, outsider: Any, agent: Agent) -> None:
    silent = Call.objects.create(
        organization=agent.organization,
        agent=agent,
        agent_name=agent.name,
        channel="web",
        from_number="web",
        to_number="web",
        started_at=datetime(2026, 11, 20, 14, 5, tzinfo=UTC),
    )
    calls.call_message_add(call=silent, role="assistant", content="Hello?")
    response = owner.client.post(f"/public/v1/calls/{silent.pk}/tests")
    assert response.status_code == 400 and "no caller turns" in response.json()["error"]

    call = recorded_call(agent)
    assert outsider.client.post(f"/public/v1/calls/{call.pk}/tests").json() == {"error": "Call not found"}
    assert outsider.client.post(f"/public/v1/calls/{call.pk}/tests").status_code == 404
    assert owner.client.post("/public/v1/calls/nope/tests").status_code == 400
    Call.objects.filter(pk=call.pk).update(agent=None)
    response = owner.client.post(f"/public/v1/calls/{call.pk}/tests")
    assert response.status_code == 400 and "agent was deleted" in response.json()["error"]
    assert not AgentTest.objects.exists()
