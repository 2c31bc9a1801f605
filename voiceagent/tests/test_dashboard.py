"""The dashboard (Django admin at /admin/) as a staff user reaches it: through its URLs, every page of
every registered model answering, with a row of each model on the list so that its columns render."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib import admin
from django.db.models import Model
from django.test import Client, RequestFactory
from django.urls import reverse
from django.utils import timezone

from agents.models import McpServer, McpServerStatus, McpToolSelection
from realtime.models import TestRun
from testing.dashboard import DashboardWorld
from testing.factories import attempt_rows_create

pytestmark = pytest.mark.django_db

REGISTERED = sorted(admin.site._registry.items(), key=lambda item: item[0]._meta.label)


def _ids(item: tuple[type[Model], admin.ModelAdmin]) -> str:
    return item[0]._meta.label


@pytest.fixture
def one_of_everything(dashboard_world: DashboardWorld, make_agent: Any) -> None:
    """A row of every model the dashboard shows, made the way the product makes them: the dashboard's world
    (voiceagent/tests/conftest.py) and the agent-building rows (a custom tool, an MCP server, a selection)."""
    agent = make_agent(dashboard_world.organization, name="Hal, order desk", agent_type="http")
    response = dashboard_world.api.post(
        f"/public/v1/agents/{agent.pk}/tools",
        {"name": "lookup_order", "toolUrl": "https://tools.example.com/orders"},
        format="json",
    )
    assert response.status_code == 201, response.content
    server = McpServer.objects.create(
        organization=dashboard_world.organization,
        name="Orders",
        url="https://mcp.example.com/mcp",
        status=McpServerStatus.ACTIVE,
        tools=[{"name": "cancel_order", "description": "Cancel an order.", "inputSchema": {"type": "object"}}],
        last_synced_at=timezone.now(),
    )
    McpToolSelection.objects.create(agent=agent, server=server, tool_name="cancel_order")
    # An agent test (through the API) and a finished run of it (runs are made by the runner).
    response = dashboard_world.api.post(
        f"/public/v1/agents/{agent.pk}/tests",
        {"name": "Order status", "kind": "reply", "turns": [{"user": "Where is order 42?"}]},
        format="json",
    )
    assert response.status_code == 201, response.content
    run = TestRun.objects.create(
        organization=dashboard_world.organization,
        agent=agent,
        status="completed",
        test_ids=[response.json()["id"]],
        passed=1,
    )
    attempt_rows_create(
        run,
        [
            {
                "testId": response.json()["id"],
                "name": "Order status",
                "kind": "reply",
                "passRate": 1.0,
                "attempts": [{"verdict": "pass", "reasons": [], "transcript": [], "toolCalls": []}],
            }
        ],
    )


def _superuser_request(admin_user: Any) -> Any:
    request = RequestFactory().get("/admin/")
    request.user = admin_user
    return request


@pytest.mark.parametrize(("model", "model_admin"), REGISTERED, ids=[_ids(item) for item in REGISTERED])
def test_every_dashboard_page_answers_for_a_superuser(
    model: type[Model], model_admin: admin.ModelAdmin, admin_client: Client, admin_user: Any, one_of_everything: None
) -> None:
    info = (model._meta.app_label, model._meta.model_name)
    assert model._default_manager.exists(), f"no {model._meta.label} row to list"

    changelist = admin_client.get(reverse("admin:{}_{}_changelist".format(*info)))
    assert changelist.status_code == 200

    # Pages of models that are written only through the API say so with a 403; the others answer.
    add = admin_client.get(reverse("admin:{}_{}_add".format(*info)))
    can_add = model_admin.has_add_permission(_superuser_request(admin_user))
    assert add.status_code == (200 if can_add else 403)

    row = model._default_manager.first()
    change = admin_client.get(reverse("admin:{}_{}_change".format(*info), args=[row.pk]))
    assert change.status_code == 200


def test_the_mcp_and_custom_tool_pages_are_in_the_dashboard(admin_client: Client, one_of_everything: None) -> None:
    index = admin_client.get("/admin/").content.decode()
    for title, url in (
        ("MCP servers", "/admin/agents/mcpserver/"),
        ("Custom tools", "/admin/agents/agenttool/"),
        ("MCP tool selections", "/admin/agents/mcptoolselection/"),
    ):
        assert f'href="{url}"' in index and title in index
        assert admin_client.get(url).status_code == 200
    servers = admin_client.get("/admin/agents/mcpserver/").content.decode()
    assert "Orders" in servers and "cancel_order" not in servers  # the list shows the tool count
    assert admin_client.get("/admin/agents/mcpserver/add/").status_code == 200
    assert "lookup_order" in admin_client.get("/admin/agents/agenttool/").content.decode()
    assert "cancel_order" in admin_client.get("/admin/agents/mcptoolselection/").content.decode()


def test_model_names_read_as_english(admin_client: Client) -> None:
    index = admin_client.get("/admin/").content.decode()
    assert "Agent knowledge indexes" in index
    assert "indexs" not in index


def test_view_site_leads_to_a_page_that_says_where_to_go(admin_client: Client, client: Client) -> None:
    index = admin_client.get("/admin/").content.decode()
    assert f'href="{admin.site.site_url}"' in index

    landing = client.get(admin.site.site_url)
    assert landing.status_code == 200
    page = landing.content.decode()
    for link in ('href="/docs/"', 'href="/admin/"', 'href="/healthz"', 'href="/public/v1/openapi.json"'):
        assert link in page
    assert client.get("/docs/").status_code == 200
    assert client.get("/healthz").status_code == 200
    assert client.post("/").status_code == 405


def test_the_landing_page_links_the_demo_only_while_demo_pages_are_on(client: Client, settings: Any) -> None:
    settings.DEMO_PAGES = True
    assert 'href="/demo/"' in client.get("/").content.decode()
    settings.DEMO_PAGES = False
    assert 'href="/demo/"' not in client.get("/").content.decode()
