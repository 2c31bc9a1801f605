"""Warm transfers over Twilio (docs/guides/phone-calls.md#warm-transfers).

The caller's media stream stays up while the agent plays hold audio: the transport calls the person
(a second call, `dial_person`) with a briefing and a one-key menu (`briefing_twiml`). Twilio posts the
key to TRANSFER_PATH/<caller's CallSid>/<transfer id> (`twilio_transfer`, telephony/webhooks.py), and the
second call's status to the same path + `/status`; both reach the caller's live session, in whichever
process holds it, through the call's channel-layer group (`outcome_send`). On "1" the person's call is
answered with a conference, the caller's call is moved into the same conference (its stream stops: the
agent leaves), and the call ends `transferred`. Any other key, a hang-up, no answer within the ring
time, a busy line or a failure leaves the caller with the agent.
"""

from __future__ import annotations

import logging

from channels.layers import get_channel_layer
from django.conf import settings
from twilio.twiml.voice_response import VoiceResponse

from telephony.groups import call_group

logger = logging.getLogger(__name__)

TRANSFER_PATH = "/telephony/twilio/transfer"
OUTCOME_MESSAGE = "call.transfer_outcome"  # the group message (handled by the media stream's consumer)
ACCEPT_KEY = "1"
GATHER_SECONDS = 10  # how long the person has to press a key once the briefing has been said
ACCEPTED, DECLINED, NO_ANSWER, FAILED = "accepted", "declined", "no-answer", "failed"
# The second call's final statuses (Twilio's CallStatus) -> the transfer's outcome.
LEG_OUTCOMES = {
    "busy": NO_ANSWER,
    "no-answer": NO_ANSWER,
    "canceled": NO_ANSWER,
    "failed": FAILED,
    "completed": DECLINED,
}


def transfer_urls(call_sid: str, transfer_id: str) -> tuple[str, str]:
    """The person's key press URL and the second call's status callback URL."""
    base = f"{settings.PUBLIC_BASE_URL.rstrip('/')}{TRANSFER_PATH}/{call_sid}/{transfer_id}"
    return base, f"{base}/status"


def conference_name(transfer_id: str) -> str:
    return f"transfer-{transfer_id}"


def briefing_twiml(*, briefing: str, action_url: str, language: str) -> str:
    """What the person hears: the briefing, then "press 1"; no key is a goodbye (a decline)."""
    response = VoiceResponse()
    gather = response.gather(num_digits=1, action=action_url, method="POST", timeout=GATHER_SECONDS)
    gather.say(f"{briefing} Press 1 to take the call.", language=language)
    response.say("Goodbye.", language=language)
    response.hangup()
    return response.to_xml()


def conference_twiml(name: str) -> str:
    """A call joining the transfer's conference (it ends when either side leaves)."""
    response = VoiceResponse()
    dial = response.dial()
    dial.conference(name, start_conference_on_enter=True, end_conference_on_exit=True, beep=False)
    return response.to_xml()


def goodbye_twiml() -> str:
    response = VoiceResponse()
    response.say("Goodbye.")
    response.hangup()
    return response.to_xml()


async def outcome_send(*, call_sid: str, transfer_id: str, outcome: str) -> None:
    """Tell the caller's live session how its warm transfer went (no session: nothing to do)."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(
            call_group(call_sid), {"type": OUTCOME_MESSAGE, "transfer": transfer_id, "outcome": outcome}
        )
    except Exception:  # the session's own ring timer then decides
        logger.warning("could not tell call %s… how its transfer went", call_sid[:10], exc_info=True)
