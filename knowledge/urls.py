from django.urls import path

from knowledge import apis

urlpatterns = [
    path(
        "agents/<str:agent_id>/knowledge",
        apis.upload_bound(apis.KnowledgeListCreateApi.as_view()),
        name="agent-knowledge",
    ),
    path(
        "agents/<str:agent_id>/knowledge/<str:document_id>",
        apis.KnowledgeDetailApi.as_view(),
        name="agent-knowledge-detail",
    ),
]
