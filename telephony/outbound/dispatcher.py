"""Placing outbound calls: the dispatcher, the sweep, and who runs the dispatcher (the requests that queue
calls and the hang-ups are telephony/outbound/services.py).

- `outbound_dispatch` places queued calls, oldest first, never more than the plan's
  `max_outbound_calls` ringing, live or being placed at once per organization (the others wait
  `queued`), nor above the live-call cap (`max_concurrent_calls`: a call being placed holds a slot, a
  ringing one counts as live). A call is claimed by a conditional UPDATE of `placed_at` before the
  carrier is asked, so it is placed at most once whatever restarts or how many dispatchers run.
  Who runs it (settings.BACKGROUND_WORK, kit/background.py): `inprocess`, a loop of every serving process
  (started by voiceagent/asgi.py, woken by each queued call's commit and by every ended call, polling every
  OUTBOUND_POLL_SECONDS, 0: none; other processes, such as a management command, only queue); `celery`, the
  task `telephony.dispatch_outbound` sent on the same kicks and run by beat every 5 s; `off` or `inline`
  (the tests' own process), nobody here.
- The carrier is asked with `PhoneProvider.place_call`: the answered call opens a media stream with a
  single-use stream token naming the call record, which the stream makes `active`
  (calls.services.call_activate). Status callbacks move it to `ringing` and end a call never answered
  (telephony/services/calls.py).
- A queued call that a spent `block` budget holds when its turn comes (calls/budgets) is not placed: it
  ends `canceled`, naming the budget, and a campaign's call pauses its campaign (`_budget_refused`).
- `outbound_close_stuck` (an upkeep job) fails placed calls the carrier never reported on.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import Organization
from agents.models import AgentStatus
from calls.budgets.services import budget_refusal
from calls.logging import LogSession, agent_log, new_session_id
from calls.maintenance import rows_one_by_one
from calls.models import Call, CallChannel, CallDirection, CallStatus, EndedReason
from calls.services import call_end_unanswered
from kit import background
from kit.providers import ProviderError
from realtime.services import call_slot_release, call_slots_reserve
from realtime.tokens import TokenError
from telephony.models import (
    CallBatch,
    CallBatchRecipient,
    CallBatchStatus,
    OutboundCall,
    PhoneNumberStatus,
    RecipientState,
    TelephonyAccount,
)
from telephony.providers import PhoneProvider, provider_for
from telephony.services.accounts import public_urls
from telephony.streams import STREAM_TOKEN_TTL_SECONDS, stream_token_issue
from telephony.voicemail import amd_callback_url, amd_params

logger = logging.getLogger(__name__)


# --- placing ------------------------------------------------------------------------------------


def _slot_key(call_id: Any) -> str:
    """The live-call slot an outbound call holds while it is being placed (realtime.CallReservation)."""
    return f"outbound-{call_id}"


def _waiting() -> Any:
    return OutboundCall.objects.filter(placed_at__isnull=True, call__status=CallStatus.QUEUED)


def outbound_dispatch(*, limit: int = 500) -> int:
    """Place queued calls (up to `limit`), oldest first, within each organization's limits; returns
    how many were handed to the carrier (placed or failed by it)."""
    organization_ids: list[Any] = []
    for org_id in _waiting().order_by("call__queued_at").values_list("call__organization_id", flat=True)[:5000]:
        if org_id not in organization_ids:
            organization_ids.append(org_id)
    claimed: list[Any] = []
    for org_id in organization_ids:
        if len(claimed) >= limit:
            break
        claimed += _claim(org_id, limit - len(claimed))
    if not claimed:
        return 0
    threads = min(int(settings.OUTBOUND_PLACE_THREADS), len(claimed))
    if threads <= 1:
        for call_id in claimed:
            _place(call_id)
    else:
        background.fan_out(_place_in_thread, claimed, threads=threads, name="outbound-place")
    return len(claimed)


def _busy(org_id: Any) -> int:
    """The organization's outbound calls that hold an outbound slot: ringing, live, or being placed."""
    live = Call.objects.filter(
        organization_id=org_id,
        direction=CallDirection.OUTBOUND,
        status__in=(CallStatus.RINGING, CallStatus.ACTIVE),
    ).count()
    placing = OutboundCall.objects.filter(
        call__organization_id=org_id, call__status=CallStatus.QUEUED, placed_at__isnull=False
    ).count()
    return live + placing


def _claim(org_id: Any, room: int) -> list[Any]:
    """Take the organization's oldest queued calls it has room for (under its row lock, so two
    dispatchers count the same calls): each claimed by setting its placed_at where it is still null."""
    now = timezone.now()
    with transaction.atomic():
        organization = Organization.objects.select_for_update().select_related("plan").get(pk=org_id)
        cap = organization.plan.max_outbound_calls
        if cap == 0:
            return []  # the plan lost its outbound calls: they wait (a plan change places them)
        free = room if cap is None else min(room, cap - _busy(org_id))
        if free <= 0:
            return []
        candidates = list(
            _waiting()
            .filter(call__organization_id=org_id)
            .order_by("call__queued_at", "call_id")
            .values_list("call_id", flat=True)[:free]
        )
        # Each holds a live-call slot while it is placed (at the plan's live-call cap the rest wait).
        slots = call_slots_reserve(
            organization_id=org_id,
            channel=CallChannel.PHONE,
            keys=[_slot_key(call_id) for call_id in candidates],
            expires_at=now + timedelta(seconds=settings.TWILIO_API_TIMEOUT_SECONDS + 60),
        )
        candidates = candidates[: len(slots)]
        if not candidates:
            return []
        OutboundCall.objects.filter(pk__in=candidates, placed_at__isnull=True).update(placed_at=now)
        claimed = list(OutboundCall.objects.filter(pk__in=candidates, placed_at=now).values_list("call_id", flat=True))
        for call_id in set(candidates) - set(claimed):
            call_slot_release(channel=CallChannel.PHONE, key=_slot_key(call_id))
    return sorted(claimed, key=candidates.index)


def _place_in_thread(call_id: Any) -> None:
    try:
        _place(call_id)
    except Exception:
        logger.exception("could not place outbound call %s", call_id)


def status_callback_url(base: str, call_id: Any) -> str:
    """The status callback of an outbound call: it names the call, so a callback that arrives before the
    carrier's call id is stored still finds it (the signature covers the query)."""
    return f"{base}?callId={call_id}"


def _log(call: Call, severity: str, message: str, **fields: Any) -> None:
    if call.agent_id is not None:
        session = LogSession(organization_id=call.organization_id, agent_id=call.agent_id, session_id=new_session_id())
        agent_log(session, severity, message, callId=str(call.pk), to=call.to_number, **fields)


def _place(call_id: Any) -> None:
    """Ask the carrier to place a claimed call; it rings (with the carrier's call id) or ends `failed`
    (provider-error). Its live-call slot is given back either way (a ringing call counts as live)."""
    try:
        call = Call.objects.select_related("agent").filter(pk=call_id).first()
        if call is None or call.status != CallStatus.QUEUED:
            return  # canceled (or deleted) while waiting
        outbound = OutboundCall.objects.select_related("phone_number").get(pk=call_id)
        agent = call.agent
        number = outbound.phone_number
        account = TelephonyAccount.objects.filter(organization_id=call.organization_id).first()
        if agent is None or agent.status != AgentStatus.ACTIVE:
            problem = "the agent is gone or no longer active"
        elif number is None or number.status != PhoneNumberStatus.CLAIMED:
            problem = "the number it is placed from is no longer claimed"
        elif account is None:
            problem = "the organization has no telephony account"
        else:
            problem = ""
            refusal = budget_refusal(organization=call.organization_id, agent_id=agent.pk, variables=call.variables)
            if refusal is not None:  # a `block` budget spent while the call waited: never placed
                _budget_refused(call, outbound, refusal.reason)
                return
        if problem:  # changed while the call waited: never placed
            logger.warning("outbound call %s not placed: %s", call_id, problem)
            _log(call, "error", f"Outbound call not placed: {problem}")
            call_end_unanswered(
                call_id=call_id,
                status=CallStatus.FAILED,
                ended_reason=EndedReason.ERROR,
                message=f"The call was not placed: {problem}.",
            )
            return
        assert agent is not None and number is not None and account is not None
        try:
            provider = provider_for(account)
            token = stream_token_issue(
                organization_id=call.organization_id,
                agent_id=agent.pk,
                phone_number_id=number.pk,
                call_sid="",
                from_number=call.from_number,
                to_number=call.to_number,
                call_id=call.pk,
                ttl_seconds=settings.OUTBOUND_RING_TIMEOUT_SECONDS + STREAM_TOKEN_TTL_SECONDS,
            )
            stream_url, callback, extra = "", "", None  # a SIP call: the endpoint places and reports it
            if provider.needs_public_url:
                urls = public_urls(account.provider)
                stream_url, callback = urls.stream, status_callback_url(urls.status, call.pk)
                extra = amd_params(agent, amd_callback_url())  # verdicts go to the AMD webhook
            sid = provider.place_call(
                to=call.to_number,
                from_number=call.from_number,
                stream_url=stream_url,
                parameters={"token": token},
                status_callback_url=callback,
                ring_timeout_seconds=settings.OUTBOUND_RING_TIMEOUT_SECONDS,
                extra=extra,
            )
        except (ProviderError, TokenError) as exc:
            logger.warning("outbound call %s could not be placed: %s", call_id, exc.message)
            _log(call, "error", f"Outbound call could not be placed: {exc.message}")
            call_end_unanswered(
                call_id=call_id,
                status=CallStatus.FAILED,
                ended_reason=EndedReason.PROVIDER_ERROR,
                message=f"The call could not be placed: {exc.message}",
            )
            return
        _placed(call, provider, sid)
    finally:
        call_slot_release(channel=CallChannel.PHONE, key=_slot_key(call_id))


def _budget_refused(call: Call, outbound: OutboundCall, reason: str) -> None:
    """A queued call that a spent `block` budget holds ends `canceled`, never placed, its message naming the
    budget. A campaign's call also pauses its campaign and gives its recipient back (pending, called again
    once the campaign is resumed): the pause of campaigns.services.batch_pause, which this module cannot
    import (the campaigns queue their calls through telephony.outbound.services, which imports it)."""
    logger.info("outbound call %s not placed: %s", call.pk, reason)
    _log(call, "warn", f"Outbound call not placed: {reason}")
    with transaction.atomic():
        if outbound.recipient_id is not None:
            batch_id = CallBatchRecipient.objects.filter(pk=outbound.recipient_id).values_list("batch_id", flat=True)
            batch = CallBatch.objects.select_for_update().filter(pk__in=list(batch_id)).first()
            if batch is not None and batch.status in (CallBatchStatus.SCHEDULED, CallBatchStatus.RUNNING):
                batch.status = CallBatchStatus.PAUSED
                batch.save(update_fields=["status"])
                _log(call, "warn", f"Campaign '{batch.name}' paused: {reason}", batchId=str(batch.pk))
            CallBatchRecipient.objects.filter(
                pk=outbound.recipient_id, state=RecipientState.CALLING, attempts=outbound.attempt
            ).update(state=RecipientState.PENDING, next_attempt_at=None)
        call_end_unanswered(
            call_id=call.pk,
            status=CallStatus.CANCELED,
            ended_reason=EndedReason.CANCELED,
            message=f"The call was not placed: {reason}.",
        )


def _placed(call: Call, provider: PhoneProvider, sid: str) -> None:
    rang = Call.objects.filter(pk=call.pk, status__in=(CallStatus.QUEUED, CallStatus.RINGING)).update(
        status=CallStatus.RINGING, provider_call_id=sid[:64]
    )
    if rang:
        return
    # It left queued while the carrier was asked: canceled meanwhile (the carrier is told) or already ended.
    Call.objects.filter(pk=call.pk, provider_call_id__isnull=True).update(provider_call_id=sid[:64])
    if Call.objects.filter(pk=call.pk, status=CallStatus.CANCELED).exists():
        try:
            provider.cancel(call_sid=sid)
        except ProviderError as exc:
            logger.warning("outbound call %s was canceled but the carrier was not told: %s", call.pk, exc.message)


# --- the sweep ------------------------------------------------------------------------------------


def outbound_close_stuck(*, older_than: timedelta | None = None) -> int:
    """Fail (provider-error) the outbound calls placed more than OUTBOUND_STUCK_AFTER_SECONDS ago that
    are still queued or ringing: the carrier never reported on them (a lost callback, a dispatcher that
    died between its claim and the carrier's answer). Returns how many were failed."""
    older_than = older_than or timedelta(seconds=settings.OUTBOUND_STUCK_AFTER_SECONDS)
    stuck = OutboundCall.objects.filter(
        placed_at__lt=timezone.now() - older_than, call__status__in=(CallStatus.QUEUED, CallStatus.RINGING)
    ).values_list("call_id", flat=True)

    def fail(call_id: Any) -> bool:
        ended = call_end_unanswered(
            call_id=call_id,
            status=CallStatus.FAILED,
            ended_reason=EndedReason.PROVIDER_ERROR,
            message=f"The carrier never reported on the call within {int(older_than.total_seconds())} s of placing it.",
        )
        call_slot_release(channel=CallChannel.PHONE, key=_slot_key(call_id))
        return ended is not None and ended.status == CallStatus.FAILED

    # One by one: a call that cannot be ended (a row stored before its text was refused at the edge) is
    # logged and left, and every other organization's stuck call is still ended.
    failed = rows_one_by_one("failedOutboundCalls", list(stuck.order_by("placed_at")[:1000]), fail)
    if failed:
        logger.info("failed %d outbound call(s) the carrier never reported on", failed)
    return failed


# --- who runs the dispatcher ----------------------------------------------------------------------


def outbound_wake() -> None:
    """Queued calls may be placeable (one was queued, a call ended): wake whoever places them. Never raises."""
    try:
        where = background.mode("outbound")
        if where == "inprocess":
            # Only a serving process runs the dispatcher (voiceagent/asgi.py starts it): a management
            # command queues calls and leaves them to it (a wake where no dispatcher runs does nothing).
            _dispatcher.wake()
        elif where == "celery":
            if not background.celery_broker():
                return  # no broker: beat's run (or a worker) places them
            background.send_task("telephony.dispatch_outbound")
    except Exception:
        logger.warning("could not wake the outbound dispatcher; its next round places the calls", exc_info=True)


def call_ended_received(*, call_id: Any, **kwargs: Any) -> None:
    """calls.signals.call_ended: an outbound slot may have been freed."""
    organization_id = Call.objects.filter(pk=call_id).values_list("organization_id", flat=True).first()
    if organization_id is not None and _waiting().filter(call__organization_id=organization_id).exists():
        outbound_wake()


def start_worker() -> None:
    """Start this process's dispatcher loop once (BACKGROUND_WORK=inprocess; never raises): it places
    what is queued now (a restart resumes), then waits for a wake or OUTBOUND_POLL_SECONDS (0: none)."""
    _dispatcher.start()


def _dispatch_all() -> None:
    while outbound_dispatch():
        pass


_dispatcher = background.Loop(
    "outbound-dispatch",
    _dispatch_all,
    every=lambda: float(settings.OUTBOUND_POLL_SECONDS),
    feature="outbound",
    failure="outbound dispatch round failed",
)
