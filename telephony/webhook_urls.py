"""The carriers' webhooks, at the root (outside /public/v1: they are signed by the carrier, not
authenticated with an API key). The paths are telephony.services.accounts.VOICE_PATH, STATUS_PATH and
TELNYX_EVENTS_PATH, and telephony.voicemail.AMD_PATH."""

from django.urls import path

from telephony import webhooks

urlpatterns = [
    path("telephony/twilio/voice", webhooks.twilio_voice, name="twilio-voice"),
    path("telephony/twilio/status", webhooks.twilio_status, name="twilio-status"),
    path("telephony/twilio/amd", webhooks.twilio_amd, name="twilio-amd"),
    path(
        "telephony/twilio/transfer/<str:call_sid>/<str:transfer_id>", webhooks.twilio_transfer, name="twilio-transfer"
    ),
    path(
        "telephony/twilio/transfer/<str:call_sid>/<str:transfer_id>/status",
        webhooks.twilio_transfer_status,
        name="twilio-transfer-status",
    ),
    path("telephony/telnyx/events", webhooks.telnyx_events, name="telnyx-events"),
]
