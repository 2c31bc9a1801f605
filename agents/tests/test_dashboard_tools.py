"""Staff add, change and test custom tools in the dashboard. Saves go through the tool services after the
API's request serializer (refusals on the form, nothing saved); a test call runs the conversation's own
tool dispatcher against a real server on a loopback port and shows the request sent, the response
received and what the model gets, with header values hidden."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from agents.models import AgentTool
from testing.dashboard import errors
from testing.factories import AgentToolFactory
from testing.servers import closed_port_url
from testing.webhooks import LoopbackReceiver, Reply

pytestmark = pytest.mark.django_db

ADD = "/admin/agents/agenttool/add/"
ORDER_SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "quantity": {"type": "integer", "minimum": 1}},
    "required": ["order_id"],
}
API_KEY = "key-4Rt7Wp2Nc6"
# A test call runs the tool dispatcher, which reaches the database the way a call does
# (database_sync_to_async, closing stale connections around each query): no test-wide transaction.
TEST_CALL = pytest.mark.django_db(transaction=True)


def tool_form(agent: Any, **changes: Any) -> dict[str, Any]:
    data = {
        "agent": str(agent.pk),
        "name": "order_status",
        "description": "Look up the status of an order.",
        "parameter_schema": json.dumps(ORDER_SCHEMA),
        "response_schema": "",
        "timeout_ms": "5000",
        "on_error": "return_error",
        "enabled": "on",
        "tool_url": "https://tools.example.com/orders",
        "tool_method": "POST",
        "new_tool_headers": "",
    }
    data.update(changes)
    return {name: value for name, value in data.items() if value is not None}


@pytest.fixture
def hal(owner: Any, make_agent: Any) -> Any:
    """An http agent: each tool has its own URL."""
    return make_agent(owner.organization, name="Hal", agent_type="http")


@pytest.fixture
def receiver(settings: Any) -> Iterator[LoopbackReceiver]:
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    with LoopbackReceiver() as hook:
        yield hook


def test_a_tool_is_added_through_the_service(staff_client: Client, owner: Any, hal: Any) -> None:
    assert f'value="{hal.pk}" selected' in staff_client.get(f"{ADD}?agent={hal.pk}").content.decode()

    response = staff_client.post(ADD, tool_form(hal, new_tool_headers=f"X-Api-Key: {API_KEY}"))

    assert response.status_code == 302, errors(response.content.decode())
    tool = AgentTool.objects.get()
    assert (tool.agent, tool.name, tool.parameter_schema, tool.timeout_ms) == (hal, "order_status", ORDER_SCHEMA, 5000)
    assert tool.tool_headers == {"X-Api-Key": API_KEY}
    listed = owner.client.get(f"/public/v1/agents/{hal.pk}/tools").json()
    assert [item["name"] for item in listed] == ["order_status"]
    page = staff_client.get(f"/admin/agents/agenttool/{tool.pk}/change/").content.decode()
    assert API_KEY not in page and "X-Api-Key: (hidden)" in page


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"parameter_schema": '{"type": "object", "properties": 5}'}, "parameter_schema", "Not a valid JSON Schema"),
        ({"parameter_schema": '{"type": "string"}'}, "parameter_schema", 'the schema needs "type": "object"'),
        ({"parameter_schema": "{not json"}, "parameter_schema", "Enter a valid JSON."),
        ({"response_schema": '{"type": 12}'}, "response_schema", "Not a valid JSON Schema"),
        ({"tool_url": "file:///etc/passwd"}, "tool_url", "Only http and https URLs are allowed."),
        ({"tool_url": ""}, "tool_url", "Required for tools of http agents."),
        ({"name": "search_knowledge"}, "name", "reserved for a native tool"),
        ({"name": "order status"}, "name", "letters, digits, underscores or hyphens"),
        ({"timeout_ms": "60000"}, "timeout_ms", "less than or equal to 30000"),
        ({"new_tool_headers": "Content-Length: 5"}, "new_tool_headers", "set by the service"),
    ],
)
def test_a_refused_tool_is_shown_on_the_form_and_nothing_is_saved(
    staff_client: Client, hal: Any, changes: dict[str, str], field: str, message: str
) -> None:
    response = staff_client.post(ADD, tool_form(hal, **changes))

    assert response.status_code == 200
    page = response.content.decode()
    assert any(message in error for error in errors(page)), errors(page)
    assert f"errors field-{field}" in page
    assert AgentTool.objects.count() == 0


def test_a_webhook_agent_without_a_server_url_cannot_get_a_tool(
    staff_client: Client, owner: Any, make_agent: Any
) -> None:
    ava = make_agent(owner.organization, name="Ava", agent_type="webhook")

    response = staff_client.post(ADD, tool_form(ava, tool_url=""))

    assert response.status_code == 200
    assert any(
        "serverUrl: Save a serverUrl on the agent before you create a tool." in e
        for e in errors(response.content.decode())
    )
    assert AgentTool.objects.count() == 0


def test_a_name_the_agent_already_uses_is_refused(staff_client: Client, hal: Any) -> None:
    assert staff_client.post(ADD, tool_form(hal)).status_code == 302

    response = staff_client.post(ADD, tool_form(hal, description="Another one."))

    assert response.status_code == 200
    assert any("The agent already has a tool named order_status." in e for e in errors(response.content.decode()))
    assert AgentTool.objects.count() == 1


def test_an_edit_replaces_the_tool_and_keeps_its_headers_unless_told(staff_client: Client, hal: Any) -> None:
    tool = AgentToolFactory(
        agent=hal,
        name="order_status",
        parameter_schema=ORDER_SCHEMA,
        tool_url="https://tools.example.com/a",
        tool_headers={"X-Api-Key": API_KEY},
    )
    url = f"/admin/agents/agenttool/{tool.pk}/change/"

    response = staff_client.post(url, tool_form(hal, name="order_lookup", tool_method="GET", enabled=None))

    assert response.status_code == 302, errors(response.content.decode())
    tool.refresh_from_db()
    assert (tool.name, tool.tool_method, tool.enabled, tool.tool_headers) == (
        "order_lookup",
        "GET",
        False,
        {"X-Api-Key": API_KEY},
    )

    refused = staff_client.post(url, tool_form(hal, parameter_schema='{"type": "object", "required": 3}'))
    assert refused.status_code == 200
    tool.refresh_from_db()
    assert tool.name == "order_lookup" and tool.parameter_schema == ORDER_SCHEMA

    staff_client.post(url, tool_form(hal, clear_tool_headers="on"))
    tool.refresh_from_db()
    assert tool.tool_headers == {}


def test_deleting_a_tool_goes_through_the_service(staff_client: Client, hal: Any) -> None:
    tool = AgentToolFactory(agent=hal, name="order_status", tool_url="https://tools.example.com/a")

    response = staff_client.post(f"/admin/agents/agenttool/{tool.pk}/delete/", {"post": "yes"})

    assert response.status_code == 302
    assert AgentTool.objects.count() == 0


# --- test calls -------------------------------------------------------------------------------------


@TEST_CALL
def test_a_test_call_shows_the_request_sent_and_the_response_received(
    staff_client: Client, hal: Any, receiver: LoopbackReceiver
) -> None:
    receiver.reply(Reply(json={"status": "shipped", "eta": "tomorrow"}))
    tool = AgentToolFactory(
        agent=hal,
        name="order_status",
        parameter_schema=ORDER_SCHEMA,
        tool_url=receiver.url("/orders?team=a"),
        tool_headers={"X-Api-Key": API_KEY},
        timeout_ms=5000,
    )
    url = f"/admin/agents/agenttool/{tool.pk}/test/"
    assert "Sample arguments" in staff_client.get(url).content.decode()

    response = staff_client.post(url, {"arguments": '{"order_id": "A-17", "quantity": 2}'})

    assert response.status_code == 200
    page = response.content.decode()
    [sent] = receiver.requests
    assert (sent.method, sent.path, sent.json()) == ("POST", "/orders", {"order_id": "A-17", "quantity": 2})
    assert sent.headers["x-api-key"] == API_KEY
    assert 'Result: <span class="status-success">success</span>' in page
    assert f"POST {receiver.url('/orders?team=a')}" in page
    assert "X-Api-Key: (hidden)" in page and API_KEY not in page
    assert "&quot;order_id&quot;: &quot;A-17&quot;" in page  # the body sent
    assert "HTTP 200" in page and "&quot;eta&quot;: &quot;tomorrow&quot;" in page  # the reply
    assert 'id="trial-model-result">{\n  &quot;status&quot;: &quot;shipped&quot;' in page
    assert "tool call (tool order_status, kind http, status success" in page


@TEST_CALL
def test_a_webhook_tool_test_posts_the_signed_tool_call_event(
    staff_client: Client, owner: Any, make_agent: Any, receiver: LoopbackReceiver
) -> None:
    ava = make_agent(
        owner.organization, name="Ava", server_url=receiver.url("/hook"), server_secret="whsec-Kq7Zr2Wm9Tx4"
    )
    tool = AgentToolFactory(agent=ava, name="order_status", parameter_schema=ORDER_SCHEMA)

    page = staff_client.post(
        f"/admin/agents/agenttool/{tool.pk}/test/", {"arguments": '{"order_id": "A-17"}'}
    ).content.decode()

    [sent] = receiver.requests
    message = sent.json()["message"]
    assert message["type"] == "agent:tool-call" and message["call"] == {"id": None, "agentId": str(ava.pk)}
    assert message["toolCall"]["arguments"] == {"order_id": "A-17"}
    assert sent.headers["x-service-signature"].startswith("sha256=")
    assert "x-service-signature: (hidden)" in page and "whsec-Kq7Zr2Wm9Tx4" not in page
    assert "&quot;agent:tool-call&quot;" in page and "HTTP 200" in page


@TEST_CALL
def test_arguments_that_do_not_match_the_schema_are_answered_without_a_request(
    staff_client: Client, hal: Any, receiver: LoopbackReceiver
) -> None:
    tool = AgentToolFactory(agent=hal, name="order_status", parameter_schema=ORDER_SCHEMA, tool_url=receiver.url())

    page = staff_client.post(
        f"/admin/agents/agenttool/{tool.pk}/test/", {"arguments": '{"quantity": 0}'}
    ).content.decode()

    assert receiver.requests == []
    assert "No request was sent" in page
    assert "The argument &#x27;order_id&#x27; is missing." in page


@TEST_CALL
def test_a_refused_destination_is_reported_and_not_contacted(staff_client: Client, hal: Any) -> None:
    # Loopback is not allowed by default: the egress guard refuses it, as in a call.
    tool = AgentToolFactory(
        agent=hal, name="order_status", parameter_schema=ORDER_SCHEMA, tool_url=closed_port_url("/x")
    )

    page = staff_client.post(
        f"/admin/agents/agenttool/{tool.pk}/test/", {"arguments": '{"order_id": "A-17"}'}
    ).content.decode()

    assert "status-error" in page
    assert "The tool may not be contacted: Refused outbound request to 127.0.0.1" in page
    assert "No response" in page


@TEST_CALL
def test_sample_arguments_must_be_json(staff_client: Client, hal: Any) -> None:
    tool = AgentToolFactory(agent=hal, name="order_status", tool_url="https://tools.example.com/a")

    page = staff_client.post(f"/admin/agents/agenttool/{tool.pk}/test/", {"arguments": "order A-17"}).content.decode()

    assert "Enter a valid JSON." in page and "trial-result" not in page


@TEST_CALL
def test_a_disabled_tool_is_not_offered_and_says_so(staff_client: Client, hal: Any, receiver: LoopbackReceiver) -> None:
    tool = AgentToolFactory(agent=hal, name="order_status", tool_url=receiver.url(), enabled=False)

    page = staff_client.post(f"/admin/agents/agenttool/{tool.pk}/test/", {"arguments": "{}"}).content.decode()

    assert "Not offered to calls" in page and "The tool is disabled" in page
    assert receiver.requests == []
