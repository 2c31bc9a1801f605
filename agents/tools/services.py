"""Rules for custom tools, connected MCP servers and per-agent MCP tool selections.

Network work (connecting to an MCP server, resolving a URL's host) never runs inside a database
transaction: it happens first, and the result is written in one short write afterwards.

A toolUrl, an MCP server URL or token endpoint that the egress guard would refuse on every request is
refused when it is saved, with the guard's reason (kit.egress.validate_destination).
"""

from __future__ import annotations

import uuid
from typing import Any

from asgiref.sync import async_to_sync
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import Organization
from agents.models import Agent, AgentTool, AgentType, McpAuthType, McpServer, McpServerStatus, McpToolSelection
from agents.selectors import agent_get
from agents.tools import mcp
from agents.tools.selectors import tool_get
from kit import egress
from kit.errors import ApiError, validation_error
from kit.validation import headers_problem, url_problem

MAX_TOOLS_PER_AGENT = 128  # what the common function-calling model APIs accept in one request

TOOL_FIELDS = (
    "name",
    "description",
    "parameter_schema",
    "response_schema",
    "timeout_ms",
    "on_error",
    "enabled",
    "tool_url",
    "tool_method",
    "tool_headers",
)


# --- custom tools ------------------------------------------------------------------------------


def _tool_rules(*, agent: Agent, data: dict[str, Any], creating: bool) -> None:
    """Operation rule 5 (and agent rules 1 and 4) for a tool about to be saved on `agent`."""
    if agent.agent_type == AgentType.STATIC:
        raise ApiError.invalid(
            "Static agents do not support custom tools; change agentType to webhook or http first.",
            {"agentType": ["Static agents do not support custom tools."]},
        )
    if agent.agent_type == AgentType.WEBHOOK:
        if not agent.server_url and (creating or data["enabled"]):
            action = "create a tool" if creating else "enable a tool"
            raise ApiError.invalid(
                f"A webhook agent needs a saved serverUrl to {action}: custom tools are delivered to it.",
                {"serverUrl": [f"Save a serverUrl on the agent before you {action}."]},
            )
        if data["tool_url"]:
            raise ApiError.field("toolUrl", "Must be null for webhook tools; they are delivered to the serverUrl.")
    if agent.agent_type == AgentType.HTTP and not data["tool_url"]:
        raise ApiError.field("toolUrl", "Required for tools of http agents.")


def _check_name_free(*, agent: Agent, name: str, exclude_id: uuid.UUID | None = None) -> None:
    taken = AgentTool.objects.filter(agent=agent, name=name)
    if exclude_id is not None:
        taken = taken.exclude(pk=exclude_id)
    if taken.exists():
        raise ApiError.field("name", f"The agent already has a tool named {name}.")


def _save_tool(tool: AgentTool) -> AgentTool:
    try:
        with transaction.atomic():
            tool.save()
    except IntegrityError:  # the unique (agent, name) constraint, should a race slip past the check
        raise ApiError.field("name", f"The agent already has a tool named {tool.name}.") from None
    return tool


def tool_create(*, organization: Organization, agent_id: str, data: dict[str, Any]) -> AgentTool:
    egress.validate_destination(data["tool_url"], field="toolUrl")
    with transaction.atomic():
        # The agent row lock serializes this check with agent updates (rule 4) and other tool writes.
        agent = agent_get(organization=organization, agent_id=agent_id, for_update=True)
        _tool_rules(agent=agent, data=data, creating=True)
        _check_name_free(agent=agent, name=data["name"])
        if AgentTool.objects.filter(agent=agent).count() >= MAX_TOOLS_PER_AGENT:
            raise ApiError.invalid(f"An agent can have at most {MAX_TOOLS_PER_AGENT} custom tools.")
        return _save_tool(AgentTool(agent=agent, **{field: data[field] for field in TOOL_FIELDS}))


def tool_replace(*, organization: Organization, agent_id: str, tool_id: str, data: dict[str, Any]) -> AgentTool:
    """PUT: every field is replaced; omitted optional fields take their defaults."""
    egress.validate_destination(data["tool_url"], field="toolUrl")
    with transaction.atomic():
        agent = agent_get(organization=organization, agent_id=agent_id, for_update=True)
        tool = tool_get(agent=agent, tool_id=tool_id)
        _tool_rules(agent=agent, data=data, creating=False)
        _check_name_free(agent=agent, name=data["name"], exclude_id=tool.pk)
        for field in TOOL_FIELDS:
            setattr(tool, field, data[field])
        return _save_tool(tool)


def tool_delete(*, organization: Organization, agent_id: str, tool_id: str) -> uuid.UUID:
    with transaction.atomic():
        agent = agent_get(organization=organization, agent_id=agent_id, for_update=True)
        tool = tool_get(agent=agent, tool_id=tool_id)
        pk = tool.pk
        tool.delete()
        return pk


# --- connected MCP servers -----------------------------------------------------------------------


def _single_line(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip() or any(c in value for c in "\r\n\0") or len(value) > 4096:
        raise ApiError.field(field, "Required: a single-line string of at most 4096 characters.")
    return value


def mcp_credentials_clean(*, auth_type: str, credentials: dict[str, Any] | None) -> dict[str, Any] | None:
    """Check the credentials that `auth_type` needs and keep only those (ApiError naming the field). An OAuth
    token endpoint the egress guard would refuse on every request is refused (its host is resolved)."""
    credentials = credentials or {}
    if auth_type == McpAuthType.NONE:
        return None
    if auth_type == McpAuthType.BEARER:
        return {"token": _single_line(credentials.get("token"), "token")}
    if auth_type == McpAuthType.HEADERS:
        headers = credentials.get("headers")
        problem = headers_problem(headers) or (None if headers else "At least one header is required.")
        if problem:
            raise ApiError.field("headers", problem)
        assert isinstance(headers, dict)  # headers_problem refuses anything else
        return {"headers": dict(headers)}
    if auth_type == McpAuthType.OAUTH_CLIENT_CREDENTIALS:
        token_url = credentials.get("tokenUrl")
        problem = (url_problem(token_url) or egress.destination_problem(token_url)) if token_url else "Required."
        if problem:
            raise ApiError.field("tokenUrl", problem)
        result = {
            "tokenUrl": token_url,
            "clientId": _single_line(credentials.get("clientId"), "clientId"),
            "clientSecret": _single_line(credentials.get("clientSecret"), "clientSecret"),
        }
        if credentials.get("scope"):
            result["scope"] = _single_line(credentials["scope"], "scope")
        return result
    raise ApiError.field("authType", f"Must be one of {', '.join(McpAuthType.values)}.")


def _connection(server: McpServer) -> mcp.Connection:
    return mcp.Connection(url=server.url, auth_type=server.auth_type, credentials=server.credentials)


def mcp_server_configure(
    *,
    server: McpServer,
    organization: Organization,
    name: str,
    url: str,
    auth_type: str,
    credentials: dict[str, Any] | None,
) -> McpServer:
    """Validate and save where and how to reach the server (no connection; the host of `url` and of an OAuth
    token endpoint is resolved). A new server starts inactive."""
    name = (name or "").strip()
    if not name or len(name) > 200:
        raise ApiError.field("name", "Required, at most 200 characters.")
    problem = url_problem(url)
    if problem:
        raise ApiError.field("url", problem)
    egress.validate_destination(url, field="url")
    if McpServer.objects.filter(organization=organization, name=name).exclude(pk=server.pk).exists():
        raise ApiError.field("name", f"The organization already has a tool server named {name}.")
    server.organization = organization
    server.name = name
    server.url = url
    server.auth_type = auth_type
    server.credentials = mcp_credentials_clean(auth_type=auth_type, credentials=credentials)
    if server._state.adding:
        server.status = McpServerStatus.INACTIVE
    try:
        with transaction.atomic():
            server.save()
    except IntegrityError:
        raise ApiError.field("name", f"The organization already has a tool server named {name}.") from None
    return server


def mcp_server_sync(*, server: McpServer, status: str | None = None) -> McpServer:
    """Connect (initialize handshake + tools/list) and cache the tools.

    Success: status becomes `status` (default: active, or inactive for a server switched off).
    Failure: status `error` with the reason; the last good tool list stays cached.
    """
    if status is None:
        status = McpServerStatus.INACTIVE if server.status == McpServerStatus.INACTIVE else McpServerStatus.ACTIVE
    if status not in (McpServerStatus.ACTIVE, McpServerStatus.INACTIVE):
        raise ApiError.field("status", "Must be active or inactive.")
    try:
        tools = async_to_sync(mcp.list_tools)(_connection(server))
    except mcp.McpFailure as failure:
        server.status = McpServerStatus.ERROR
        server.last_error = failure.message
        server.save(update_fields=["status", "last_error", "updated_at"])
        return server
    server.tools = tools
    server.status = status
    server.last_error = ""
    server.last_synced_at = timezone.now()
    server.save(update_fields=["tools", "status", "last_error", "last_synced_at", "updated_at"])
    return server


def mcp_server_connect(
    *,
    organization: Organization,
    name: str,
    url: str,
    auth_type: str = McpAuthType.NONE,
    credentials: dict[str, Any] | None = None,
    status: str = McpServerStatus.ACTIVE,
    server: McpServer | None = None,
) -> McpServer:
    """Save the server (the organization's server of that name is updated) and connect to it."""
    if status not in (McpServerStatus.ACTIVE, McpServerStatus.INACTIVE):
        raise ApiError.field("status", "Must be active or inactive.")
    if server is None:
        server = McpServer.objects.filter(organization=organization, name=(name or "").strip()).first() or McpServer()
    mcp_server_configure(
        server=server, organization=organization, name=name, url=url, auth_type=auth_type, credentials=credentials
    )
    return mcp_server_sync(server=server, status=status)


def mcp_server_call_tool(
    *, server: McpServer, name: str, arguments: dict[str, Any], timeout_s: float = mcp.TIMEOUT_SECONDS
) -> dict[str, Any]:
    """Sync entry for calling one tool of a connected server (the async one is mcp.call_tool)."""
    return async_to_sync(mcp.call_tool)(_connection(server), name=name, arguments=arguments, timeout_s=timeout_s)


# --- per-agent MCP tool selections ---------------------------------------------------------------


def mcp_tools_replace(*, organization: Organization, agent_id: str, items: list[dict[str, Any]]) -> Agent:
    """PUT mcp-tools: replace every selection of the agent, all or nothing. Problems are keyed by item
    index ("2.toolName"); another organization's server is reported as not found."""
    with transaction.atomic():
        agent = agent_get(organization=organization, agent_id=agent_id, for_update=True)
        server_ids = {item["server_id"] for item in items}
        servers = {
            s.pk: s for s in McpServer.objects.select_for_update().filter(pk__in=server_ids, organization=organization)
        }
        issues: dict[str, list[str]] = {}
        seen: set[tuple[uuid.UUID, str]] = set()
        for index, item in enumerate(items):
            server = servers.get(item["server_id"])
            if server is None:
                issues[f"{index}.mcpServerId"] = ["MCP server not found."]
                continue
            if server.status != McpServerStatus.ACTIVE:
                issues[f"{index}.mcpServerId"] = [
                    f"The server {server.name} is {server.status}; only active servers can be assigned."
                ]
                continue
            if item["tool_name"] not in {tool.get("name") for tool in server.tools}:
                issues[f"{index}.toolName"] = [f"The server {server.name} does not advertise a tool named this."]
                continue
            key = (server.pk, item["tool_name"])
            if key in seen:
                issues[f"{index}.toolName"] = ["Duplicate selection of this server's tool."]
            seen.add(key)
        if issues:
            raise validation_error(issues)
        McpToolSelection.objects.filter(agent=agent).delete()
        McpToolSelection.objects.bulk_create(
            McpToolSelection(
                agent=agent, server=servers[item["server_id"]], tool_name=item["tool_name"], enabled=item["enabled"]
            )
            for item in items
        )
        return agent
