from django.urls import path

from calls import apis

urlpatterns = [
    path("calls", apis.CallListApi.as_view(), name="calls"),
    path("calls/<str:call_id>", apis.CallDetailApi.as_view(), name="call-detail"),
    path("calls/<str:call_id>/recording", apis.CallRecordingApi.as_view(), name="call-recording"),
    path("recordings/<str:call_id>", apis.SignedRecordingApi.as_view(), name="signed-recording"),
    path("agents/<str:agent_id>/logs", apis.AgentLogListApi.as_view(), name="agent-logs"),
]
