"""WebSocket routes of the telephony app (included by voiceagent/routing.py into the ASGI app)."""

from django.urls import path

from telephony.consumers import TelnyxMediaStream, TwilioMediaStream

websocket_urlpatterns: list = [
    path("telephony/twilio/stream", TwilioMediaStream.as_asgi()),
    path("telephony/telnyx/stream", TelnyxMediaStream.as_asgi()),
]
