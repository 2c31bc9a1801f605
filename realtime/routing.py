"""WebSocket routes of the realtime app (included by voiceagent/routing.py into the ASGI app)."""

from django.conf import settings
from django.urls import path

from realtime.apps import preload_in_background
from realtime.consumers import BrowserSession

websocket_urlpatterns: list = [
    path("ws/agents/<str:agent_id>/realtime", BrowserSession.as_asgi()),
]

# This module is imported when the ASGI application is built: warm the speech models in the
# background then, so that the first session does not wait for a cold load.
if getattr(settings, "REALTIME_PRELOAD", True):
    preload_in_background()
