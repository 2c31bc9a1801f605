"""Connecting MCP servers for real (loopback server from the official SDK), the public list without any
credential byte, the ops command and the dashboard form and action."""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from agents.models import McpServer
from agents.tools import services
from testing.mcp import (
    API_KEY,
    API_KEY_HEADER,
    CLIENT_ID,
    CLIENT_SECRET,
    MCP_BEARER_TOKEN,
    OAUTH_ACCESS_TOKEN,
)

EXPECTED_TOOLS = {"lookup_order", "cancel_order"}


def connect(persona, url, **kwargs):
    return services.mcp_server_connect(organization=persona.organization, name="Orders", url=url, **kwargs)


# --- connecting ----------------------------------------------------------------------------------


def test_connect_runs_the_handshake_and_caches_the_tools(owner, mcp_server, allow_loopback):
    server = connect(owner, mcp_server.url)
    server.refresh_from_db()
    assert server.status == "active"
    assert server.last_error == ""
    assert server.last_synced_at is not None
    tools = {tool["name"]: tool for tool in server.tools}
    assert set(tools) == EXPECTED_TOOLS
    assert tools["lookup_order"]["description"] == "Look up an order by its id."
    schema = tools["lookup_order"]["inputSchema"]
    assert schema["type"] == "object" and schema["required"] == ["order_id"]


def test_connect_can_leave_the_server_inactive(owner, mcp_server, allow_loopback):
    server = connect(owner, mcp_server.url, status="inactive")
    assert server.status == "inactive"
    assert {tool["name"] for tool in server.tools} == EXPECTED_TOOLS


def test_an_unreachable_server_gets_the_error_status_with_the_reason(owner, closed_port_url, allow_loopback):
    server = connect(owner, closed_port_url)
    server.refresh_from_db()
    assert server.status == "error"
    assert server.last_error.startswith("Cannot connect to 127.0.0.1")
    assert server.tools == [] and server.last_synced_at is None


def test_the_outbound_guard_applies_to_mcp_connections(owner, mcp_server, allow_loopback, settings):
    server = services.mcp_server_configure(
        server=McpServer(),
        organization=owner.organization,
        name="Orders",
        url=mcp_server.url,
        auth_type="none",
        credentials=None,
    )  # saved while loopback was allowed
    settings.OUTBOUND_ALLOWED_NETWORKS = []  # loopback is no longer listed when it connects
    server = services.mcp_server_sync(server=server)
    assert server.status == "error"
    assert "loopback" in server.last_error


def test_a_failed_refresh_keeps_the_last_tools_and_a_later_one_recovers(owner, mcp_server, allow_loopback, settings):
    server = connect(owner, mcp_server.url)
    settings.OUTBOUND_ALLOWED_NETWORKS = []
    services.mcp_server_sync(server=server)
    assert server.status == "error" and {t["name"] for t in server.tools} == EXPECTED_TOOLS
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    services.mcp_server_sync(server=server)
    assert server.status == "active" and server.last_error == ""


def test_bearer_authentication(owner, mcp_server, allow_loopback):
    url = f"{mcp_server.base}/bearer/mcp"
    assert connect(owner, url, auth_type="bearer", credentials={"token": MCP_BEARER_TOKEN}).status == "active"
    wrong = connect(owner, url, auth_type="bearer", credentials={"token": "wrong-token"})
    assert wrong.status == "error"
    assert wrong.last_error == "127.0.0.1 answered HTTP 401"


def test_secret_header_authentication(owner, mcp_server, allow_loopback):
    url = f"{mcp_server.base}/header/mcp"
    server = connect(owner, url, auth_type="headers", credentials={"headers": {API_KEY_HEADER: API_KEY}})
    assert server.status == "active"
    assert connect(owner, url).status == "error"  # same name: reconnected without the header


def test_oauth_client_credentials_through_a_token_endpoint(owner, mcp_server, allow_loopback):
    credentials = {"tokenUrl": f"{mcp_server.base}/oauth/token", "clientId": CLIENT_ID, "clientSecret": CLIENT_SECRET}
    url = f"{mcp_server.base}/oauth/mcp"
    assert connect(owner, url, auth_type="oauth_client_credentials", credentials=credentials).status == "active"
    wrong = connect(
        owner, url, auth_type="oauth_client_credentials", credentials={**credentials, "clientSecret": "nope-nope"}
    )
    assert wrong.status == "error"
    assert wrong.last_error == "Token endpoint 127.0.0.1 answered HTTP 401"


@pytest.mark.parametrize(
    ("auth_type", "credentials", "field"),
    [
        ("bearer", None, "token"),
        ("bearer", {"token": "two\nlines"}, "token"),
        ("headers", {"headers": {}}, "headers"),
        ("headers", {"headers": {"bad name": "v"}}, "headers"),
        ("oauth_client_credentials", {"clientId": "a", "clientSecret": "b"}, "tokenUrl"),
        (
            "oauth_client_credentials",
            {"tokenUrl": "ftp://x.example.com", "clientId": "a", "clientSecret": "b"},
            "tokenUrl",
        ),
        ("oauth_client_credentials", {"tokenUrl": "https://x.example.com/t", "clientSecret": "b"}, "clientId"),
        (
            "oauth_client_credentials",
            {"tokenUrl": "http://169.254.169.254/token", "clientId": "a", "clientSecret": "b"},
            "tokenUrl",
        ),
        ("magic", None, "authType"),
    ],
)
def test_credentials_are_checked_before_anything_is_saved(owner, auth_type, credentials, field):
    with pytest.raises(services.ApiError) as caught:
        connect(owner, "https://mcp.example.com/mcp", auth_type=auth_type, credentials=credentials)
    assert field in caught.value.issues
    assert not McpServer.objects.exists()


def test_credentials_are_encrypted_at_rest(owner, mcp_server, allow_loopback):
    server = connect(
        owner, f"{mcp_server.base}/bearer/mcp", auth_type="bearer", credentials={"token": MCP_BEARER_TOKEN}
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT credentials FROM agents_mcpserver WHERE id = %s",
            [server.id.hex if connection.vendor == "sqlite" else server.id],
        )
        (stored,) = cursor.fetchone()
    assert MCP_BEARER_TOKEN not in stored and "token" not in stored
    assert McpServer.objects.get(pk=server.pk).credentials == {"token": MCP_BEARER_TOKEN}


def test_a_tool_of_a_connected_server_can_be_called(owner, mcp_server, allow_loopback):
    server = connect(owner, mcp_server.url)
    result = services.mcp_server_call_tool(server=server, name="lookup_order", arguments={"order_id": "42"})
    assert result["isError"] is False
    assert result["content"] == ["order 42: shipped"]


# --- GET /public/v1/mcp/servers ---------------------------------------------------------------------


def test_the_server_list_never_contains_a_credential_byte(owner, outsider, mcp_server, allow_loopback):
    secret_path_url = f"{mcp_server.base}/mcp?key=UrlKeyWq8Zx"
    connect(owner, secret_path_url)
    services.mcp_server_connect(
        organization=owner.organization,
        name="Bearer",
        url=f"{mcp_server.base}/bearer/mcp",
        auth_type="bearer",
        credentials={"token": MCP_BEARER_TOKEN},
    )
    services.mcp_server_connect(
        organization=owner.organization,
        name="Header",
        url=f"{mcp_server.base}/header/mcp",
        auth_type="headers",
        credentials={"headers": {API_KEY_HEADER: API_KEY}},
    )
    services.mcp_server_connect(
        organization=owner.organization,
        name="OAuth",
        url=f"{mcp_server.base}/oauth/mcp",
        auth_type="oauth_client_credentials",
        credentials={
            "tokenUrl": f"{mcp_server.base}/oauth/token",
            "clientId": CLIENT_ID,
            "clientSecret": CLIENT_SECRET,
        },
    )
    response = owner.client.get("/public/v1/mcp/servers")
    assert response.status_code == 200
    body = response.content.decode()
    for secret in (MCP_BEARER_TOKEN, API_KEY, CLIENT_ID, CLIENT_SECRET, OAUTH_ACCESS_TOKEN, "UrlKeyWq8Zx"):
        assert secret not in body
        # Not even a fragment of it: every 5-character piece is absent.
        assert not any(secret[i : i + 5] in body for i in range(len(secret) - 4)), secret

    items = {item["name"]: item for item in response.json()}
    assert set(items) == {"Orders", "Bearer", "Header", "OAuth"}
    assert {name: item["authType"] for name, item in items.items()} == {
        "Orders": "none",
        "Bearer": "bearer",
        "Header": "headers",
        "OAuth": "oauth_client_credentials",
    }
    for item in items.values():
        assert set(item) == {"id", "name", "status", "authType", "tools", "lastSyncedAt", "error"}
    orders = items["Orders"]
    assert set(orders) == {"id", "name", "status", "authType", "tools", "lastSyncedAt", "error"}
    assert orders["status"] == "active" and orders["error"] is None and orders["lastSyncedAt"].endswith("Z")
    assert {tool["name"] for tool in orders["tools"]} == EXPECTED_TOOLS
    assert all(set(tool) == {"name", "description", "inputSchema"} for tool in orders["tools"])

    assert outsider.client.get("/public/v1/mcp/servers").json() == []


def test_the_list_shows_the_error_of_a_failed_connection(owner, closed_port_url, allow_loopback):
    connect(owner, closed_port_url)
    (item,) = owner.client.get("/public/v1/mcp/servers").json()
    assert item["status"] == "error"
    assert item["error"].startswith("Cannot connect")
    assert item["tools"] == [] and item["lastSyncedAt"] is None


def test_the_server_list_needs_a_key(anonymous):
    assert anonymous.get("/public/v1/mcp/servers").status_code == 401


# --- the ops command --------------------------------------------------------------------------------


def run_command(*args):
    out = StringIO()
    call_command("connectmcpserver", *args, stdout=out)
    return json.loads(out.getvalue())


def test_the_command_connects_and_prints_one_json_object(owner, mcp_server, allow_loopback):
    org = str(owner.organization.id)
    result = run_command(
        "--org",
        org,
        "--name",
        "Orders",
        "--url",
        f"{mcp_server.base}/header/mcp",
        "--header",
        f"{API_KEY_HEADER}: {API_KEY}",
    )
    server = McpServer.objects.get()
    assert result == {"id": str(server.id), "status": "active", "tools": ["lookup_order", "cancel_order"]}
    assert server.auth_type == "headers" and server.credentials == {"headers": {API_KEY_HEADER: API_KEY}}

    again = run_command("--org", org, "--name", "Orders", "--url", mcp_server.url, "--status", "inactive")
    assert again["id"] == str(server.id) and again["status"] == "inactive"
    assert McpServer.objects.count() == 1


def test_the_command_reports_an_unreachable_server(owner, closed_port_url, allow_loopback):
    out = StringIO()
    with pytest.raises(CommandError, match="could not be reached"):
        call_command(
            "connectmcpserver",
            "--org",
            str(owner.organization.id),
            "--name",
            "Down",
            "--url",
            closed_port_url,
            stdout=out,
        )
    result = json.loads(out.getvalue())
    assert result["status"] == "error" and result["tools"] == [] and result["error"].startswith("Cannot connect")
    assert McpServer.objects.get().status == "error"


def test_a_url_every_connection_would_refuse_is_refused_with_the_reason_and_nothing_is_saved(
    owner, mcp_server, settings, refused_url
):
    org = str(owner.organization.id)
    refused = rf"^Invalid url: Refused outbound request to .* is a {re.escape(refused_url.kind)}"
    with pytest.raises(CommandError, match=refused):
        run_command("--org", org, "--name", "Orders", "--url", refused_url.url)
    assert not McpServer.objects.exists()

    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8", "::1/128"]  # what `make run` sets
    assert run_command("--org", org, "--name", "Orders", "--url", mcp_server.url)["status"] == "active"
    if refused_url.kind == "loopback":
        settings.OUTBOUND_ALLOWED_NETWORKS = []
    with pytest.raises(CommandError, match=refused):  # an update of the server of that name
        run_command("--org", org, "--name", "Orders", "--url", refused_url.url)
    server = McpServer.objects.get()
    assert (server.url, server.status) == (mcp_server.url, "active")


def test_the_command_rejects_bad_input(owner, db):
    with pytest.raises(CommandError, match="not found"):
        call_command(
            "connectmcpserver",
            "--org",
            "00000000-0000-0000-0000-000000000000",
            "--name",
            "x",
            "--url",
            "https://mcp.example.com/mcp",
            stdout=StringIO(),
        )
    with pytest.raises(CommandError, match="url"):
        call_command(
            "connectmcpserver",
            "--org",
            str(owner.organization.id),
            "--name",
            "x",
            "--url",
            "ftp://mcp.example.com",
            stdout=StringIO(),
        )
    with pytest.raises(CommandError, match="Name: value"):
        call_command(
            "connectmcpserver",
            "--org",
            str(owner.organization.id),
            "--name",
            "x",
            "--url",
            "https://mcp.example.com/mcp",
            "--header",
            "no-colon",
            stdout=StringIO(),
        )
    assert not McpServer.objects.exists()


# --- the dashboard ----------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)  # the connection runs when the admin's transaction commits
def test_the_dashboard_form_connects_and_never_shows_the_secret(owner, admin_client, mcp_server, allow_loopback):
    response = admin_client.post(
        "/admin/agents/mcpserver/add/",
        {
            "organization": str(owner.organization.id),
            "name": "Orders",
            "url": f"{mcp_server.base}/bearer/mcp",
            "auth_type": "bearer",
            "connect_as": "active",
            "bearer_token": MCP_BEARER_TOKEN,
        },
        follow=True,
    )
    assert response.status_code == 200
    server = McpServer.objects.get()
    assert server.status == "active"
    assert {tool["name"] for tool in server.tools} == EXPECTED_TOOLS
    assert "connected (active)" in response.content.decode()

    page = admin_client.get(f"/admin/agents/mcpserver/{server.pk}/change/").content.decode()
    assert MCP_BEARER_TOKEN not in page and "lookup_order" in page

    # Saving again with the secret left blank keeps it; the server is refreshed.
    admin_client.post(
        f"/admin/agents/mcpserver/{server.pk}/change/",
        {
            "organization": str(owner.organization.id),
            "name": "Orders renamed",
            "url": f"{mcp_server.base}/bearer/mcp",
            "auth_type": "bearer",
            "connect_as": "inactive",
        },
    )
    server.refresh_from_db()
    assert (server.name, server.status, server.credentials) == (
        "Orders renamed",
        "inactive",
        {"token": MCP_BEARER_TOKEN},
    )


@pytest.mark.django_db(transaction=True)
def test_the_dashboard_form_shows_a_failed_connection_and_rejects_bad_credentials(
    owner, admin_client, closed_port_url, allow_loopback
):
    form = {"organization": str(owner.organization.id), "name": "Down", "url": closed_port_url, "connect_as": "active"}
    response = admin_client.post("/admin/agents/mcpserver/add/", {**form, "auth_type": "bearer"})
    assert response.status_code == 200  # the form again, with the error
    assert not McpServer.objects.exists()

    response = admin_client.post("/admin/agents/mcpserver/add/", {**form, "auth_type": "none"}, follow=True)
    assert "could not connect" in response.content.decode()
    assert McpServer.objects.get().status == "error"


def test_the_dashboard_action_refreshes_servers(owner, admin_client, mcp_server, allow_loopback, settings):
    server = connect(owner, mcp_server.url)
    McpServer.objects.filter(pk=server.pk).update(tools=[], status="error")
    response = admin_client.post(
        "/admin/agents/mcpserver/",
        {"action": "connect_and_refresh", "_selected_action": [str(server.pk)]},
        follow=True,
    )
    assert response.status_code == 200
    server.refresh_from_db()
    assert server.status == "active" and {tool["name"] for tool in server.tools} == EXPECTED_TOOLS
