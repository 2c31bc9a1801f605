from django.urls import path

from calls import apis
from calls.analytics import apis as analytics_apis
from calls.budgets import apis as budget_apis
from calls.costs import apis as cost_apis
from calls.webhooks import apis as webhook_apis

urlpatterns = [
    path("calls", apis.CallListApi.as_view(), name="calls"),
    path("calls/<str:call_id>", apis.CallDetailApi.as_view(), name="call-detail"),
    path("calls/<str:call_id>/hang-up", apis.CallHangUpApi.as_view(), name="call-hang-up"),
    path("calls/<str:call_id>/recording", apis.CallRecordingApi.as_view(), name="call-recording"),
    path("recordings/<str:call_id>", apis.SignedRecordingApi.as_view(), name="signed-recording"),
    path("agents/<str:agent_id>/logs", apis.AgentLogListApi.as_view(), name="agent-logs"),
    path("analytics/calls", analytics_apis.CallAnalyticsApi.as_view(), name="call-analytics"),
    path("pricing", cost_apis.PricingApi.as_view(), name="pricing"),
    path("budgets", budget_apis.BudgetListApi.as_view(), name="budgets"),
    path("budgets/<str:budget_id>", budget_apis.BudgetDetailApi.as_view(), name="budget-detail"),
    path("webhooks", webhook_apis.WebhookListApi.as_view(), name="webhooks"),
    path("webhooks/<str:webhook_id>", webhook_apis.WebhookDetailApi.as_view(), name="webhook-detail"),
    path(
        "webhooks/<str:webhook_id>/rotate-secret",
        webhook_apis.WebhookRotateSecretApi.as_view(),
        name="webhook-rotate-secret",
    ),
    path("webhooks/<str:webhook_id>/test", webhook_apis.WebhookTestApi.as_view(), name="webhook-test"),
    path("webhook-deliveries", webhook_apis.DeliveryListApi.as_view(), name="webhook-deliveries"),
    path(
        "webhook-deliveries/<str:delivery_id>/redeliver",
        webhook_apis.DeliveryRedeliverApi.as_view(),
        name="webhook-delivery-redeliver",
    ),
]
