"""Outbound calls: the service places a call from one of the organization's numbers to a person, and
the answered call runs through the same media stream, engine, tools, billing and events as an inbound
one (docs/guides/outbound-calls.md; docs/guides/outbound-calls.md).

- `outbound_call_request` checks an API request (POST /public/v1/calls) and queues the call;
  `outbound_call_create` queues one (the API and the call batches): a Call `queued` + its OutboundCall,
  in one transaction, and the dispatcher is woken once it commits.
- `outbound_dispatch` places queued calls, oldest first, never more than the plan's
  `max_outbound_calls` ringing, live or being placed at once per organization (the others wait
  `queued`), nor above the live-call cap (`max_concurrent_calls`: a call being placed holds a slot, a
  ringing one counts as live). A call is claimed by a conditional UPDATE of `placed_at` before the
  carrier is asked, so it is placed at most once whatever restarts or how many dispatchers run.
  Who runs it (settings.OUTBOUND_WORKER): `inprocess`, a thread of every serving process (started by
  voiceagent/asgi.py, woken by each queued call's commit and by every ended call, polling every
  OUTBOUND_POLL_SECONDS; other processes, such as a management command or the tests' own, only queue); `celery`, the task `telephony.dispatch_outbound` sent on the same kicks and
  run by beat every 5 s; `off`, nobody here.
- The carrier is asked with `PhoneProvider.place_call`: the answered call opens a media stream with a
  single-use stream token naming the call record, which the stream makes `active`
  (calls.services.call_activate). Status callbacks move it to `ringing` and end a call never answered
  (telephony/services/calls.py).
- `call_hang_up` (POST /calls/{id}/hang-up, and `outbound_call_cancel` for the call batches) cancels a
  queued or ringing call, or hangs up a live one (phone or browser).
- `outbound_close_stuck` (an upkeep job) fails placed calls the carrier never reported on.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import phonenumbers
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import close_old_connections, connections, transaction
from django.utils import timezone

from accounts.models import Organization
from agents.models import Agent, AgentStatus
from agents.selectors import agent_get
from calls.logging import LogSession, agent_log, new_session_id
from calls.maintenance import rows_one_by_one
from calls.models import Call, CallChannel, CallDirection, CallStatus, EndedReason
from calls.services import call_end_unanswered
from calls.variables import metadata_clean, variables_clean
from kit.errors import ApiError
from kit.providers import ProviderError
from kit.validation import e164_problem, parse_uuid
from realtime.services import call_slot_release, call_slots_reserve
from realtime.sockets import call_control_group
from realtime.tokens import TokenError
from telephony.models import CallBatchRecipient, OutboundCall, PhoneNumber, PhoneNumberStatus, TelephonyAccount
from telephony.providers import PhoneProvider, provider_for
from telephony.selectors import outbound_countries_in_effect
from telephony.services.accounts import public_urls
from telephony.streams import STREAM_TOKEN_TTL_SECONDS, call_group, stream_token_issue
from telephony.voicemail import amd_callback_url, amd_params

logger = logging.getLogger(__name__)

OUTBOUND_NOT_ALLOWED = "OUTBOUND_NOT_ALLOWED"
# Number types no outbound call goes to (phonenumbers' classification of the number's range): the
# ranges toll fraud pumps calls to. UAN (company numbers such as the UK's 03) and VoIP ranges are allowed.
_REFUSED_TYPES = {
    phonenumbers.PhoneNumberType.PREMIUM_RATE: "a premium-rate number",
    phonenumbers.PhoneNumberType.SHARED_COST: "a shared-cost number",
    phonenumbers.PhoneNumberType.PERSONAL_NUMBER: "a personal number (a forwarding range such as the UK's +4470)",
    phonenumbers.PhoneNumberType.PAGER: "a pager number",
}
# The ITU's non-geographic country codes: in no country, and billed at satellite or network rates.
_NON_GEOGRAPHIC = {
    800: "an international freephone number (+800)",
    808: "an international shared-cost number (+808)",
    870: "an Inmarsat satellite number (+870)",
    878: "a Universal Personal Telecommunications number (+878)",
    881: "a satellite phone number (+881)",
    882: "an international network number (+882)",
    883: "an international network number (+883)",
    888: "a number of the UN's humanitarian network (+888)",
    979: "an international premium-rate number (+979)",
}


# --- queueing ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Destinations:
    """What an organization's outbound calls may not go to beyond the service's rules: its own numbers
    (read once for a whole batch) and the countries they may go to."""

    own_numbers: frozenset[str]
    countries: tuple[str, ...]


def outbound_destinations(*, organization: Organization) -> Destinations:
    own = PhoneNumber.objects.filter(organization=organization).exclude(status=PhoneNumberStatus.RELEASED)
    return Destinations(
        own_numbers=frozenset(own.values_list("phone_number", flat=True)),
        countries=tuple(outbound_countries_in_effect(organization=organization)),
    )


def outbound_number_problem(to: Any, *, destinations: Destinations | None = None) -> str | None:
    """Why an outbound call may not go to `to`, or None: not E.164, on OUTBOUND_CALL_BLOCKLIST (a
    number or a prefix), a premium-rate, shared-cost, personal or pager number, a non-geographic
    (satellite, UPT, international network) number; and, with an organization's `destinations`, one of
    its own numbers (the call would loop back to the service) or a number outside its countries."""
    problem = e164_problem(to)
    if problem:
        return problem
    for blocked in settings.OUTBOUND_CALL_BLOCKLIST:
        if to.startswith(blocked):
            return f"{to} is on this service's blocklist of outbound destinations."
    parsed = phonenumbers.parse(to, None)
    country, code = phonenumbers.region_code_for_number(parsed), parsed.country_code or 0
    kind = _REFUSED_TYPES.get(phonenumbers.number_type(parsed))
    if code in _NON_GEOGRAPHIC or country == "001":
        kind = _NON_GEOGRAPHIC.get(code, f"a non-geographic number (+{code})")
    if kind:
        return (
            f"{to} is {kind}; outbound calls to premium, shared-cost, personal, satellite and other "
            "non-geographic ranges are not allowed."
        )
    if destinations is None:
        return None
    if to in destinations.own_numbers:
        return f"{to} is one of the organization's own numbers; a call to it would loop back to the service."
    if country not in destinations.countries:
        return (
            f"{to} is in {country}, outside the organization's destination countries "
            f"({', '.join(destinations.countries) or 'none'}); add {country} to outboundCountries "
            "(PATCH /organization) to call it."
        )
    return None


def outbound_origin(*, organization: Organization, agent_id: Any, phone_number_id: Any) -> tuple[Agent, PhoneNumber]:
    """The agent and the number outbound calls of the organization are placed with (POST /calls, call
    batches), checked: 403 OUTBOUND_NOT_ALLOWED on a plan without outbound calls; 503 when this service
    cannot place calls; 400 without a telephony account, for a number that is not one of the organization's
    claimed numbers, an agent that is not active; 404 for an agent that is not the organization's."""
    plan = Organization.objects.select_related("plan").get(pk=organization.pk).plan
    if plan.max_outbound_calls == 0:
        raise ApiError.forbidden(
            f"The {plan.name} plan does not include outbound calls; upgrade the plan to place calls.",
            code=OUTBOUND_NOT_ALLOWED,
        )
    if not settings.PUBLIC_BASE_URL or not settings.REALTIME_TOKEN_SECRET:
        raise ApiError(
            "This service cannot place phone calls: PUBLIC_BASE_URL and REALTIME_TOKEN_SECRET must be set.",
            status_code=503,
            code="TELEPHONY_NOT_CONFIGURED",
        )
    if not TelephonyAccount.objects.filter(organization=organization).exists():
        raise ApiError(
            "The organization has no telephony account to place calls with; set one up first.",
            code="TELEPHONY_ACCOUNT_MISSING",
        )
    if not isinstance(agent_id, str) or not agent_id:
        raise ApiError.field("agentId", "Required: the id of the agent that talks on the call.")
    if not isinstance(phone_number_id, str) or not phone_number_id:
        raise ApiError.field("phoneNumberId", "Required: the id of the organization's number the call is placed from.")
    agent = agent_get(organization=organization, agent_id=agent_id)
    if agent.status != AgentStatus.ACTIVE:
        raise ApiError(
            f"The agent is {agent.status}, not active: only an active agent can place calls.",
            code="AGENT_NOT_ACTIVE",
            issues={"agentId": [f"The agent is {agent.status}, not active."]},
        )
    number = PhoneNumber.objects.filter(
        pk=parse_uuid(phone_number_id, "phoneNumber"), organization=organization, status=PhoneNumberStatus.CLAIMED
    ).first()
    if number is None:
        raise ApiError(
            "The phone number is not one of the organization's claimed numbers.",
            code="PHONE_NUMBER_NOT_CLAIMED",
            issues={"phoneNumberId": ["Not a claimed number of this organization."]},
        )
    return agent, number


def outbound_call_request(
    *,
    organization: Organization,
    agent_id: Any,
    phone_number_id: Any,
    to: Any,
    variables: Any = None,
    metadata: Any = None,
) -> Call:
    """POST /public/v1/calls: check the request (outbound_origin, then `to`, variables and metadata: 400s)
    and queue the call."""
    agent, number = outbound_origin(organization=organization, agent_id=agent_id, phone_number_id=phone_number_id)
    if to is None or to == "":
        raise ApiError.field("to", "Required: the number to call, in E.164 format, for example +14155550123.")
    problem = outbound_number_problem(to, destinations=outbound_destinations(organization=organization))
    if problem:
        raise ApiError.field("to", problem)
    return outbound_call_create(
        agent=agent,
        phone_number=number,
        to=to,
        variables=variables_clean(variables),
        metadata=metadata_clean(metadata),
    )


def outbound_call_create(
    *,
    agent: Agent,
    phone_number: PhoneNumber,
    to: str,
    variables: dict[str, Any] | None = None,
    metadata: Any = None,
    recipient: CallBatchRecipient | None = None,
    attempt: int = 1,
) -> Call:
    """Queue an outbound call from `phone_number` to `to` (E.164, already checked by the caller of this
    function) talked by `agent`: a Call (`queued`, `outbound`) and its OutboundCall, in one transaction;
    the dispatcher places it after the commit, within the organization's outbound concurrency."""
    now = timezone.now()
    with transaction.atomic():
        call = Call.objects.create(
            organization_id=agent.organization_id,
            agent=agent,
            agent_name=agent.name,
            channel=CallChannel.PHONE,
            direction=CallDirection.OUTBOUND,
            from_number=phone_number.phone_number,
            to_number=to,
            status=CallStatus.QUEUED,
            started_at=now,
            queued_at=now,
            variables=variables_clean(variables),
            metadata=metadata_clean(metadata),
        )
        OutboundCall.objects.create(call=call, phone_number=phone_number, recipient=recipient, attempt=attempt)
        transaction.on_commit(outbound_wake)
    return call


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
        with ThreadPoolExecutor(threads, thread_name_prefix="outbound-place") as pool:
            list(pool.map(_place_in_thread, claimed))
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
    finally:
        connections.close_all()  # this pool thread's connection


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
        if problem:  # changed while the call waited: never placed
            logger.warning("outbound call %s not placed: %s", call_id, problem)
            _log(call, "error", f"Outbound call not placed: {problem}")
            call_end_unanswered(call_id=call_id, status=CallStatus.FAILED, ended_reason=EndedReason.ERROR)
            return
        assert agent is not None and number is not None and account is not None
        try:
            provider = provider_for(account)
            urls = public_urls()
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
            callback = status_callback_url(urls.status, call.pk)
            sid = provider.place_call(
                to=call.to_number,
                from_number=call.from_number,
                stream_url=urls.stream,
                parameters={"token": token},
                status_callback_url=callback,
                ring_timeout_seconds=settings.OUTBOUND_RING_TIMEOUT_SECONDS,
                extra=amd_params(agent, amd_callback_url()),  # verdicts go to the AMD webhook
            )
        except (ProviderError, TokenError) as exc:
            logger.warning("outbound call %s could not be placed: %s", call_id, exc.message)
            _log(call, "error", f"Outbound call could not be placed: {exc.message}")
            call_end_unanswered(call_id=call_id, status=CallStatus.FAILED, ended_reason=EndedReason.PROVIDER_ERROR)
            return
        _placed(call, provider, sid)
    finally:
        call_slot_release(channel=CallChannel.PHONE, key=_slot_key(call_id))


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


# --- hanging up and canceling -------------------------------------------------------------------


def call_hang_up(*, call: Call) -> Call:
    """POST /calls/{id}/hang-up: a queued call is canceled at once; a ringing one is canceled and the
    carrier told; a live phone call is hung up at the carrier and its media stream told (through the
    channel layer, wherever it runs); a live browser session is told to end. 409 CALL_ENDED for an ended
    call. Returns the call as it is now (a live call ends a moment later, by its session)."""
    if call.status in (CallStatus.QUEUED, CallStatus.RINGING):
        return _cancel(call)
    if call.status != CallStatus.ACTIVE:
        raise ApiError.conflict(f"The call has already ended ({call.status}).", code="CALL_ENDED")
    phone = call.channel == CallChannel.PHONE and bool(call.provider_call_id)
    # The session first (so the call ends as the service's hang-up, not as Twilio's `stop` that follows),
    # then the carrier (the line is hung up even when no session holds the call any more).
    layer = get_channel_layer()
    if layer is not None:
        group = call_group(call.provider_call_id or "") if phone else call_control_group(call.pk)
        try:
            async_to_sync(layer.group_send)(group, {"type": "call.hangup"})
        except Exception:
            logger.warning("could not tell call %s's session to hang up", call.pk, exc_info=True)
    if phone:
        account = TelephonyAccount.objects.filter(organization_id=call.organization_id).first()
        if account is not None:
            try:
                async_to_sync(provider_for(account).hang_up)(call_sid=call.provider_call_id or "")
            except ProviderError as exc:
                logger.warning("call %s: the carrier did not take the hang-up: %s", call.pk, exc.message)
    call.refresh_from_db()
    return call


def _cancel(call: Call) -> Call:
    """End a queued or ringing call `canceled` first (so an answer racing the cancel cannot make it live),
    then tell the carrier when it was placed."""
    ended = call_end_unanswered(call_id=call.pk, status=CallStatus.CANCELED, ended_reason=EndedReason.CANCELED)
    if ended is None:
        raise ApiError.not_found("Call not found")
    if ended.status == CallStatus.ACTIVE:
        return call_hang_up(call=ended)  # answered in the meantime
    sid = ended.provider_call_id
    if ended.status == CallStatus.CANCELED and sid:
        account = TelephonyAccount.objects.filter(organization_id=ended.organization_id).first()
        if account is not None:
            try:
                provider_for(account).cancel(call_sid=sid)
            except ProviderError as exc:
                logger.warning("outbound call %s: the carrier did not take the cancel: %s", call.pk, exc.message)
    return ended


def outbound_call_cancel(*, call: Call) -> Call:
    """Cancel a queued or ringing outbound call (ringing: the carrier is told); a live call is hung up.
    Ends it exactly once (`canceled`, endedReason `canceled`, when it was not answered). A call that has
    already ended is returned as it is."""
    call.refresh_from_db()
    if call.status not in (CallStatus.QUEUED, CallStatus.RINGING, CallStatus.ACTIVE):
        return call
    return call_hang_up(call=call)


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
        ended = call_end_unanswered(call_id=call_id, status=CallStatus.FAILED, ended_reason=EndedReason.PROVIDER_ERROR)
        call_slot_release(channel=CallChannel.PHONE, key=_slot_key(call_id))
        return ended is not None and ended.status == CallStatus.FAILED

    # One by one: a call that cannot be ended (a row stored before its text was refused at the edge) is
    # logged and left, and every other organization's stuck call is still ended.
    failed = rows_one_by_one("failedOutboundCalls", list(stuck.order_by("placed_at")[:1000]), fail)
    if failed:
        logger.info("failed %d outbound call(s) the carrier never reported on", failed)
    return failed


# --- who runs the dispatcher ----------------------------------------------------------------------

_lock = threading.Lock()
_wake = threading.Event()
_thread: threading.Thread | None = None


def outbound_wake() -> None:
    """Queued calls may be placeable (one was queued, a call ended): wake whoever places them. Never raises."""
    try:
        if settings.OUTBOUND_WORKER == "inprocess":
            # Only a serving process runs the dispatcher (voiceagent/asgi.py starts it): a management
            # command or a test process queues calls and leaves them to it.
            _wake.set()
        elif settings.OUTBOUND_WORKER == "celery":
            from celery import current_app

            if current_app.conf.task_always_eager:
                return  # no broker: beat's run (or a worker) places them
            current_app.send_task("telephony.dispatch_outbound")
    except Exception:
        logger.warning("could not wake the outbound dispatcher; its next round places the calls", exc_info=True)


def call_ended_received(*, call_id: Any, **kwargs: Any) -> None:
    """calls.signals.call_ended: an outbound slot may have been freed."""
    organization_id = Call.objects.filter(pk=call_id).values_list("organization_id", flat=True).first()
    if organization_id is not None and _waiting().filter(call__organization_id=organization_id).exists():
        outbound_wake()


def start_worker() -> None:
    """Start this process's dispatcher thread once (OUTBOUND_WORKER=inprocess; never raises): it places
    what is queued now (a restart resumes), then waits for a wake or OUTBOUND_POLL_SECONDS."""
    global _thread
    try:
        if settings.OUTBOUND_WORKER != "inprocess":
            return
        with _lock:
            if _thread is None or not _thread.is_alive():
                _thread = threading.Thread(target=_loop, name="outbound-dispatch", daemon=True)
                _thread.start()
    except Exception:
        logger.warning("could not start the outbound dispatcher", exc_info=True)


def _loop() -> None:
    while True:
        try:
            close_old_connections()
            _wake.clear()
            while outbound_dispatch():
                pass
        except Exception:
            logger.warning("outbound dispatch round failed", exc_info=True)
        finally:
            connections.close_all()
        _wake.wait(max(0.05, float(settings.OUTBOUND_POLL_SECONDS)))
