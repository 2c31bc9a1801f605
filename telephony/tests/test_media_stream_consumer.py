"""The media-stream consumer in this process (Channels' communicator, the configured channel layer):
call control that arrives through the call's group ends the session."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from calls.models import Call
from telephony.groups import call_group
from telephony.streams import stream_token_issue
from voiceagent.routing import websocket_urlpatterns

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

CALL_SID = "CA" + "e" * 32
STREAM_SID = "MZ" + "e" * 32


@pytest.fixture
def ava(owner: Any, make_agent: Any, realtime_settings: Any) -> Any:
    return make_agent(
        owner.organization, name="Ava", status="active", greeting_type="static", static_greeting="Hello there."
    )


def start_message(token: str) -> dict[str, Any]:
    return {
        "event": "start",
        "sequenceNumber": "1",
        "streamSid": STREAM_SID,
        "start": {
            "streamSid": STREAM_SID,
            "accountSid": "AC" + "e" * 32,
            "callSid": CALL_SID,
            "tracks": ["inbound"],
            "customParameters": {"token": token},
            "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
        },
    }


async def closed_after_media(communicator: WebsocketCommunicator) -> list[dict[str, Any]]:
    """Every message until the server closes the socket."""
    received = []
    while True:
        output = await communicator.receive_output(timeout=60)
        if output["type"] == "websocket.close":
            return received
        received.append(json.loads(output["text"]))


@pytest.mark.parametrize(
    ("event", "status", "reason"),
    [
        ({"type": "call.hangup"}, "completed", "agent-ended-call"),
        ({"type": "call.ended", "status": "failed"}, "failed", "provider-error"),
        ({"type": "call.ended", "status": "no-answer"}, "completed", "no-answer"),
    ],
)
async def test_call_control_through_the_calls_group_ends_the_session(ava, event, status, reason):
    token = await sync_to_async(stream_token_issue)(
        organization_id=ava.organization_id,
        agent_id=ava.pk,
        phone_number_id="00000000-0000-0000-0000-000000000001",
        call_sid=CALL_SID,
        from_number="+14155550199",
        to_number="+14155550100",
    )
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/telephony/twilio/stream")
    connected, _ = await communicator.connect()
    assert connected
    await communicator.send_json_to({"event": "connected", "protocol": "Call", "version": "1.0.0"})
    await communicator.send_json_to(start_message(token))
    first = await communicator.receive_json_from(timeout=60)
    assert first["event"] == "media" and first["streamSid"] == STREAM_SID
    await get_channel_layer().group_send(call_group(CALL_SID), event)
    await closed_after_media(communicator)
    await communicator.wait()
    call = await sync_to_async(Call.objects.get)(provider_call_id=CALL_SID)
    assert call.status == status and call.ended_at is not None and call.channel == "phone"
    assert call.ended_reason == reason
