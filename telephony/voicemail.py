"""Answering machines on outbound calls (docs/guides/voicemail.md, docs/guides/voicemail.md).

An agent whose `voicemail.detection` is "provider" asks Twilio for asynchronous answering-machine
detection when its outbound call is placed (`amd_params`, the keyword arguments of twilio's
`calls.create`): the call connects at once and the media stream starts; Twilio POSTs its verdict later
to AMD_PATH (`answered_by_receive`, behind the signed webhook telephony.webhooks.twilio_amd). The verdict
is kept on the call (`Call.answered_by`), written to the agent log, and told to the live session through
the call's channel-layer group (`call.answered_by`), whichever process holds it: the session holds its
greeting at most realtime.engine.session.voicemail.GREETING_HOLD_SECONDS for it, and on a machine
leaves the agent's message or hangs up (endedReason `voicemail`).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from agents.models import Agent
from agents.voicemail import ACTION_LEAVE_MESSAGE, VERDICTS, detection_on
from calls.logging import LogSession, agent_log, new_session_id
from calls.models import Call
from kit.providers import ProviderError
from telephony.groups import call_group

logger = logging.getLogger(__name__)

AMD_PATH = "/telephony/twilio/amd"
# The channel-layer message that tells the stream consumer of the call (telephony/consumers.py).
ANSWERED_BY_MESSAGE = "call.answered_by"


def amd_params(agent: Agent, callback_url: str) -> dict[str, Any]:
    """The keyword arguments of twilio's `calls.create` that ask for the agent's answering-machine
    detection: none when its detection is off. Asynchronous (the call connects at once and the verdict
    is POSTed to `callback_url`); DetectMessageEnd when a message is to be left, so that the final
    verdict comes once the machine's greeting has ended (at the beep), else Enable (the first verdict
    is enough to hang up)."""
    setting = agent.voicemail
    if not detection_on(setting):
        return {}
    leave = setting.get("action") == ACTION_LEAVE_MESSAGE
    return {
        "machine_detection": "DetectMessageEnd" if leave else "Enable",
        "async_amd": "true",
        "async_amd_status_callback": callback_url,
        "async_amd_status_callback_method": "POST",
    }


def amd_callback_url() -> str:
    """Where Twilio POSTs its verdict: PUBLIC_BASE_URL + AMD_PATH (never a request's Host).
    ProviderError(permanent) when PUBLIC_BASE_URL is not set."""
    base = (settings.PUBLIC_BASE_URL or "").rstrip("/")
    if not base:
        raise ProviderError(
            "PUBLIC_BASE_URL is not set: answering-machine detection needs the public address of this service",
            permanent=True,
        )
    return base + AMD_PATH


def _duration_ms(value: str) -> int | None:
    try:
        milliseconds = int(value)
    except (TypeError, ValueError):
        return None
    return milliseconds if 0 <= milliseconds <= 10_000_000 else None


def _verdict_store(*, organization_id: uuid.UUID, call_sid: str, answered_by: str, duration_ms: int | None) -> bool:
    """Keep the verdict on the organization's call with that CallSid and write it to the agent log.
    False when there is no such call."""
    call = (
        Call.objects.filter(organization_id=organization_id, provider_call_id=call_sid)
        .only("id", "organization_id", "agent_id", "status")
        .first()
    )
    if call is None:
        return False
    Call.objects.filter(pk=call.pk).update(answered_by=answered_by)
    if call.agent_id is not None:
        session = LogSession(organization_id=call.organization_id, agent_id=call.agent_id, session_id=new_session_id())
        agent_log(
            session,
            "info",
            "answering-machine detection",
            callId=str(call.pk),
            answeredBy=answered_by,
            detectionMs=duration_ms,
            callStatus=call.status,
        )
    return True


async def answered_by_receive(
    *, organization_id: uuid.UUID, call_sid: str, answered_by: str, duration: str = ""
) -> bool:
    """Twilio's asynchronous AMD callback: the verdict is stored on the call, logged, and told to the
    call's live session (if any, in whichever process). False when the CallSid is not one of the
    organization's calls or the verdict is not one of Twilio's (nothing is done then)."""
    if answered_by not in VERDICTS or not call_sid:
        logger.warning("AMD callback for call %s ignored: unknown AnsweredBy %r", call_sid[:10], answered_by[:40])
        return False
    duration_ms = _duration_ms(duration)
    stored = await sync_to_async(_verdict_store)(
        organization_id=organization_id, call_sid=call_sid, answered_by=answered_by, duration_ms=duration_ms
    )
    if not stored:
        logger.info("AMD callback for an unknown call %s…", call_sid[:10])
        return False
    layer = get_channel_layer()
    if layer is not None:
        try:
            await layer.group_send(
                call_group(call_sid),
                {"type": ANSWERED_BY_MESSAGE, "answered_by": answered_by, "duration_ms": duration_ms},
            )
        except Exception:  # the verdict is kept on the call; a live session then greets as usual
            logger.warning("could not tell call %s's stream its AMD verdict", call_sid[:10], exc_info=True)
    return True
