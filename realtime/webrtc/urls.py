"""The offerUrl of WebRTC sessions (realtime.services.webrtc_offer_path), outside /public/v1: the session
token is its credential, not an API key."""

from django.urls import path

from realtime.webrtc import views

urlpatterns = [
    path("realtime/webrtc/agents/<str:agent_id>/session", views.session, name="webrtc-session"),
]
