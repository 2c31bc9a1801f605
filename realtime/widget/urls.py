from django.urls import path

from realtime.widget import apis

urlpatterns = [
    path("agents/<str:agent_id>/widget-keys", apis.WidgetKeyListCreateApi.as_view(), name="widget-keys"),
    path("agents/<str:agent_id>/widget-keys/<str:key_id>", apis.WidgetKeyDetailApi.as_view(), name="widget-key"),
    path("widget/sessions", apis.WidgetSessionCreateApi.as_view(), name="widget-sessions"),
]
