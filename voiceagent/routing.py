"""WebSocket routes of every transport (browser sessions, phone media streams)."""

from realtime.routing import websocket_urlpatterns as realtime_routes
from telephony.routing import websocket_urlpatterns as telephony_routes

websocket_urlpatterns = [*realtime_routes, *telephony_routes]
