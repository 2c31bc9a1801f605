"""Incoming phone calls: the answer to the carrier's voice webhook (a media stream to the number's
agent, or a short spoken refusal) and its status callbacks (a final status ends the live stream, or
finishes a call record that no live stream holds any more).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import timedelta

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.utils import timezone

from agents.models import AgentStatus
from calls.budgets.services import budget_refusal
from calls.logging import LogSession, agent_log, new_session_id
from calls.models import Call, CallDirection, CallStatus, EndedReason
from calls.services import call_end_unanswered, call_finish
from realtime.services import call_slot_reserve
from telephony.groups import call_group
from telephony.models import PhoneNumber, PhoneNumberStatus, TelephonyAccount
from telephony.providers import provider_for
from telephony.services.accounts import public_urls
from telephony.streams import STREAM_TOKEN_TTL_SECONDS, stream_token_issue

logger = logging.getLogger(__name__)

# One short sentence per language (the agent's language, else English). The caller learns only that
# the number cannot take the call; the reason goes to the agent's log.
_REFUSALS = {
    "en": ("en-US", "Sorry, this number cannot take your call right now. Goodbye."),
    "es": ("es-ES", "Lo sentimos, este número no puede atender su llamada en este momento. Adiós."),
    "it": ("it-IT", "Ci dispiace, questo numero non può rispondere alla sua chiamata in questo momento. Arrivederci."),
    "fr": ("fr-FR", "Désolé, ce numéro ne peut pas prendre votre appel pour le moment. Au revoir."),
    "de": ("de-DE", "Entschuldigung, diese Nummer kann Ihren Anruf gerade nicht annehmen. Auf Wiederhören."),
    "pt": ("pt-BR", "Desculpe, este número não pode atender a sua chamada neste momento. Até logo."),
}


def refusal_sentence(language: str | None) -> tuple[str, str]:
    """(language tag for the carrier's speech, sentence): the agent's language when there is a sentence
    for it (its own regional tag kept, e.g. es-US), else US English."""
    primary = (language or "").split("-")[0].lower()
    if primary not in _REFUSALS:
        return _REFUSALS["en"]
    default_tag, sentence = _REFUSALS[primary]
    tag = language if language and "-" in language and len(language) <= 10 else default_tag
    return tag, sentence


def incoming_call_answer(*, account: TelephonyAccount, call_sid: str, from_number: str, to_number: str) -> str:
    """The provider document answering an incoming call on `to_number` (a genuine, signature-checked
    webhook of `account`): a media stream to the number's agent with a single-use stream token, or a
    short sorry and a hang-up when the number is unknown, not claimed, unassigned, its agent is not
    active or a spent `block` budget holds the agent's calls (a `warn` line in the agent's log when there
    is an agent). ProviderError (permanent) when PUBLIC_BASE_URL is not set; TokenError when
    REALTIME_TOKEN_SECRET is not set."""
    provider = provider_for(account)
    number = (
        PhoneNumber.objects.select_related("assigned_agent")
        .filter(organization_id=account.organization_id, phone_number=to_number)
        .first()
    )
    agent = number.assigned_agent if number is not None else None
    if number is None:
        reason = "the number is not one of the organization's numbers"
    elif number.status != PhoneNumberStatus.CLAIMED:
        reason = f"the number is {number.status}, not claimed"
    elif agent is None:
        reason = "the number is not assigned to an agent"
    elif agent.status != AgentStatus.ACTIVE:
        reason = f"the agent is {agent.status}, not active"
    else:
        # A spent `block` budget of the organization or the agent (a phone call has no variables yet).
        refusal = budget_refusal(organization=agent.organization_id, agent_id=agent.pk, variables=None)
        reason = refusal.reason if refusal is not None else ""
    if reason:
        logger.info("phone call %s to %s refused: %s", call_sid, to_number, reason)
        if agent is not None:
            session = LogSession(organization_id=agent.organization_id, agent_id=agent.pk, session_id=new_session_id())
            agent_log(
                session,
                "warn",
                f"Phone call refused: {reason}",
                callSid=call_sid,
                **{"from": from_number, "to": to_number},
            )
        language, sentence = refusal_sentence(agent.language if agent is not None else None)
        return provider.answer_refusal(message=sentence, language=language)
    assert number is not None and agent is not None  # no reason to refuse: both exist
    urls = public_urls(account.provider)
    # One of the organization's live-call slots (plan max_concurrent_calls, docs/operations/limits.md); over the cap
    # ConcurrentCallLimitExceeded, which the voice webhook answers with a spoken sorry.
    call_slot_reserve(
        organization_id=account.organization_id,
        channel="phone",
        key=call_sid or uuid.uuid4().hex,
        expires_at=timezone.now() + timedelta(seconds=STREAM_TOKEN_TTL_SECONDS),
    )
    token = stream_token_issue(
        organization_id=account.organization_id,
        agent_id=agent.pk,
        phone_number_id=number.pk,
        call_sid=call_sid,
        from_number=from_number,
        to_number=to_number,
    )
    return provider.answer_stream(stream_url=urls.stream, parameters={"token": token})


# Twilio's final call statuses and what they make of a call record left open.
CALL_ENDED_STATUSES = {
    "completed": CallStatus.COMPLETED,
    "busy": CallStatus.FAILED,
    "failed": CallStatus.FAILED,
    "no-answer": CallStatus.FAILED,
    "canceled": CallStatus.FAILED,
}
# ... and why the call ended: a completed or canceled call was hung up by the caller (canceled: before
# it was answered), busy and no-answer as the carrier says, failed is the carrier's failure.
CALL_ENDED_REASONS = {
    "completed": EndedReason.CALLER_HUNG_UP,
    "busy": EndedReason.BUSY,
    "failed": EndedReason.PROVIDER_ERROR,
    "no-answer": EndedReason.NO_ANSWER,
    "canceled": EndedReason.CALLER_HUNG_UP,
}


# An outbound call never answered ends with Twilio's final status as (status, endedReason); `completed`
# without an answered stream means the stream never opened.
UNANSWERED_ENDINGS = {
    "no-answer": (CallStatus.NO_ANSWER, EndedReason.NO_ANSWER),
    "busy": (CallStatus.BUSY, EndedReason.BUSY),
    "canceled": (CallStatus.CANCELED, EndedReason.CANCELED),
    "failed": (CallStatus.FAILED, EndedReason.PROVIDER_ERROR),
    "completed": (CallStatus.FAILED, EndedReason.PROVIDER_ERROR),
}
# Progress of an outbound call before it is answered.
RINGING_STATUSES = frozenset({"queued", "initiated", "ringing"})


def _waiting_outbound(*, organization_id: uuid.UUID, call_sid: str, call_id: str) -> Call | None:
    """The organization's outbound call, queued or ringing, the callback is about: by the call id its
    callback URL names (a callback may arrive before the carrier's call id is stored), else by CallSid."""
    calls = Call.objects.filter(
        organization_id=organization_id,
        direction=CallDirection.OUTBOUND,
        status__in=(CallStatus.QUEUED, CallStatus.RINGING),
    )
    try:
        by_id = calls.filter(pk=uuid.UUID(call_id)).first() if call_id else None
    except ValueError:
        by_id = None
    if by_id is not None and (not by_id.provider_call_id or not call_sid or by_id.provider_call_id == call_sid):
        return by_id
    return calls.filter(provider_call_id=call_sid).first() if call_sid else None


def _ringing(call: Call, call_sid: str) -> None:
    Call.objects.filter(pk=call.pk, status__in=(CallStatus.QUEUED, CallStatus.RINGING)).update(
        status=CallStatus.RINGING
    )
    if call_sid:
        Call.objects.filter(pk=call.pk, provider_call_id__isnull=True).update(provider_call_id=call_sid[:64])


async def _outbound_status(call: Call, *, call_sid: str, call_status: str) -> Call | bool | None:
    """A status callback of an outbound call not answered yet: True when it is left to the live path
    (it became active meanwhile), else the call it ended (or None)."""
    if call_status in RINGING_STATUSES:
        await sync_to_async(_ringing)(call, call_sid)
        return None
    if call_status not in UNANSWERED_ENDINGS:
        return None  # in-progress: answered, the media stream makes it active
    if call_status == "completed":
        # Answered and already over: its stream may be opening right now (then it ends as a live call).
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, float(settings.TELEPHONY_CALL_END_GRACE_SECONDS))
        while loop.time() < deadline:
            status = await sync_to_async(Call.objects.filter(pk=call.pk).values_list("status", flat=True).first)()
            if status != CallStatus.RINGING and status != CallStatus.QUEUED:
                return status == CallStatus.ACTIVE
            await asyncio.sleep(0.1)
    status, reason = UNANSWERED_ENDINGS[call_status]
    logger.info("outbound call %s ended unanswered (%s)", call.pk, call_status)
    return await sync_to_async(call_end_unanswered)(call_id=call.pk, status=status, ended_reason=reason)


def _open_call(*, organization_id: uuid.UUID, call_sid: str) -> Call | None:
    return Call.objects.filter(
        organization_id=organization_id, provider_call_id=call_sid, status=CallStatus.ACTIVE
    ).first()


async def call_status_receive(
    *, organization_id: uuid.UUID, call_sid: str, call_status: str, call_id: str = ""
) -> Call | None:
    """A status callback from the carrier. For an outbound call not answered yet (`call_id`: the one its
    callback URL names): queued, initiated and ringing make it `ringing`; in-progress is left to its media
    stream; a final status ends it unanswered (no-answer, busy, canceled, failed: calls.services.
    call_end_unanswered, nothing billed). For a live call, a final status tells its media-stream session
    (in whichever process holds it) to end, through the channel layer; a call record still open
    TELEPHONY_CALL_END_GRACE_SECONDS later has no live session (its process died) and is finished
    here. call_finish is idempotent, so a session ending at the same moment does not bill twice.
    Returns the call finished here, if any."""
    waiting = await sync_to_async(_waiting_outbound)(
        organization_id=organization_id, call_sid=call_sid, call_id=call_id
    )
    if waiting is not None:
        outcome = await _outbound_status(waiting, call_sid=call_sid, call_status=call_status)
        if outcome is not True:
            return outcome if isinstance(outcome, Call) else None
        call_sid = call_sid or waiting.provider_call_id or ""
    if call_status not in CALL_ENDED_STATUSES or not call_sid:
        return None
    if await sync_to_async(_open_call)(organization_id=organization_id, call_sid=call_sid) is None:
        return None  # the stream stopped cleanly, or the call never reached an agent
    layer = get_channel_layer()
    if layer is not None:
        try:
            await layer.group_send(call_group(call_sid), {"type": "call.ended", "status": call_status})
        except Exception:  # a channel layer outage must not keep the call open: finish it below
            logger.warning("could not tell call %s's stream that it ended", call_sid, exc_info=True)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, float(settings.TELEPHONY_CALL_END_GRACE_SECONDS))
    while True:
        call = await sync_to_async(_open_call)(organization_id=organization_id, call_sid=call_sid)
        if call is None:
            return None
        if loop.time() >= deadline:
            break
        await asyncio.sleep(0.1)
    logger.info("call %s ended (%s) without a live stream: finishing it", call_sid, call_status)
    return await sync_to_async(call_finish)(
        call=call, status=CALL_ENDED_STATUSES[call_status], ended_reason=CALL_ENDED_REASONS[call_status]
    )
