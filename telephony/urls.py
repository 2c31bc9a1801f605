from django.urls import path

from telephony import apis
from telephony.campaigns import apis as batch_apis

urlpatterns = [
    path("phone-numbers", apis.PhoneNumberListApi.as_view(), name="phone-numbers"),
    path("agents/<str:agent_id>/phone-numbers", apis.AgentPhoneNumbersApi.as_view(), name="agent-phone-numbers"),
    path(
        "agents/<str:agent_id>/phone-numbers/<str:phone_number_id>",
        apis.AgentPhoneNumberDetailApi.as_view(),
        name="agent-phone-number-detail",
    ),
    path("call-batches", batch_apis.BatchListCreateApi.as_view(), name="call-batches"),
    path("call-batches/<str:batch_id>", batch_apis.BatchDetailApi.as_view(), name="call-batch-detail"),
    path("call-batches/<str:batch_id>/calls", batch_apis.BatchCallsApi.as_view(), name="call-batch-calls"),
    path(
        "call-batches/<str:batch_id>/recipients", batch_apis.BatchRecipientsApi.as_view(), name="call-batch-recipients"
    ),
    path("call-batches/<str:batch_id>/pause", batch_apis.BatchPauseApi.as_view(), name="call-batch-pause"),
    path("call-batches/<str:batch_id>/resume", batch_apis.BatchResumeApi.as_view(), name="call-batch-resume"),
    path("call-batches/<str:batch_id>/cancel", batch_apis.BatchCancelApi.as_view(), name="call-batch-cancel"),
]
