from django.urls import path

from realtime import apis
from realtime.agent_tests import run_apis

urlpatterns = [
    path("agents/<str:agent_id>/realtime-sessions", apis.RealtimeSessionCreateApi.as_view(), name="realtime-sessions"),
    path("agents/<str:agent_id>/test-runs", run_apis.TestRunCreateApi.as_view(), name="agent-test-runs"),
    path("test-runs/<str:run_id>", run_apis.TestRunDetailApi.as_view(), name="test-run"),
]
