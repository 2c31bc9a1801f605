"""The carrier's HTTP webhooks: Twilio's voice webhook (answer an incoming call) and call status
callbacks. Both are form-encoded POSTs signed with the account's auth token (X-Twilio-Signature) over
the URL as Twilio requested it: PUBLIC_BASE_URL + path + query, never the request's Host (behind a
proxy that is an internal address). An unknown account or a missing or wrong signature is a 403 and
nothing else happens."""

from __future__ import annotations

import logging

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from kit.providers import ProviderError
from realtime.services import ConcurrentCallLimitExceeded, call_slot_release
from realtime.tokens import TokenError
from telephony.models import TelephonyAccount
from telephony.providers import provider_for
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
    account = TelephonyAccount.objects.filter(account_sid=account_sid).first() if account_sid else None
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
        logger.info(
            "phone call %s refused: organization %s is at its limit of %s concurrent calls",
            request.POST.get("CallSid", "")[:64],
            account.organization_id,
            exc.limit,
        )
        document = provider_for(account).answer_refusal(message=BUSY_SENTENCE, language="en-US")
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
