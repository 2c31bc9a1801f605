"""Outbound calls: the service places a call from one of the organization's numbers to a person, and
the answered call runs through the same media stream, engine, tools, billing and events as an inbound
one (README, "Outbound calls"; docs/outbound.md). The requests and the rules are here; the placing itself
is telephony/outbound/dispatcher.py.

- `outbound_call_request` checks an API request (POST /public/v1/calls, registered in calls/placing.py)
  and queues the call; `outbound_call_create` queues one (the API and the call batches): a Call `queued`
  + its OutboundCall, in one transaction, and the dispatcher is woken once it commits.
- `call_hang_up` (POST /calls/{id}/hang-up, registered in calls/placing.py, and `outbound_call_cancel`
  for the call batches) cancels a queued or ringing call, or hangs up a live one (phone or browser).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import phonenumbers
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import Organization
from agents.models import Agent, AgentStatus
from agents.selectors import agent_get
from calls.budgets.services import budget_exceeded_check
from calls.models import Call, CallChannel, CallDirection, CallStatus, EndedReason
from calls.services import call_end_unanswered
from calls.variables import metadata_clean, variables_clean
from kit.errors import ApiError
from kit.providers import ProviderError
from kit.validation import e164_problem, parse_uuid
from realtime.sockets import call_control_group
from telephony.groups import call_group
from telephony.models import CallBatchRecipient, OutboundCall, PhoneNumber, PhoneNumberStatus, TelephonyAccount
from telephony.outbound.dispatcher import outbound_wake
from telephony.providers import provider_for
from telephony.selectors import outbound_countries_in_effect

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
    account = TelephonyAccount.objects.filter(organization=organization).first()
    # A SIP account's calls reach this service's SIP endpoint: no carrier calls back over HTTP.
    needed = (
        ("REALTIME_TOKEN_SECRET",)
        if account is not None and not provider_for(account).needs_public_url
        else (
            "PUBLIC_BASE_URL",
            "REALTIME_TOKEN_SECRET",
        )
    )
    missing = [name for name in needed if not getattr(settings, name)]
    if missing:
        raise ApiError(
            f"This service cannot place phone calls: {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
            "not set (docs/configuration.md).",
            status_code=503,
            code="TELEPHONY_NOT_CONFIGURED",
        )
    if account is None:
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
    """POST /public/v1/calls: check the request and queue the call. The body first, whatever the plan or
    this service's configuration (400s: `agentId` and `phoneNumberId` ids, `to` an E.164 number outbound
    calls may go to, variables and metadata), then the origin (outbound_origin: 403 without outbound calls
    on the plan, 503 when this service cannot place calls, then the account, the agent and the number),
    then `to` against the organization's own numbers and destination countries, then the budgets (402
    BUDGET_EXCEEDED: a spent `block` budget holds the call)."""
    _request_body_check(agent_id=agent_id, phone_number_id=phone_number_id, to=to)
    variables, metadata = variables_clean(variables), metadata_clean(metadata)
    agent, number = outbound_origin(organization=organization, agent_id=agent_id, phone_number_id=phone_number_id)
    problem = outbound_number_problem(to, destinations=outbound_destinations(organization=organization))
    if problem:
        raise ApiError.field("to", problem)
    # 402 BUDGET_EXCEEDED when a `block` budget of the organization, the agent or a variable's value is spent.
    budget_exceeded_check(organization=organization, agent_id=agent.pk, variables=variables)
    return outbound_call_create(agent=agent, phone_number=number, to=to, variables=variables, metadata=metadata)


def _request_body_check(*, agent_id: Any, phone_number_id: Any, to: Any) -> None:
    """The ids and the number of a POST /calls body, as the body alone shows them (400s): what needs the
    organization's rows is checked after."""
    if not isinstance(agent_id, str) or not agent_id:
        raise ApiError.field("agentId", "Required: the id of the agent that talks on the call.")
    parse_uuid(agent_id, "agent")
    if not isinstance(phone_number_id, str) or not phone_number_id:
        raise ApiError.field("phoneNumberId", "Required: the id of the organization's number the call is placed from.")
    parse_uuid(phone_number_id, "phoneNumber")
    if to is None or to == "":
        raise ApiError.field("to", "Required: the number to call, in E.164 format, for example +14155550123.")
    problem = outbound_number_problem(to)
    if problem:
        raise ApiError.field("to", problem)


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
            carrier=phone_number.provider,
            status=CallStatus.QUEUED,
            started_at=now,
            queued_at=now,
            variables=variables_clean(variables),
            metadata=metadata_clean(metadata),
        )
        OutboundCall.objects.create(call=call, phone_number=phone_number, recipient=recipient, attempt=attempt)
        transaction.on_commit(outbound_wake)
    return call


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
