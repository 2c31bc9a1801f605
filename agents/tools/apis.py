"""REST for custom tools, MCP tool selections and connected MCP servers: thin views."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from agents.selectors import agent_get
from agents.tools import schema as _schema  # noqa: F401 - registers the OpenAPI description of tool bodies
from agents.tools import selectors, services
from agents.tools.serializers import (
    MAX_SELECTIONS,
    IdSerializer,
    McpSelectionSerializer,
    McpSelectionWriteSerializer,
    McpServerSerializer,
    ToolSerializer,
    ToolWriteSerializer,
    parse_selections,
)
from kit.api import PublicApiView
from kit.fields import parse
from kit.schema import REQUEST_MAX_ITEMS

TOOLS = ["Tools"]
MCP = ["MCP"]
RULE_ERRORS = {
    400: OpenApiResponse(
        description="Invalid body or ID (`issues` names the fields), or a rule below is not met: a tool on a "
        "static agent, a webhook agent without serverUrl, an http agent's tool without toolUrl, a toolUrl the "
        "egress guard refuses (a private, loopback or metadata address), a name the agent already uses"
    ),
    404: OpenApiResponse(description="Agent or tool not found (or another organization's)"),
}
RULES = (
    "Rules: no custom tools on static agents; a webhook agent needs a saved serverUrl to create a tool or "
    "to enable one, and its tools have toolUrl null; an http agent's tool needs toolUrl, which may not resolve to "
    "a private, loopback, link-local or metadata address unless the operator allows it (OUTBOUND_ALLOWED_NETWORKS; "
    "a host that does not resolve yet is accepted). parameterSchema and "
    "responseSchema must be valid JSON Schema; names are 1-64 letters, digits, `_` or `-`, unique per agent, "
    "and not search_knowledge, transfer_call or end_call."
)


class AgentToolListCreateApi(PublicApiView):
    @extend_schema(
        operation_id="listAgentTools",
        tags=TOOLS,
        summary="List an agent's custom tools",
        description="The agent's custom tools, in creation order. Native tools (search_knowledge, "
        "transfer_call, end_call) are not listed.",
        responses={200: ToolSerializer(many=True)},
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = agent_get(organization=self.organization, agent_id=agent_id)
        return Response(selectors.tool_list(agent=agent))

    @extend_schema(
        operation_id="createAgentTool",
        tags=TOOLS,
        summary="Create a custom tool",
        request=ToolWriteSerializer,
        responses={201: IdSerializer, **RULE_ERRORS},
        description='Creates a custom tool and answers 201 `{id}`. Defaults: description "", parameterSchema '
        '{"type": "object", "properties": {}}, responseSchema null, timeoutMs 10000, onError return_error, '
        "enabled true, toolUrl null, toolMethod POST, toolHeaders {}. " + RULES,
    )
    def post(self, request: Request, agent_id: str) -> Response:
        data = parse(ToolWriteSerializer, request.data)
        tool = services.tool_create(organization=self.organization, agent_id=agent_id, data=data)
        return Response({"id": str(tool.id)}, status=201)


class AgentToolDetailApi(PublicApiView):
    @extend_schema(
        operation_id="replaceAgentTool",
        tags=TOOLS,
        summary="Replace a custom tool",
        request=ToolWriteSerializer,
        responses={200: IdSerializer, **RULE_ERRORS},
        description="Replaces the tool (omitted optional fields take the creation defaults). " + RULES,
    )
    def put(self, request: Request, agent_id: str, tool_id: str) -> Response:
        data = parse(ToolWriteSerializer, request.data)
        tool = services.tool_replace(organization=self.organization, agent_id=agent_id, tool_id=tool_id, data=data)
        return Response({"id": str(tool.id)})

    @extend_schema(
        operation_id="deleteAgentTool",
        tags=TOOLS,
        summary="Delete a custom tool",
        description="Deletes the tool; the model no longer sees it in new calls. Past tool invocations stay in "
        "the call history.",
        responses={200: IdSerializer},
    )
    def delete(self, request: Request, agent_id: str, tool_id: str) -> Response:
        deleted = services.tool_delete(organization=self.organization, agent_id=agent_id, tool_id=tool_id)
        return Response({"id": str(deleted)})


class AgentMcpToolsApi(PublicApiView):
    @extend_schema(
        operation_id="listAgentMcpTools",
        tags=MCP,
        summary="List an agent's MCP tool selections",
        description="The tools of connected tool servers selected for the agent, with whether each server "
        "still advertises the tool (`available`) and whether the selection is enabled.",
        responses={200: McpSelectionSerializer(many=True)},
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = agent_get(organization=self.organization, agent_id=agent_id)
        return Response(selectors.mcp_tool_selection_list(agent=agent))

    @extend_schema(
        operation_id="replaceAgentMcpTools",
        tags=MCP,
        summary="Replace an agent's MCP tool selections",
        request=McpSelectionWriteSerializer(many=True),
        extensions={REQUEST_MAX_ITEMS: MAX_SELECTIONS},
        responses={200: McpSelectionSerializer(many=True)},
        description="Replaces every selection (`[]` clears) and answers the new selections as GET does. "
        "A server of another organization, a server that is not active, a tool the server does not advertise "
        'or a duplicate is a 400 naming the item (for example issues {"2.toolName": [...]}); nothing is changed.',
    )
    def put(self, request: Request, agent_id: str) -> Response:
        items = parse_selections(request.data)
        agent = services.mcp_tools_replace(organization=self.organization, agent_id=agent_id, items=items)
        return Response(selectors.mcp_tool_selection_list(agent=agent))


class McpServerListApi(PublicApiView):
    @extend_schema(
        operation_id="listMcpServers",
        tags=MCP,
        summary="List connected tool servers",
        responses={200: McpServerSerializer(many=True)},
        description="The organization's connected tool servers (connected in the dashboard). Credentials and "
        "the server URL are never returned.",
    )
    def get(self, request: Request) -> Response:
        return Response(selectors.mcp_server_list(organization=self.organization))
