"""REST for custom tools, MCP tool selections and connected MCP servers: thin views."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from agents.selectors import agent_get
from agents.tools import selectors, services
from agents.tools.serializers import (
    IdSerializer,
    McpSelectionSerializer,
    McpSelectionWriteSerializer,
    McpServerSerializer,
    ToolSerializer,
    ToolWriteSerializer,
    parse_selections,
)
from voiceagent.api import PublicApiView
from voiceagent.fields import parse

ERRORS = {
    400: OpenApiResponse(description="Invalid body or ID, or an operation rule; `issues` lists the fields"),
    401: OpenApiResponse(description="Missing, malformed or invalid API key"),
    404: OpenApiResponse(description="Agent (or tool) not found in the caller's organization"),
}
RULES = (
    "Rules: no custom tools on static agents; a webhook agent needs a saved serverUrl to create a tool or "
    "to enable one, and its tools have toolUrl null; an http agent's tool needs toolUrl. parameterSchema and "
    "responseSchema must be valid JSON Schema; names are 1-64 letters, digits, `_` or `-`, unique per agent, "
    "and not search_knowledge or transfer_call."
)


class AgentToolListCreateApi(PublicApiView):
    @extend_schema(operation_id="listAgentTools", responses={200: ToolSerializer(many=True), **ERRORS})
    def get(self, request: Request, agent_id: str) -> Response:
        agent = agent_get(organization=self.organization, agent_id=agent_id)
        return Response(selectors.tool_list(agent=agent))

    @extend_schema(
        operation_id="createAgentTool",
        request=ToolWriteSerializer,
        responses={201: IdSerializer, **ERRORS},
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
        request=ToolWriteSerializer,
        responses={200: IdSerializer, **ERRORS},
        description="Replaces the tool (omitted optional fields take the creation defaults). " + RULES,
    )
    def put(self, request: Request, agent_id: str, tool_id: str) -> Response:
        data = parse(ToolWriteSerializer, request.data)
        tool = services.tool_replace(organization=self.organization, agent_id=agent_id, tool_id=tool_id, data=data)
        return Response({"id": str(tool.id)})

    @extend_schema(operation_id="deleteAgentTool", responses={200: IdSerializer, **ERRORS})
    def delete(self, request: Request, agent_id: str, tool_id: str) -> Response:
        deleted = services.tool_delete(organization=self.organization, agent_id=agent_id, tool_id=tool_id)
        return Response({"id": str(deleted)})


class AgentMcpToolsApi(PublicApiView):
    @extend_schema(operation_id="listAgentMcpTools", responses={200: McpSelectionSerializer(many=True), **ERRORS})
    def get(self, request: Request, agent_id: str) -> Response:
        agent = agent_get(organization=self.organization, agent_id=agent_id)
        return Response(selectors.mcp_tool_selection_list(agent=agent))

    @extend_schema(
        operation_id="replaceAgentMcpTools",
        request=McpSelectionWriteSerializer(many=True),
        responses={200: McpSelectionSerializer(many=True), **ERRORS},
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
        responses={200: McpServerSerializer(many=True), 401: ERRORS[401]},
        description="The organization's connected tool servers (connected in the dashboard). Credentials and "
        "the server URL are never returned.",
    )
    def get(self, request: Request) -> Response:
        return Response(selectors.mcp_server_list(organization=self.organization))
