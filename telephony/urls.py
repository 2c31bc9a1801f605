from django.urls import path

from telephony import apis

urlpatterns = [
    path("phone-numbers", apis.PhoneNumberListApi.as_view(), name="phone-numbers"),
    path("agents/<str:agent_id>/phone-numbers", apis.AgentPhoneNumbersApi.as_view(), name="agent-phone-numbers"),
    path(
        "agents/<str:agent_id>/phone-numbers/<str:phone_number_id>",
        apis.AgentPhoneNumberDetailApi.as_view(),
        name="agent-phone-number-detail",
    ),
]
