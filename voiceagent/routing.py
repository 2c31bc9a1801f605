"""WebSocket routes of every transport (browser sessions, phone media streams), and the ASGI application
that serves them beside Django's HTTP (`make_application`: voiceagent/asgi.py's, and the tests' in-process
server, testing/inprocess.py)."""

from typing import Any

from realtime.routing import websocket_urlpatterns as realtime_routes
from telephony.routing import websocket_urlpatterns as telephony_routes

websocket_urlpatterns = [*realtime_routes, *telephony_routes]


def make_application() -> Any:
    """HTTP to Django (each request's thread taken from a pool: voiceagent/http.py), WebSockets to the
    Channels consumers. Django must be set up."""
    from channels.routing import ProtocolTypeRouter, URLRouter

    from voiceagent.http import PooledThreadsASGIHandler

    return ProtocolTypeRouter({"http": PooledThreadsASGIHandler(), "websocket": URLRouter(websocket_urlpatterns)})
