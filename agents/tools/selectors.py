"""Reads of custom tools, connected MCP servers and MCP tool selections (organization-scoped)."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Expression, IntegerField, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce

from accounts.models import Organization
from agents.models import Agent, AgentTool, AgentType, McpServer, McpServerStatus, McpToolSelection
from kit.db import row_get
from kit.fields import iso


def tool_count_subquery() -> Expression:
    """Per-agent custom tool count, for the agent list (annotate with OuterRef('pk')): one correlated
    subquery, no per-agent queries."""
    counts = (
        AgentTool.objects.filter(agent=OuterRef("pk"))
        .order_by()
        .values("agent")
        .annotate(n=Count("pk"))
        .values("n")[:1]
    )
    return Coalesce(Subquery(counts, output_field=IntegerField()), Value(0))


def enabled_tools_problem(*, agent: Agent, agent_type: str, server_url: str | None) -> str | None:
    """Why `agent`, changed to `agent_type` / `server_url`, could not hold its custom tools, or None.

    Called by the agent update services inside their transaction, with the agent row locked. A read
    of the agent's tools, so here with the other tool reads that the agents app uses (agents.services
    imports it; the tool services import agents, not the reverse).
    """
    tools = AgentTool.objects.filter(agent=agent)
    if agent_type == AgentType.STATIC:
        count = tools.count()
        if count:
            return (
                f"Static agents do not support custom tools; delete the agent's {count} custom "
                f"tool{'s' if count != 1 else ''} first."
            )
    elif agent_type == AgentType.WEBHOOK and not server_url:
        names = list(tools.filter(enabled=True).values_list("name", flat=True)[:5])
        if names:
            return (
                "A webhook agent with enabled custom tools needs serverUrl (tools are delivered to it); "
                f"set serverUrl or disable these tools first: {', '.join(names)}."
            )
    elif agent_type == AgentType.HTTP:
        names = list(
            tools.filter(Q(tool_url__isnull=True) | Q(tool_url=""), enabled=True).values_list("name", flat=True)[:5]
        )
        if names:
            return (
                "Every enabled tool of an http agent needs a toolUrl; set toolUrl on these tools or disable "
                f"them first: {', '.join(names)}."
            )
    return None


def tool_get(*, agent: Agent, tool_id: str) -> AgentTool:
    """The agent's tool; a non-UUID id is a 400, a tool of another agent a 404."""
    return row_get(AgentTool.objects.filter(agent=agent), tool_id, what="tool", missing="Tool not found")


def tool_item(tool: AgentTool) -> dict[str, Any]:
    return {
        "id": str(tool.id),
        "name": tool.name,
        "description": tool.description,
        "parameterSchema": tool.parameter_schema,
        "responseSchema": tool.response_schema,
        "timeoutMs": tool.timeout_ms,
        "onError": tool.on_error,
        "enabled": tool.enabled,
        "toolUrl": tool.tool_url,
        "toolMethod": tool.tool_method,
        "toolHeaders": tool.tool_headers,
    }


def tool_list(*, agent: Agent) -> list[dict[str, Any]]:
    return [tool_item(tool) for tool in AgentTool.objects.filter(agent=agent).order_by("created_at", "id")]


def agent_enabled_tools(*, agent: Agent) -> list[AgentTool]:
    """The custom tools a call of `agent` may use (for the conversation engine)."""
    return list(AgentTool.objects.filter(agent=agent, enabled=True).order_by("created_at", "id"))


def mcp_server_item(server: McpServer) -> dict[str, Any]:
    """The public record: never the URL (hosted servers often embed a key in it) nor any credential."""
    return {
        "id": str(server.id),
        "name": server.name,
        "status": server.status,
        "authType": server.auth_type,
        "tools": [
            {
                "name": tool.get("name"),
                "description": tool.get("description", ""),
                "inputSchema": tool.get("inputSchema", {}),
            }
            for tool in server.tools
        ],
        "lastSyncedAt": iso(server.last_synced_at),
        "error": server.last_error or None,
    }


def mcp_server_list(*, organization: Organization) -> list[dict[str, Any]]:
    servers = McpServer.objects.filter(organization=organization).defer("credentials").order_by("name", "id")
    return [mcp_server_item(server) for server in servers]


def mcp_tool_selection_list(*, agent: Agent) -> list[dict[str, Any]]:
    """The agent's selections, ordered by server name then tool name."""
    selections = (
        McpToolSelection.objects.filter(agent=agent)
        .select_related("server")
        .defer("server__credentials")
        .order_by("server__name", "server_id", "tool_name")
    )
    items = []
    for selection in selections:
        advertised = {tool.get("name"): tool for tool in selection.server.tools}
        tool = advertised.get(selection.tool_name)
        items.append(
            {
                "mcpServerId": str(selection.server_id),
                "serverName": selection.server.name,
                "serverStatus": selection.server.status,
                "toolName": selection.tool_name,
                "description": tool.get("description", "") if tool else None,
                "available": tool is not None,
                "enabled": selection.enabled,
            }
        )
    return items


def agent_mcp_tools(*, agent: Agent) -> list[tuple[McpServer, dict[str, Any]]]:
    """(server, cached tool definition) for every enabled selection whose server is active and still
    advertises the tool: what a call of `agent` may use."""
    selections = McpToolSelection.objects.filter(
        agent=agent, enabled=True, server__status=McpServerStatus.ACTIVE
    ).select_related("server")
    usable = []
    for selection in selections.order_by("server__name", "tool_name"):
        for tool in selection.server.tools:
            if tool.get("name") == selection.tool_name:
                usable.append((selection.server, tool))
                break
    return usable
