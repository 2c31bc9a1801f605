from django.urls import include, path

from agents import apis

urlpatterns = [
    path("agents", apis.AgentListCreateApi.as_view(), name="agents"),
    path("agents/<str:agent_id>", apis.AgentDetailApi.as_view(), name="agent-detail"),
    path("", include("agents.tools.urls")),
]
