from django.urls import path

from agents.tools import apis

urlpatterns = [
    path("agents/<str:agent_id>/tools", apis.AgentToolListCreateApi.as_view(), name="agent-tools"),
    path("agents/<str:agent_id>/tools/<str:tool_id>", apis.AgentToolDetailApi.as_view(), name="agent-tool-detail"),
    path("agents/<str:agent_id>/mcp-tools", apis.AgentMcpToolsApi.as_view(), name="agent-mcp-tools"),
    path("mcp/servers", apis.McpServerListApi.as_view(), name="mcp-servers"),
]
