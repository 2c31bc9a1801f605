"""The dashboard refuses a destination that every request would refuse (the egress guard's check, as
the API does when saving), and warns on a saved one whose host does not resolve right now."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from agents.models import AgentTool, McpServer
from testing.dashboard import errors

pytestmark = pytest.mark.django_db

UNRESOLVED = "https://no-such-host.invalid/hook"


def test_an_mcp_server_at_a_refused_address_is_refused_on_the_form_and_not_saved(staff_client: Client, owner: Any):
    page = staff_client.post(
        "/admin/agents/mcpserver/add/",
        {"organization": str(owner.organization.pk), "name": "Internal", "url": "http://10.0.0.1/mcp", "auth_type": ""},
    )
    assert page.status_code == 200
    assert any("private" in error or "refused" in error.lower() for error in errors(page.content.decode()))
    assert not McpServer.objects.exists()


def test_pages_warn_about_a_saved_destination_whose_host_does_not_resolve(
    staff_client: Client, owner: Any, make_agent: Any
):
    agent = make_agent(owner.organization, name="Webby", server_url=UNRESOLVED)
    tool = AgentTool.objects.create(
        agent=make_agent(owner.organization, name="Hal", agent_type="http"),
        name="lookup",
        description="Look something up.",
        parameter_schema={"type": "object", "properties": {}},
        tool_url=UNRESOLVED,
    )
    for url in (f"/admin/agents/agent/{agent.pk}/change/", f"/admin/agents/agenttool/{tool.pk}/change/"):
        page = staff_client.get(url)
        assert page.status_code == 200
        assert "no-such-host.invalid does not resolve right now" in page.content.decode().lower(), url
    # A host that resolves gets no warning.
    agent.server_url = "http://127.0.0.1:9/hook"
    agent.save()
    page = staff_client.get(f"/admin/agents/agent/{agent.pk}/change/")
    assert "does not resolve" not in page.content.decode()
