"""The tool dispatcher against real servers on loopback ports: webhook and http tools (aiohttp
receiver), MCP tools (the SDK's own server), the native search_knowledge and transfer_call; the call
record and the agent log it writes."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from typing import Any
from urllib.parse import parse_qsl

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from agents.models import AgentTool, McpServer, McpToolSelection
from agents.tools.mcp import Connection, McpSession, McpTimeout, list_tools
from calls.logging import flush_agent_logs
from calls.models import AgentLog, ToolInvocation
from knowledge import services as knowledge_services
from realtime.engine.contracts import ToolCall, ToolOutcome
from realtime.engine.session.records import CallRecorder
from realtime.engine.tools.dispatcher import ToolDispatcher
from telephony.models import PhoneNumber
from testing.mcp import MCP_BEARER_TOKEN, LoopbackMcp, mcp_server_fixture  # noqa: F401 - fixture
from testing.servers import closed_port_url
from testing.webhooks import (
    LoopbackReceiver,
    Reply,
    allow_loopback_fixture,  # noqa: F401 - fixture
    receiver_fixture,  # noqa: F401 - fixture
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_db_threads")]

SECRET = "whsec-Kq7Zr2Wm9Tx4"
ORDER_SCHEMA = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string", "description": "The order number"},
        "quantity": {"type": "integer", "minimum": 1},
    },
    "required": ["order_id"],
}


# --- helpers ------------------------------------------------------------------------------------


def add_tool(agent: Any, **fields: Any) -> AgentTool:
    values: dict[str, Any] = {
        "name": "order_status",
        "description": "Look up the status of an order.",
        "parameter_schema": ORDER_SCHEMA,
        "timeout_ms": 5000,
    }
    values.update(fields)
    return AgentTool.objects.create(agent=agent, **values)


@pytest.fixture
def webhook_agent(owner: Any, make_agent: Any, receiver: LoopbackReceiver) -> Any:
    return make_agent(
        owner.organization,
        name="Ava",
        status="active",
        agent_type="webhook",
        server_url=receiver.url("/hook?team=support"),
        server_headers={"X-Tenant": "acme"},
        server_secret=SECRET,
    )


@pytest.fixture
def http_agent(owner: Any, make_agent: Any) -> Any:
    return make_agent(owner.organization, name="Hal", status="active", agent_type="http")


class Session:
    """One conversation's dispatcher and recorder, and what they wrote once finished."""

    def __init__(self, agent: Any, *, to_number: str | None = None) -> None:
        channel = "phone" if to_number else "web"
        self.recorder = CallRecorder(agent=agent, channel=channel, from_number="+14155550111", to_number=to_number)
        self.dispatcher = ToolDispatcher(agent=agent, recorder=self.recorder, to_number=to_number)

    async def start(self) -> Session:
        await self.recorder.start()
        await self.dispatcher.load()
        return self

    @property
    def names(self) -> list[str]:
        return [spec.name for spec in self.dispatcher.specs()]

    async def run(self, name: str, arguments: Any = None, call_id: str = "call_1") -> ToolOutcome:
        return await self.dispatcher.run(ToolCall(id=call_id, name=name, arguments=arguments or {}))

    async def finish(self) -> tuple[list[ToolInvocation], list[dict[str, Any]]]:
        await self.dispatcher.aclose()
        await self.recorder.finish("completed")
        await sync_to_async(flush_agent_logs)()
        invocations = await sync_to_async(list)(
            ToolInvocation.objects.filter(call=self.recorder.call).order_by("created_at", "sequence")
        )
        logs = await sync_to_async(list)(
            AgentLog.objects.filter(session_id=self.recorder.session_id)
            .order_by("timestamp", "sequence")
            .values("severity", "content")
        )
        return invocations, logs


def tool_lines(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"severity": line["severity"], **line["content"]} for line in logs if line["content"]["message"] == "tool call"
    ]


def result(outcome: ToolOutcome) -> Any:
    return json.loads(outcome.result)


# --- webhook tools ------------------------------------------------------------------------------


async def test_a_webhook_tool_call_is_one_signed_event_with_the_agent_headers(webhook_agent, receiver, allow_loopback):
    tool = await sync_to_async(add_tool)(webhook_agent)
    receiver.reply(Reply(json={"status": "shipped", "eta": "Friday"}))
    session = await Session(webhook_agent).start()
    assert session.names == ["order_status", "end_call"]
    spec = session.dispatcher.specs()[0]
    assert spec.description == "Look up the status of an order." and spec.parameters == ORDER_SCHEMA

    outcome = await session.run("order_status", {"order_id": "A-17", "quantity": 2}, call_id="call_abc")

    assert outcome == ToolOutcome(result=outcome.result, status="success", transfer_to=None)
    assert result(outcome) == {"status": "shipped", "eta": "Friday"}
    [request] = receiver.requests
    assert request.method == "POST" and request.path == "/hook" and request.query == {"team": "support"}
    assert request.json() == {
        "message": {
            "type": "agent:tool-call",
            "call": {"id": str(session.recorder.call.pk), "agentId": str(webhook_agent.pk)},
            "toolCall": {"id": "call_abc", "name": "order_status", "arguments": {"order_id": "A-17", "quantity": 2}},
        }
    }
    assert request.headers["content-type"] == "application/json"
    assert request.headers["x-tenant"] == "acme"
    expected = hmac.new(SECRET.encode(), request.body, hashlib.sha256).hexdigest()
    assert request.headers["x-service-signature"] == f"sha256={expected}"

    [invocation], logs = await session.finish()
    assert invocation.tool_name == "order_status"
    assert invocation.agent_tool_id == tool.pk
    assert invocation.request == {"order_id": "A-17", "quantity": 2}
    assert invocation.response == outcome.result
    assert invocation.status == "success"
    assert invocation.duration_ms >= 0
    [line] = tool_lines(logs)
    # The log keeps the duration to a hundredth of a millisecond, the record to the millisecond, both rounded
    # from the same measure (24.503 ms: 24.5 and 25).
    assert abs(line.pop("durationMs") - invocation.duration_ms) <= 0.5
    assert line == {
        "severity": "info",
        "message": "tool call",
        "tool": "order_status",
        "kind": "webhook",
        "status": "success",
    }


async def test_without_a_secret_there_is_no_signature_header(webhook_agent, receiver, allow_loopback):
    webhook_agent.server_secret = None
    await sync_to_async(webhook_agent.save)()
    await sync_to_async(add_tool)(webhook_agent)
    session = await Session(webhook_agent).start()
    await session.run("order_status", {"order_id": "A-17"})
    assert "x-service-signature" not in receiver.requests[0].headers
    await session.finish()


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (Reply(json=["a", "b"]), {"result": ["a", "b"]}),
        (Reply(json="shipped"), {"result": "shipped"}),
        (Reply(status=204), {}),
        (Reply(status=200, body=b"  "), {}),
    ],
)
async def test_a_reply_that_is_not_an_object_is_wrapped_and_an_empty_one_is_empty(
    webhook_agent, receiver, allow_loopback, reply, expected
):
    await sync_to_async(add_tool)(webhook_agent)
    receiver.reply(reply)
    session = await Session(webhook_agent).start()
    outcome = await session.run("order_status", {"order_id": "A-17"})
    assert (outcome.status, result(outcome)) == ("success", expected)
    await session.finish()


@pytest.mark.parametrize(
    ("on_error", "expected"),
    [("return_error", {"error": "The tool answered HTTP 500"}), ("return_empty", {})],
)
async def test_an_error_status_follows_on_error(webhook_agent, receiver, allow_loopback, on_error, expected):
    await sync_to_async(add_tool)(webhook_agent, on_error=on_error)
    receiver.reply(Reply(status=500, json={"detail": "database down"}))
    session = await Session(webhook_agent).start()

    outcome = await session.run("order_status", {"order_id": "A-17"})

    assert (outcome.status, result(outcome)) == ("error", expected)
    [invocation], logs = await session.finish()
    assert (invocation.status, invocation.response) == ("error", outcome.result)
    [line] = tool_lines(logs)
    assert line["severity"] == "warn" and line["status"] == "error"
    assert line["reason"] == "The tool answered HTTP 500"


@pytest.mark.parametrize(
    ("on_error", "expected"),
    [("return_error", {"error": "The tool did not answer within 0.4 seconds"}), ("return_empty", {})],
)
async def test_a_tool_that_does_not_answer_in_time_follows_on_error(
    webhook_agent, receiver, allow_loopback, on_error, expected
):
    # Below the API's 1000 ms minimum, to keep the test short; the rule is the same.
    await sync_to_async(add_tool)(webhook_agent, on_error=on_error, timeout_ms=400)
    receiver.reply(Reply(hold=True))
    session = await Session(webhook_agent).start()

    outcome = await session.run("order_status", {"order_id": "A-17"})

    assert (outcome.status, result(outcome)) == ("timeout", expected)
    receiver.release()
    [invocation], logs = await session.finish()
    assert invocation.status == "timeout" and 400 <= invocation.duration_ms < 2000
    [line] = tool_lines(logs)
    assert line["status"] == "timeout" and line["reason"] == "The tool did not answer within 0.4 seconds"


@pytest.mark.parametrize(
    ("arguments", "message", "reason"),
    [
        ({"quantity": 2}, "The argument 'order_id' is missing.", "invalid arguments: 'order_id' is missing"),
        (
            {"order_id": "A-17", "quantity": "lots"},
            "The argument 'quantity' is invalid: 'lots' is not of type 'integer'.",
            "invalid arguments: 'quantity' (type)",
        ),
        (
            {"order_id": "A-17", "quantity": 0},
            "The argument 'quantity' is invalid: 0 is less than the minimum of 1.",
            "invalid arguments: 'quantity' (minimum)",
        ),
    ],
)
async def test_invalid_arguments_go_back_to_the_brain_and_the_tool_is_not_contacted(
    webhook_agent, receiver, allow_loopback, arguments, message, reason
):
    await sync_to_async(add_tool)(webhook_agent, on_error="return_empty")
    session = await Session(webhook_agent).start()

    outcome = await session.run("order_status", arguments)

    assert (outcome.status, result(outcome)) == ("error", {"error": message})
    assert receiver.requests == []
    [invocation], logs = await session.finish()
    assert (invocation.status, invocation.request) == ("error", arguments)
    [line] = tool_lines(logs)
    assert line["reason"] == reason  # the place, never the value the brain sent


async def test_an_unknown_tool_is_an_error_naming_it_and_nothing_is_contacted(webhook_agent, receiver, allow_loopback):
    await sync_to_async(add_tool)(webhook_agent)
    session = await Session(webhook_agent).start()

    outcome = await session.run("cancel_everything", {"now": True})

    assert outcome.status == "error"
    assert result(outcome) == {"error": "There is no tool named 'cancel_everything' in this call."}
    assert receiver.requests == []
    [invocation], logs = await session.finish()
    assert (invocation.tool_name, invocation.status, invocation.agent_tool_id) == ("cancel_everything", "error", None)
    assert tool_lines(logs)[0]["kind"] == "unknown"


@pytest.mark.parametrize(
    ("on_error", "expected"),
    [
        ("return_error", {"error": "The tool's reply does not match its response schema (at 'status')."}),
        ("return_empty", {}),
    ],
)
async def test_a_reply_that_does_not_match_the_response_schema_is_an_error(
    webhook_agent, receiver, allow_loopback, on_error, expected
):
    response_schema = {
        "type": "object",
        "properties": {"status": {"enum": ["open", "shipped"]}},
        "required": ["status"],
    }
    await sync_to_async(add_tool)(webhook_agent, on_error=on_error, response_schema=response_schema)
    receiver.reply(Reply(json={"status": "shipped"}), Reply(json={"status": "lost"}))
    session = await Session(webhook_agent).start()

    good = await session.run("order_status", {"order_id": "A-1"})
    bad = await session.run("order_status", {"order_id": "A-2"})

    assert (good.status, result(good)) == ("success", {"status": "shipped"})
    assert (bad.status, result(bad)) == ("error", expected)
    invocations, _ = await session.finish()
    assert [i.status for i in invocations] == ["success", "error"]


async def test_a_reply_that_is_not_json_is_an_error(webhook_agent, receiver, allow_loopback):
    await sync_to_async(add_tool)(webhook_agent)
    receiver.reply(Reply(body="<html>oops</html>", content_type="text/html"))
    session = await Session(webhook_agent).start()
    outcome = await session.run("order_status", {"order_id": "A-1"})
    assert (outcome.status, result(outcome)) == ("error", {"error": "The tool's reply is not valid JSON"})
    await session.finish()


async def test_a_refused_destination_is_a_clear_error(webhook_agent, receiver):
    # No allow_loopback: the egress guard refuses 127.0.0.1.
    await sync_to_async(add_tool)(webhook_agent)
    session = await Session(webhook_agent).start()

    outcome = await session.run("order_status", {"order_id": "A-1"})

    assert outcome.status == "error"
    error = result(outcome)["error"]
    assert error.startswith("The tool may not be contacted: Refused outbound request to 127.0.0.1")
    assert "loopback" in error and "/hook" not in error and "team=support" not in error
    assert receiver.requests == []
    [invocation], logs = await session.finish()
    assert invocation.status == "error"
    assert "loopback" in tool_lines(logs)[0]["reason"]


async def test_a_request_cancelled_while_the_tool_runs_is_recorded_as_cancelled(
    webhook_agent, receiver, allow_loopback
):
    await sync_to_async(add_tool)(webhook_agent)
    receiver.reply(Reply(hold=True))
    session = await Session(webhook_agent).start()

    running = asyncio.create_task(session.run("order_status", {"order_id": "A-1"}))
    await receiver.until(lambda: receiver.requests, what="the tool's request", timeout=5)
    running.cancel()  # what a barge-in does to the brain's response
    with pytest.raises(asyncio.CancelledError):
        await running

    receiver.release()
    [invocation], logs = await session.finish()
    # Its result was no longer needed: not a failure of the tool (never `error`).
    assert (invocation.status, json.loads(invocation.response)) == ("cancelled", {"cancelled": True})
    assert (tool_lines(logs)[0]["status"], tool_lines(logs)[0]["reason"]) == ("cancelled", "cancelled")


async def test_a_webhook_receiver_in_a_thread_of_its_own_works_the_same(webhook_agent, allow_loopback):
    with LoopbackReceiver(default=Reply(json={"status": "open"})) as threaded:
        webhook_agent.server_url = threaded.url("/hook")
        await sync_to_async(webhook_agent.save)()
        await sync_to_async(add_tool)(webhook_agent)
        session = await Session(webhook_agent).start()
        outcome = await session.run("order_status", {"order_id": "A-1"})
        await session.finish()
    assert result(outcome) == {"status": "open"}
    assert threaded.requests[0].json()["message"]["toolCall"]["arguments"] == {"order_id": "A-1"}


async def test_a_server_that_is_not_listening_is_a_connection_failure(webhook_agent, allow_loopback):
    webhook_agent.server_url = closed_port_url("/hook")
    await sync_to_async(webhook_agent.save)()
    await sync_to_async(add_tool)(webhook_agent)
    session = await Session(webhook_agent).start()
    outcome = await session.run("order_status", {"order_id": "A-1"})
    assert result(outcome) == {"error": "The tool could not be reached (the connection failed)"}
    await session.finish()


async def test_a_webhook_agent_without_server_url_offers_no_custom_tools(owner, make_agent, allow_loopback):
    agent = await sync_to_async(make_agent)(owner.organization, agent_type="webhook", server_url=None)
    await sync_to_async(add_tool)(agent)
    session = await Session(agent).start()
    assert session.names == ["end_call"]
    _, logs = await session.finish()
    skipped = [line["content"] for line in logs if line["content"]["message"] == "tool not offered"]
    assert skipped == [{"message": "tool not offered", "tool": "order_status", "reason": "the agent has no serverUrl"}]


async def test_static_agents_and_disabled_tools_offer_nothing(owner, make_agent, receiver, allow_loopback):
    static = await sync_to_async(make_agent)(owner.organization, agent_type="static", server_url=receiver.url())
    await sync_to_async(add_tool)(static)
    webhook = await sync_to_async(make_agent)(owner.organization, agent_type="webhook", server_url=receiver.url())
    await sync_to_async(add_tool)(webhook, enabled=False)
    for agent in (static, webhook):
        session = await Session(agent).start()
        assert session.names == ["end_call"]
        await session.finish()


# --- http tools ---------------------------------------------------------------------------------


async def test_an_http_get_tool_sends_the_arguments_as_the_query_string(http_agent, receiver, allow_loopback):
    schema = {
        "type": "object",
        "properties": {
            "order_id": {"type": "string"},
            "limit": {"type": "integer"},
            "open": {"type": "boolean"},
            "filters": {"type": "object"},
            "note": {"type": ["string", "null"]},
        },
    }
    tool = await sync_to_async(add_tool)(
        http_agent,
        parameter_schema=schema,
        tool_url=receiver.url("/orders?source=ivr&limit=10"),
        tool_method="GET",
        tool_headers={"Authorization": "Bearer tool-key-7Hq"},
    )
    receiver.reply(Reply(json={"orders": [{"id": "A-1", "status": "open"}]}))
    session = await Session(http_agent).start()

    arguments = {"order_id": "A 1/é", "limit": 2, "open": True, "filters": {"since": "2026-01-01"}, "note": None}
    outcome = await session.run("order_status", arguments)

    assert (outcome.status, result(outcome)) == ("success", {"orders": [{"id": "A-1", "status": "open"}]})
    [request] = receiver.requests
    assert (request.method, request.path, request.body) == ("GET", "/orders", b"")
    assert parse_qsl(request.query_string) == [
        ("source", "ivr"),
        ("order_id", "A 1/é"),
        ("limit", "2"),
        ("open", "true"),
        ("filters", '{"since":"2026-01-01"}'),
    ]
    assert request.headers["authorization"] == "Bearer tool-key-7Hq"
    assert "x-service-signature" not in request.headers
    [invocation], _ = await session.finish()
    assert invocation.agent_tool_id == tool.pk


async def test_an_http_post_tool_sends_a_json_body_and_a_text_reply_becomes_text(http_agent, receiver, allow_loopback):
    await sync_to_async(add_tool)(http_agent, tool_url=receiver.url("/orders"), tool_method="POST")
    receiver.reply(Reply(body="Order A-1 shipped. " * 300, content_type="text/plain"))
    session = await Session(http_agent).start()

    outcome = await session.run("order_status", {"order_id": "A-1", "quantity": 3})

    [request] = receiver.requests
    assert request.method == "POST" and request.headers["content-type"] == "application/json"
    assert json.loads(request.body) == {"order_id": "A-1", "quantity": 3}
    text = result(outcome)["text"]
    assert outcome.status == "success" and len(text) == 4000 and text.startswith("Order A-1 shipped.")
    await session.finish()


async def test_an_http_tool_error_status_follows_on_error(http_agent, receiver, allow_loopback):
    await sync_to_async(add_tool)(http_agent, tool_url=receiver.url("/orders"), tool_method="PUT")
    receiver.reply(Reply(status=404, body="not here"))
    session = await Session(http_agent).start()
    outcome = await session.run("order_status", {"order_id": "A-1"})
    assert (outcome.status, result(outcome)) == ("error", {"error": "The tool answered HTTP 404"})
    await session.finish()


# --- MCP tools ----------------------------------------------------------------------------------


async def connect_mcp(agent: Any, url: str, *tools: str, name: str = "Orders", **auth: Any) -> McpServer:
    """A connected server as the dashboard leaves it (cached definitions from the server itself)."""
    connection = Connection(url=url, auth_type=auth.get("auth_type", "none"), credentials=auth.get("credentials"))
    definitions = await list_tools(connection)
    server = await sync_to_async(McpServer.objects.create)(
        organization_id=agent.organization_id, name=name, url=url, status="active", tools=definitions, **auth
    )
    for tool in tools:
        await sync_to_async(McpToolSelection.objects.create)(agent=agent, server=server, tool_name=tool)
    return server


async def test_mcp_tools_share_one_session_per_conversation_closed_at_the_end(
    http_agent, mcp_server: LoopbackMcp, allow_loopback
):
    await connect_mcp(
        http_agent,
        mcp_server.bearer_url,
        "lookup_order",
        "order_notes",
        "cancel_order",
        auth_type="bearer",
        credentials={"token": MCP_BEARER_TOKEN},
    )
    session = await Session(http_agent).start()
    assert sorted(session.names) == ["cancel_order", "end_call", "lookup_order", "order_notes"]
    lookup = next(spec for spec in session.dispatcher.specs() if spec.name == "lookup_order")
    assert lookup.description == "Look up an order by its id." and lookup.parameters["required"] == ["order_id"]
    opened_before, closed_before = len(mcp_server.sessions_opened), len(mcp_server.sessions_closed)

    # Each brain response runs in a task of its own: the session must outlive the task that opened it.
    first = await asyncio.create_task(session.run("lookup_order", {"order_id": "A-1"}))
    second = await asyncio.create_task(session.run("order_notes", {"order_id": "A-1"}))
    refused = await asyncio.create_task(session.run("cancel_order", {"order_id": "A-1"}))

    assert (first.status, result(first)) == ("success", {"orderId": "A-1", "status": "shipped"})
    assert (second.status, result(second)) == (
        "success",
        {"text": "Order A-1 was packed.\nOrder A-1 left the warehouse."},
    )
    assert (refused.status, result(refused)) == (
        "error",
        {"error": "Error executing tool cancel_order: Order A-1 is locked"},
    )
    [opened] = mcp_server.sessions_opened[opened_before:]
    assert mcp_server.sessions_closed[closed_before:] == []

    await asyncio.create_task(session.dispatcher.aclose())
    await session.dispatcher.aclose()  # idempotent
    assert mcp_server.sessions_closed[closed_before:] == [opened]
    assert mcp_server.requests_in(opened) >= 4  # initialized notification and three calls

    invocations, logs = await session.finish()
    assert [(i.tool_name, i.status, i.agent_tool_id) for i in invocations] == [
        ("lookup_order", "success", None),
        ("order_notes", "success", None),
        ("cancel_order", "error", None),
    ]
    lines = tool_lines(logs)
    assert [line["kind"] for line in lines] == ["mcp", "mcp", "mcp"]
    assert lines[2]["reason"] == "the tool reported an error"  # not the tool's own words


async def test_a_slow_mcp_call_times_out_and_the_session_stays_open(mcp_server: LoopbackMcp, allow_loopback):
    session = McpSession(Connection(url=mcp_server.url, auth_type="none", credentials=None))

    with pytest.raises(McpTimeout, match=r"did not answer within 0\.3 seconds"):
        await session.call_tool("slow_lookup", {"seconds": 2}, timeout_s=0.3)
    reply = await session.call_tool("lookup_order", {"order_id": "A-9"}, timeout_s=5)
    await session.aclose()

    assert reply == {
        "isError": False,
        "content": ['{\n  "orderId": "A-9",\n  "status": "shipped"\n}'],
        "structuredContent": {"orderId": "A-9", "status": "shipped"},
    }
    [opened] = mcp_server.sessions_opened
    assert mcp_server.sessions_closed == [opened]


async def test_an_unreachable_mcp_server_is_an_error_result(http_agent, mcp_server: LoopbackMcp, allow_loopback):
    server = await connect_mcp(http_agent, mcp_server.url, "lookup_order")
    server.url = closed_port_url("/mcp")
    await sync_to_async(server.save)()
    session = await Session(http_agent).start()

    outcome = await session.run("lookup_order", {"order_id": "A-1"})

    assert outcome.status == "error"
    assert result(outcome) == {"error": "The tool server failed: Cannot connect to 127.0.0.1: connection failed"}
    await session.finish()


async def test_an_mcp_tool_with_a_custom_tool_name_is_not_offered(
    http_agent, receiver, mcp_server: LoopbackMcp, allow_loopback
):
    await sync_to_async(add_tool)(http_agent, name="lookup_order", tool_url=receiver.url("/orders"))
    await connect_mcp(http_agent, mcp_server.url, "lookup_order", "order_notes")
    session = await Session(http_agent).start()

    assert session.names == ["lookup_order", "order_notes", "end_call"]
    outcome = await session.run("lookup_order", {"order_id": "A-1"})
    assert outcome.status == "success" and len(receiver.requests) == 1  # the custom tool answered

    _, logs = await session.finish()
    skipped = [line["content"] for line in logs if line["content"]["message"] == "tool not offered"]
    assert skipped == [
        {"message": "tool not offered", "tool": "lookup_order", "reason": "the name is reserved or already used"}
    ]


async def test_an_mcp_tool_name_is_offered_in_the_characters_models_accept(
    http_agent, mcp_server: LoopbackMcp, allow_loopback
):
    await connect_mcp(http_agent, mcp_server.url, "orders.track")
    session = await Session(http_agent).start()

    assert session.names == ["orders_track", "end_call"]
    outcome = await session.run("orders_track", {"order_id": "A-1"})

    assert (outcome.status, result(outcome)) == ("success", {"orderId": "A-1", "carrier": "UPS"})
    [invocation], _ = await session.finish()
    assert invocation.tool_name == "orders_track"


async def test_mcp_selections_of_inactive_servers_are_not_offered(http_agent, mcp_server: LoopbackMcp, allow_loopback):
    server = await connect_mcp(http_agent, mcp_server.url, "lookup_order")
    server.status = "inactive"
    await sync_to_async(server.save)()
    session = await Session(http_agent).start()
    assert session.names == ["end_call"]
    await session.finish()


# --- native tools -------------------------------------------------------------------------------

ROUTER = """# Router manual

## Resetting the router

Hold the reset button on the back for ten seconds until the lights blink orange.

## Error codes

Error code X7-4471 means the fibre cable is unplugged; plug it back in firmly.
"""


async def test_search_knowledge_is_offered_with_a_ready_document_and_returns_passages(owner, make_agent):
    agent = await sync_to_async(make_agent)(owner.organization, agent_type="static")
    session = await Session(agent).start()
    assert "search_knowledge" not in session.names
    await session.finish()

    await sync_to_async(knowledge_services.document_create)(
        organization=owner.organization, agent_id=str(agent.pk), content=ROUTER
    )
    session = await Session(agent).start()
    assert session.names == ["search_knowledge", "end_call"]
    spec = session.dispatcher.specs()[0]
    assert spec.parameters["required"] == ["query"]
    assert spec.parameters["properties"]["query"]["type"] == "string"

    outcome = await session.run("search_knowledge", {"query": "how do I reset my router"})

    assert outcome.status == "success"
    passages = result(outcome)["passages"]
    assert 1 <= len(passages) <= 3
    assert passages[0]["document"] == "Router manual"
    assert "reset button" in passages[0]["text"]
    assert [p["score"] for p in passages] == sorted((p["score"] for p in passages), reverse=True)
    assert all(round(p["score"], 3) == p["score"] for p in passages)
    missing = await session.run("search_knowledge", {})
    assert result(missing) == {"error": "The argument 'query' is missing."}
    [invocation, _], _ = await session.finish()
    assert (invocation.tool_name, invocation.request, invocation.agent_tool_id) == (
        "search_knowledge",
        {"query": "how do I reset my router"},
        None,
    )


async def test_transfer_call_is_offered_only_when_a_destination_exists(owner, make_agent):
    agent = await sync_to_async(make_agent)(owner.organization, agent_type="static")
    session = await Session(agent).start()
    assert "transfer_call" not in session.names
    outcome = await session.run("transfer_call", {})
    assert outcome.status == "error" and outcome.transfer_to is None
    await session.finish()


async def test_transfer_call_uses_the_agent_handoff_number(owner, make_agent):
    agent = await sync_to_async(make_agent)(
        owner.organization, agent_type="static", handoff_phone_number="+14155550100"
    )
    session = await Session(agent).start()
    assert session.names == ["transfer_call", "end_call"]
    spec = session.dispatcher.specs()[0]
    assert "required" not in spec.parameters and spec.parameters["properties"]["reason"]["type"] == "string"

    outcome = await session.run("transfer_call", {"reason": "wants a person"})

    assert outcome == ToolOutcome(result=outcome.result, status="success", transfer_to="+14155550100") and result(
        outcome
    ) == {"status": "transferring", "phoneNumber": "+14155550100"}
    [invocation], logs = await session.finish()
    assert invocation.status == "success"
    assert tool_lines(logs)[0]["kind"] == "transfer_call"


async def test_the_handoff_of_the_number_called_wins_over_the_agent_handoff(owner, make_agent):
    agent = await sync_to_async(make_agent)(
        owner.organization, agent_type="static", handoff_phone_number="+14155550100"
    )
    for number, handoff in (("+14155550142", "+14155550199"), ("+14155550143", None)):
        await sync_to_async(PhoneNumber.objects.create)(
            organization=owner.organization,
            phone_number=number,
            country_code="US",
            assigned_agent=agent,
            handoff_phone_number=handoff,
            assigned_at=timezone.now(),
        )

    called = await Session(agent, to_number="+14155550142").start()
    assert (await called.run("transfer_call")).transfer_to == "+14155550199"
    await called.finish()
    # A number without its own handoff (and a web call) fall back to the agent's.
    for to_number in ("+14155550143", None):
        other = await Session(agent, to_number=to_number).start()
        assert (await other.run("transfer_call")).transfer_to == "+14155550100"
        await other.finish()


async def test_end_call_is_offered_unless_the_agent_turns_it_off(owner, make_agent):
    on = await sync_to_async(make_agent)(owner.organization, agent_type="static")
    off = await sync_to_async(make_agent)(owner.organization, agent_type="static", end_call_enabled=False)

    session = await Session(on).start()
    assert session.names == ["end_call"]
    outcome = await session.run("end_call")
    assert (outcome.status, outcome.end_call, result(outcome)) == ("success", True, {"status": "ending"})
    await session.finish()

    session = await Session(off).start()
    assert session.names == []
    outcome = await session.run("end_call")  # a brain that calls it anyway: an unknown tool, the call goes on
    assert (outcome.status, outcome.end_call) == ("error", False)
    await session.finish()
