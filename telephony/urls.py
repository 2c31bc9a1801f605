from django.urls import path

from telephony import agent_apis, apis, outbound_apis

urlpatterns = [
    path("agents", agent_apis.AgentListCreateApi.as_view(), name="agents"),
    path("agents/<str:agent_id>", agent_apis.AgentDetailApi.as_view(), name="agent-detail"),
    # GET /calls is calls' list; POST places an outbound call (before calls' route for the same path).
    path("calls", outbound_apis.CallListCreateApi.as_view(), name="calls-create"),
    path("calls/<str:call_id>/hang-up", outbound_apis.CallHangUpApi.as_view(), name="call-hang-up"),
    path("phone-numbers", apis.PhoneNumberListApi.as_view(), name="phone-numbers"),
    path("agents/<str:agent_id>/phone-numbers", apis.AgentPhoneNumbersApi.as_view(), name="agent-phone-numbers"),
    path(
        "agents/<str:agent_id>/phone-numbers/<str:phone_number_id>",
        apis.AgentPhoneNumberDetailApi.as_view(),
        name="agent-phone-number-detail",
    ),
]
