"""A URL the HTTP client cannot encode (issue 34): refused when it is saved, wherever a destination is saved
(a webhook, an agent's serverUrl, a tool's toolUrl, an MCP server in the dashboard), with a 400 naming the
field; the same check (kit.validation.url_problem) the guard runs before every request."""

from __future__ import annotations

from typing import Any

import pytest

from agents.models import Agent, AgentTool, McpServer
from calls.models import WebhookEndpoint

UNENCODABLE = [
    ("http://a\u200b.example/hook", "Invalid IDNA hostname"),  # a zero-width space IDNA refuses
    ("http://a..b.example/hook", "empty label"),  # an empty DNS label
]
GOOD = "https://hooks.example.com/voice"


def refused(response: Any, field: str, reason: str) -> None:
    assert response.status_code == 400, response.json()
    [message] = response.json()["issues"][field]
    assert message.startswith("The HTTP client cannot encode this URL") and reason in message


@pytest.mark.parametrize(("url", "reason"), UNENCODABLE)
def test_a_webhook_url_the_http_client_cannot_encode_is_a_400_naming_the_field(owner, url, reason):
    created = owner.client.post("/public/v1/webhooks", {"url": url, "events": ["call.ended"]}, format="json")
    refused(created, "url", reason)
    assert not WebhookEndpoint.objects.exists()

    good = owner.client.post("/public/v1/webhooks", {"url": GOOD, "events": ["call.ended"]}, format="json")
    assert good.status_code == 201
    changed = owner.client.patch(f"/public/v1/webhooks/{good.json()['id']}", {"url": url}, format="json")
    refused(changed, "url", reason)
    assert WebhookEndpoint.objects.get().url == GOOD


@pytest.mark.parametrize(("url", "reason"), UNENCODABLE)
def test_an_agents_server_url_the_http_client_cannot_encode_is_a_400(owner, url, reason):
    body = {"name": "Support", "instructions": "Help callers.", "agentType": "webhook", "serverUrl": url}
    refused(owner.client.post("/public/v1/agents", body, format="json"), "serverUrl", reason)
    assert not Agent.objects.exists()


@pytest.mark.parametrize(("url", "reason"), UNENCODABLE)
def test_a_tool_url_the_http_client_cannot_encode_is_a_400(owner, make_agent, url, reason):
    agent = make_agent(owner.organization, agent_type="http")
    body = {"name": "lookup_order", "description": "Look up an order", "toolUrl": url}
    refused(owner.client.post(f"/public/v1/agents/{agent.id}/tools", body, format="json"), "toolUrl", reason)
    assert not AgentTool.objects.exists()


@pytest.mark.parametrize(("url", "reason"), UNENCODABLE)
def test_an_mcp_server_url_the_http_client_cannot_encode_is_refused_by_the_dashboard(owner, admin_client, url, reason):
    form = {"organization": str(owner.organization.pk), "name": "Orders", "url": url, "auth_type": ""}
    response = admin_client.post("/admin/agents/mcpserver/add/", form)
    assert response.status_code == 200  # the form again, with the error
    page = response.content.decode()
    assert "The HTTP client cannot encode this URL" in page and reason in page
    assert not McpServer.objects.exists()


def test_an_international_host_name_is_saved_as_written(owner):
    url = "https://bücher.example/hooks"
    created = owner.client.post("/public/v1/webhooks", {"url": url, "events": ["call.ended"]}, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["url"] == url
