from django.urls import path

from telephony import agent_apis, apis

urlpatterns = [
    path("agents", agent_apis.AgentListCreateApi.as_view(), name="agents"),
    path("agents/<str:agent_id>", agent_apis.AgentDetailApi.as_view(), name="agent-detail"),
    path("phone-numbers", apis.PhoneNumberListApi.as_view(), name="phone-numbers"),
    path("agents/<str:agent_id>/phone-numbers", apis.AgentPhoneNumbersApi.as_view(), name="agent-phone-numbers"),
    path(
        "agents/<str:agent_id>/phone-numbers/<str:phone_number_id>",
        apis.AgentPhoneNumberDetailApi.as_view(),
        name="agent-phone-number-detail",
    ),
]
