"""The carriers' HTTP webhooks. Twilio's voice webhook (answer an incoming call) and call status
callbacks are form-encoded POSTs signed with the account's auth token (X-Twilio-Signature) over
the URL as Twilio requested it: PUBLIC_BASE_URL + path + query, never the request's Host (behind a
proxy that is an internal address). Telnyx's Call Control events (incoming call, answered, hung up, a
refusal's sorry spoken) are JSON POSTs to one URL, signed with Ed25519 (telephony/providers/telnyx.py);
the account is the one of the event's connection ID. An unknown account or a missing or wrong signature
is a 403 and nothing else happens."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from kit.providers import ProviderError
from realtime.services import ConcurrentCallLimitExceeded, call_slot_release
from realtime.sockets import parse_json
from realtime.tokens import TokenError
from telephony import warm_transfer
from telephony.models import PhoneNumberProvider, TelephonyAccount
from telephony.providers import provider_for
from telephony.providers.telnyx import REFUSAL_STATE, TelnyxProvider, decode_state
from telephony.services.calls import CALL_ENDED_STATUSES, call_status_receive, incoming_call_answer
from telephony.voicemail import answered_by_receive

logger = logging.getLogger(__name__)

# Said to a caller over the organization's concurrent-call cap (docs/operations/limits.md), then the call hangs up.
BUSY_SENTENCE = "Sorry, all our lines are busy right now. Please call again in a few minutes. Goodbye."
_NOT_CONFIGURED = "PUBLIC_BASE_URL is not set: this service cannot check Twilio's signatures or answer calls."


def _public_url(request: HttpRequest) -> str:
    query = request.META.get("QUERY_STRING", "")
    return settings.PUBLIC_BASE_URL.rstrip("/") + request.path_info + (f"?{query}" if query else "")


def _verified_account(request: HttpRequest) -> TelephonyAccount | None:
    """The telephony account that genuinely signed this request, or None."""
    account_sid = request.POST.get("AccountSid", "")
    accounts = TelephonyAccount.objects.filter(provider=PhoneNumberProvider.TWILIO, account_sid=account_sid)
    account = accounts.first() if account_sid else None
    if account is None or not provider_for(account).verify_webhook(request, _public_url(request)):
        logger.warning("refused a telephony webhook on %s: unknown account or bad signature", request.path_info)
        return None
    return account


def _refused(request: HttpRequest) -> HttpResponse | None:
    if request.method != "POST":
        return HttpResponse(status=405, headers={"Allow": "POST"})
    if not settings.PUBLIC_BASE_URL:
        logger.error(_NOT_CONFIGURED)
        return HttpResponse(_NOT_CONFIGURED, status=503, content_type="text/plain")
    return None


def _busy(account: TelephonyAccount, call_sid: str, exc: ConcurrentCallLimitExceeded) -> str:
    """The document that tells a caller over the organization's concurrent-call cap that the lines are busy."""
    logger.info(
        "phone call %s refused: organization %s is at its limit of %s concurrent calls",
        call_sid,
        account.organization_id,
        exc.limit,
    )
    return provider_for(account).answer_refusal(message=BUSY_SENTENCE, language="en-US")


@csrf_exempt
def twilio_voice(request: HttpRequest) -> HttpResponse:
    """An incoming call: TwiML that connects it to its agent's media stream, or says sorry and hangs up."""
    refused = _refused(request)
    if refused is not None:
        return refused
    account = _verified_account(request)
    if account is None:
        return HttpResponse("Forbidden", status=403, content_type="text/plain")
    try:
        document = incoming_call_answer(
            account=account,
            call_sid=request.POST.get("CallSid", "")[:64],
            from_number=request.POST.get("From", "")[:64],
            to_number=request.POST.get("To", "")[:64],
        )
    except ConcurrentCallLimitExceeded as exc:
        # No call record: the call never reached an agent (its status callback finds nothing to close).
        document = _busy(account, request.POST.get("CallSid", "")[:64], exc)
        return HttpResponse(document, content_type="text/xml")
    except (ProviderError, TokenError) as exc:
        logger.error("cannot answer phone calls: %s", exc.message)
        return HttpResponse(exc.message, status=503, content_type="text/plain")
    return HttpResponse(document, content_type="text/xml")


@csrf_exempt
async def twilio_status(request: HttpRequest) -> HttpResponse:
    """A call status callback: a final status ends the call's live session, or closes its record when
    no live session is left."""
    refused = _refused(request)
    if refused is not None:
        return refused
    account = await sync_to_async(_verified_account)(request)
    if account is None:
        return HttpResponse("Forbidden", status=403, content_type="text/plain")
    if request.POST.get("CallStatus", "") in CALL_ENDED_STATUSES:
        # A call that ended before its stream opened gives its live-call slot back at once.
        await sync_to_async(call_slot_release)(channel="phone", key=request.POST.get("CallSid", ""))
    await call_status_receive(
        organization_id=account.organization_id,
        call_sid=request.POST.get("CallSid", "")[:64],
        call_status=request.POST.get("CallStatus", ""),
        call_id=request.GET.get("callId", "")[:64],  # an outbound call's callback names its call record
    )
    return HttpResponse(status=204)


@csrf_exempt
async def twilio_amd(request: HttpRequest) -> HttpResponse:
    """Twilio's asynchronous answering-machine detection verdict for an outbound call (AsyncAmd): kept on
    the call, logged, and told to its live session (telephony/voicemail.py)."""
    refused = _refused(request)
    if refused is not None:
        return refused
    account = await sync_to_async(_verified_account)(request)
    if account is None:
        return HttpResponse("Forbidden", status=403, content_type="text/plain")
    await answered_by_receive(
        organization_id=account.organization_id,
        call_sid=request.POST.get("CallSid", "")[:64],
        answered_by=request.POST.get("AnsweredBy", "")[:40],
        duration=request.POST.get("MachineDetectionDuration", "")[:20],
    )
    return HttpResponse(status=204)


@csrf_exempt
async def twilio_transfer(request: HttpRequest, call_sid: str, transfer_id: str) -> HttpResponse:
    """The key the person pressed after a warm transfer's briefing (telephony/warm_transfer.py): "1" joins
    them to the transfer's conference and tells the caller's session; anything else declines."""
    refused = _refused(request)
    if refused is not None:
        return refused
    if await sync_to_async(_verified_account)(request) is None:
        return HttpResponse("Forbidden", status=403, content_type="text/plain")
    accepted = request.POST.get("Digits", "") == warm_transfer.ACCEPT_KEY
    outcome = warm_transfer.ACCEPTED if accepted else warm_transfer.DECLINED
    await warm_transfer.outcome_send(call_sid=call_sid, transfer_id=transfer_id, outcome=outcome)
    document = warm_transfer.conference_twiml(warm_transfer.conference_name(transfer_id)) if accepted else None
    return HttpResponse(document or warm_transfer.goodbye_twiml(), content_type="text/xml")


@csrf_exempt
async def twilio_transfer_status(request: HttpRequest, call_sid: str, transfer_id: str) -> HttpResponse:
    """The status of a warm transfer's call to the person: a final one without a key press tells the
    caller's session (busy, no answer, failed; a hang-up is a decline)."""
    refused = _refused(request)
    if refused is not None:
        return refused
    if await sync_to_async(_verified_account)(request) is None:
        return HttpResponse("Forbidden", status=403, content_type="text/plain")
    outcome = warm_transfer.LEG_OUTCOMES.get(request.POST.get("CallStatus", ""))
    if outcome is not None:
        await warm_transfer.outcome_send(call_sid=call_sid, transfer_id=transfer_id, outcome=outcome)
    return HttpResponse(status=204)


# Telnyx's hang-up causes as the status words of the call status callbacks (telephony.services.calls).
TELNYX_HANGUP_STATUSES = {
    "normal_clearing": "completed",
    "time_limit": "completed",
    "user_busy": "busy",
    "timeout": "no-answer",
    "no_answer": "no-answer",
    "originator_cancel": "canceled",
}
_MAX_EVENT_BYTES = 64_000


def _telnyx_event(request: HttpRequest) -> tuple[str, dict[str, Any]] | None:
    """(event type, payload) of a Call Control event body, None when it is not one."""
    if len(request.body) > _MAX_EVENT_BYTES:
        return None
    try:
        body = parse_json(request.body.decode())
    except UnicodeDecodeError:
        return None
    # Not JSON (BAD_JSON), or a string that could not be stored (Unstorable): not an event of Telnyx's.
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, dict) or not isinstance(data.get("payload"), dict):
        return None
    event_type = data.get("event_type")
    return (event_type, data["payload"]) if isinstance(event_type, str) else None


def _telnyx_account(request: HttpRequest, connection_id: str) -> TelephonyAccount | None:
    """The Telnyx account of `connection_id` whose key genuinely signed this request, or None."""
    account = (
        TelephonyAccount.objects.filter(provider=PhoneNumberProvider.TELNYX, account_sid=connection_id).first()
        if connection_id
        else None
    )
    if account is None or not provider_for(account).verify_webhook(request, _public_url(request)):
        logger.warning("refused a telephony webhook on %s: unknown account or bad signature", request.path_info)
        return None
    return account


def _text(payload: dict[str, Any], name: str) -> str:
    value = payload.get(name)
    return value[:64] if isinstance(value, str) else ""


@csrf_exempt
async def telnyx_events(request: HttpRequest) -> HttpResponse:
    """A Call Control event: an incoming call is answered with a media stream to its agent (or a spoken
    sorry, then a hang-up); answered and hung-up calls are call status callbacks."""
    refused = _refused(request)
    if refused is not None:
        return refused
    event = _telnyx_event(request)
    if event is None:
        return HttpResponse("Not a Call Control event", status=400, content_type="text/plain")
    event_type, payload = event
    account = await sync_to_async(_telnyx_account)(request, _text(payload, "connection_id"))
    if account is None:
        return HttpResponse("Forbidden", status=403, content_type="text/plain")
    provider = provider_for(account)
    assert isinstance(provider, TelnyxProvider)
    call_sid = _text(payload, "call_control_id")
    if event_type == "call.initiated" and payload.get("direction") == "incoming":
        return await _telnyx_incoming(account, provider, payload, call_sid)
    try:
        if event_type == "call.speak.ended" and decode_state(payload.get("client_state")) == REFUSAL_STATE:
            await provider.hang_up(call_sid=call_sid)
    except ProviderError as exc:
        logger.warning("could not hang up a refused phone call: %s", exc.message)
    status = {"call.initiated": "initiated", "call.answered": "in-progress"}.get(event_type)
    if event_type == "call.hangup":
        status = TELNYX_HANGUP_STATUSES.get(str(payload.get("hangup_cause")), "failed")
    if status is None:
        return HttpResponse(status=200)
    if status in CALL_ENDED_STATUSES:
        await sync_to_async(call_slot_release)(channel="phone", key=call_sid)
    await call_status_receive(
        organization_id=account.organization_id,
        call_sid=call_sid,
        call_status=status,
        call_id=request.GET.get("callId", "")[:64],  # an outbound call's webhook URL names its call record
    )
    return HttpResponse(status=200)


async def _telnyx_incoming(
    account: TelephonyAccount, provider: TelnyxProvider, payload: dict[str, Any], call_sid: str
) -> HttpResponse:
    try:
        document = await sync_to_async(incoming_call_answer)(
            account=account, call_sid=call_sid, from_number=_text(payload, "from"), to_number=_text(payload, "to")
        )
    except ConcurrentCallLimitExceeded as exc:
        document = _busy(account, call_sid, exc)
    except (ProviderError, TokenError) as exc:
        logger.error("cannot answer phone calls: %s", exc.message)
        return HttpResponse(exc.message, status=503, content_type="text/plain")
    try:
        await provider.run_commands(call_sid=call_sid, document=document)
    except ProviderError as exc:
        # The call was not answered: its live-call slot is not held until the stream token expires.
        logger.error("could not answer phone call %s: %s", call_sid, exc.message)
        await sync_to_async(call_slot_release)(channel="phone", key=call_sid)
    return HttpResponse(status=200)
