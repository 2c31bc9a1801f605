from django.urls import path

from realtime import apis

urlpatterns = [
    path("agents/<str:agent_id>/realtime-sessions", apis.RealtimeSessionCreateApi.as_view(), name="realtime-sessions"),
]
