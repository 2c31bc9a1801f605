"""WebSocket routes of every transport (browser sessions, phone media streams)."""

from realtime.routing import websocket_urlpatterns as realtime_routes

websocket_urlpatterns = [*realtime_routes]
