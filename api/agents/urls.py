from django.urls import path

from api.agents import apis

urlpatterns = [
    path("agents", apis.AgentListCreateApi.as_view(), name="agents"),
    path("agents/<str:agent_id>", apis.AgentDetailApi.as_view(), name="agent-detail"),
]
