from django.urls import include, path

from realtime import apis
from realtime.agent_tests import apis as test_apis
from realtime.agent_tests import run_apis

urlpatterns = [
    path("agents/<str:agent_id>/realtime-sessions", apis.RealtimeSessionCreateApi.as_view(), name="realtime-sessions"),
    path("agents/<str:agent_id>/tests", test_apis.AgentTestListCreateApi.as_view(), name="agent-tests"),
    path("agents/<str:agent_id>/tests/<str:test_id>", test_apis.AgentTestDetailApi.as_view(), name="agent-test-detail"),
    # Under calls/ but here: a test is realtime's, a floor above calls (calls/urls.py has no calls/{id}/tests).
    path("calls/<str:call_id>/tests", test_apis.CallTestCreateApi.as_view(), name="call-tests"),
    path("agents/<str:agent_id>/test-runs", run_apis.TestRunCreateApi.as_view(), name="agent-test-runs"),
    path("test-runs/<str:run_id>", run_apis.TestRunDetailApi.as_view(), name="test-run"),
    path("test-runs/<str:run_id>/cancel", run_apis.TestRunCancelApi.as_view(), name="test-run-cancel"),
    path("", include("realtime.widget.urls")),  # widget keys and widget sessions (docs/widget.md)
]
