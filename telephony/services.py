"""Phone numbers: claiming (dashboard/ops) and assignment to agents (public API).

A number belongs to at most one agent (a foreign key on the number) and an agent holds at most
MAX_NUMBERS_PER_AGENT numbers: every assignment locks the agent row and counts inside the same
transaction, so concurrent assignments cannot exceed the limit.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import NamedTuple
from urllib.parse import urlsplit, urlunsplit

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import Organization
from agents.models import Agent, AgentStatus
from calls.logging import LogSession, agent_log, new_session_id
from calls.models import Call, CallStatus
from calls.services import call_finish
from kit.errors import ApiError
from kit.providers import ProviderError
from kit.validation import e164_problem, region_of
from telephony.models import (
    MAX_NUMBERS_PER_AGENT,
    PhoneNumber,
    PhoneNumberProvider,
    PhoneNumberStatus,
    SetupStatus,
    TelephonyAccount,
)
from telephony.providers import PROVIDERS, provider_for

logger = logging.getLogger(__name__)


class Assignment(NamedTuple):
    phone_number_id: uuid.UUID
    handoff_phone_number: str | None


def _not_found(phone_number_id: object) -> ApiError:
    return ApiError.not_found(f"Phone number {phone_number_id} not found", code="PHONE_NUMBER_NOT_FOUND")


def _limit_exceeded() -> ApiError:
    return ApiError.conflict(
        f"An agent can hold at most {MAX_NUMBERS_PER_AGENT} phone numbers.", code="PHONE_NUMBER_LIMIT_EXCEEDED"
    )


def _touch(agent_ids: set) -> None:
    """Assignments are part of the agent: its updatedAt moves so that stale PATCHes are refused."""
    now = timezone.now()
    for agent in Agent.objects.filter(pk__in=agent_ids).only("pk", "updated_at"):
        stamp = now if now > agent.updated_at else agent.updated_at + timedelta(microseconds=1)
        Agent.objects.filter(pk=agent.pk).update(updated_at=stamp)


def _lock_numbers(*, organization: Organization, ids: list[uuid.UUID]) -> dict[uuid.UUID, PhoneNumber]:
    numbers = {n.pk: n for n in PhoneNumber.objects.select_for_update().filter(organization=organization, pk__in=ids)}
    for pk in ids:
        if pk not in numbers:
            raise _not_found(pk)
    for pk in ids:
        if numbers[pk].status != PhoneNumberStatus.CLAIMED:
            raise ApiError.conflict(
                f"Phone number {numbers[pk].phone_number} is {numbers[pk].status}; only claimed numbers can be assigned.",
                code="PHONE_NUMBER_NOT_CLAIMED",
            )
    return numbers


def _lock_agent(agent: Agent) -> None:
    Agent.objects.select_for_update().filter(pk=agent.pk).values_list("pk", flat=True).get()


def phone_number_assign(
    *, organization: Organization, agent: Agent, phone_number_id: uuid.UUID, handoff_phone_number: str | None = None
) -> PhoneNumber:
    """Assign a claimed number to the agent; a number on another agent moves (spec: number assignment)."""
    with transaction.atomic():
        _lock_agent(agent)
        number = _lock_numbers(organization=organization, ids=[phone_number_id])[phone_number_id]
        if number.assigned_agent_id != agent.pk:
            held = PhoneNumber.objects.filter(assigned_agent=agent).count()
            if held >= MAX_NUMBERS_PER_AGENT:
                raise _limit_exceeded()
        touched = {agent.pk, number.assigned_agent_id} - {None}
        if number.assigned_agent_id != agent.pk:
            number.assigned_at = timezone.now()
        number.assigned_agent = agent
        number.handoff_phone_number = handoff_phone_number
        number.save(update_fields=["assigned_agent", "handoff_phone_number", "assigned_at"])
        _touch(touched)
    return number


def phone_number_unassign(*, organization: Organization, agent: Agent, phone_number_id: uuid.UUID) -> PhoneNumber:
    """The number stays claimed by the organization; 404 when it is not on this agent."""
    with transaction.atomic():
        number = PhoneNumber.objects.select_for_update().filter(organization=organization, pk=phone_number_id).first()
        if number is None:
            raise _not_found(phone_number_id)
        if number.assigned_agent_id != agent.pk:
            raise ApiError.not_found(f"Phone number {number.phone_number} is not assigned to this agent")
        number.assigned_agent = None
        number.handoff_phone_number = None
        number.assigned_at = None
        number.save(update_fields=["assigned_agent", "handoff_phone_number", "assigned_at"])
        _touch({agent.pk})
    return number


def phone_numbers_replace(*, organization: Organization, agent: Agent, assignments: list[Assignment]) -> None:
    """Bulk replacement (phoneNumberAssignments / phoneNumberIds on PUT and PATCH): the agent ends up
    with exactly these numbers, or nothing changes. Must run inside the caller's transaction."""
    ids = [a.phone_number_id for a in assignments]
    if len(set(ids)) != len(ids):
        raise ApiError.invalid(
            "The same phone number appears twice in the assignments.",
            {"phoneNumberAssignments": ["Duplicate phoneNumberId."]},
        )
    if len(ids) > MAX_NUMBERS_PER_AGENT:
        raise _limit_exceeded()
    _lock_agent(agent)
    numbers = _lock_numbers(organization=organization, ids=ids)
    now = timezone.now()
    touched = {n.assigned_agent_id for n in numbers.values() if n.assigned_agent_id not in (None, agent.pk)}
    PhoneNumber.objects.filter(assigned_agent=agent).exclude(pk__in=ids).update(
        assigned_agent=None, handoff_phone_number=None, assigned_at=None
    )
    for assignment in assignments:
        number = numbers[assignment.phone_number_id]
        if number.assigned_agent_id != agent.pk:
            number.assigned_at = now
        number.assigned_agent = agent
        number.handoff_phone_number = assignment.handoff_phone_number
        number.save(update_fields=["assigned_agent", "handoff_phone_number", "assigned_at"])
    _touch(touched)


def phone_number_claim(
    *,
    organization: Organization,
    number: str,
    country: str | None = None,
    status: str = PhoneNumberStatus.CLAIMED,
    friendly_name: str = "",
    setup_status: str = SetupStatus.READY,
) -> PhoneNumber:
    """Dashboard/ops: record a number the organization owns (purchase and porting happen at the provider).
    `setup_status` says whether its voice webhook already points at this service (`ready`, e.g. set by
    hand in Twilio's console) or not yet (`pending`: the dashboard action "Point at this service")."""
    problem = e164_problem(number)
    if problem:
        raise ApiError.field("number", problem)
    if status not in PhoneNumberStatus.values:
        raise ApiError.field("status", f"Must be one of {', '.join(PhoneNumberStatus.values)}.")
    if setup_status not in (SetupStatus.READY, SetupStatus.PENDING):
        raise ApiError.field("setupStatus", "Must be ready or pending.")
    region = region_of(number)
    country = (country or region).upper()
    if len(country) != 2 or not country.isalpha():
        raise ApiError.field("country", "Must be a two-letter country code.")
    try:
        with transaction.atomic():
            return PhoneNumber.objects.create(
                organization=organization,
                phone_number=number,
                country_code=country,
                status=status,
                friendly_name=friendly_name or number,
                setup_status=setup_status,
            )
    except IntegrityError:
        raise ApiError.conflict(f"{number} is already claimed.") from None


# --- telephony accounts and number setup --------------------------------------------------------

_ACCOUNT_SID = re.compile(r"AC[0-9a-fA-F]{32}")
_API_KEY_SID = re.compile(r"SK[0-9a-fA-F]{32}")

VOICE_PATH = "/telephony/twilio/voice"
STATUS_PATH = "/telephony/twilio/status"
STREAM_PATH = "/telephony/twilio/stream"


def _secret_problem(value: str) -> str | None:
    if not value or not value.strip():
        return "Must not be empty."
    if value != value.strip() or any(c.isspace() for c in value) or len(value) > 200:
        return "Must be the secret exactly as the provider shows it (no spaces, at most 200 characters)."
    return None


def telephony_account_clean(
    *,
    organization: Organization,
    provider: str = PhoneNumberProvider.TWILIO,
    account_sid: str,
    auth_token: str | None,
    api_key_sid: str = "",
    api_key_secret: str | None = None,
) -> None:
    """Check an account as telephony_account_set would save it (ApiError naming the field otherwise)."""
    if provider not in PROVIDERS or provider not in PhoneNumberProvider.values:
        raise ApiError.field("provider", f"Must be one of {', '.join(PhoneNumberProvider.values)}.")
    if not _ACCOUNT_SID.fullmatch(account_sid or ""):
        raise ApiError.field("accountSid", "Must be a Twilio Account SID: AC followed by 32 hexadecimal digits.")
    if api_key_sid and not _API_KEY_SID.fullmatch(api_key_sid):
        raise ApiError.field("apiKeySid", "Must be a Twilio API key SID: SK followed by 32 hexadecimal digits.")
    for field, value in (("authToken", auth_token), ("apiKeySecret", api_key_secret)):
        problem = _secret_problem(value) if value else None
        if problem:
            raise ApiError.field(field, problem)
    stored = TelephonyAccount.objects.filter(organization=organization).first()
    if not auth_token and (stored is None or not stored.auth_token):
        raise ApiError.field("authToken", "The account's auth token is required.")
    if not auth_token and stored is not None and stored.account_sid != account_sid:
        raise ApiError.field("authToken", "Another Account SID needs its own auth token.")
    if api_key_secret and not api_key_sid:
        raise ApiError.field("apiKeySid", "An API key secret needs its API key SID.")
    if api_key_sid and not api_key_secret and (stored is None or stored.api_key_sid != api_key_sid):
        raise ApiError.field("apiKeySecret", "An API key SID needs its secret.")
    if TelephonyAccount.objects.filter(account_sid=account_sid).exclude(organization=organization).exists():
        raise ApiError.conflict(f"Account {account_sid} belongs to another organization.")


def telephony_account_set(
    *,
    organization: Organization,
    provider: str = PhoneNumberProvider.TWILIO,
    account_sid: str,
    auth_token: str | None,
    api_key_sid: str = "",
    api_key_secret: str | None = None,
) -> TelephonyAccount:
    """Create or replace the organization's telephony account (one per organization). A secret given as
    None or "" keeps the stored one (the dashboard never shows secrets again, so an edit leaves them
    blank); a new account needs its auth token; an API key SID needs its secret (given or stored for
    that same SID); no API key SID removes the API key (REST calls then use the auth token)."""
    account_sid, api_key_sid = (account_sid or "").strip(), (api_key_sid or "").strip()
    fields = {
        "provider": provider,
        "account_sid": account_sid,
        "auth_token": auth_token or None,
        "api_key_sid": api_key_sid,
        "api_key_secret": api_key_secret or None,
    }
    with transaction.atomic():
        Organization.objects.select_for_update().filter(pk=organization.pk).values_list("pk", flat=True).get()
        telephony_account_clean(organization=organization, **fields)
        account = TelephonyAccount.objects.filter(organization=organization).first() or TelephonyAccount(
            organization=organization
        )
        account.provider, account.account_sid = provider, account_sid
        if auth_token:
            account.auth_token = auth_token
        if not api_key_sid:
            account.api_key_secret = None
        elif api_key_secret:
            account.api_key_secret = api_key_secret
        account.api_key_sid = api_key_sid
        try:
            with transaction.atomic():
                account.save()
        except IntegrityError:
            raise ApiError.conflict(f"Account {account_sid} belongs to another organization.") from None
    return account


@dataclass(frozen=True)
class PublicUrls:
    voice: str
    status: str
    stream: str


def public_urls() -> PublicUrls:
    """The service's telephony URLs as the carrier reaches them, built from PUBLIC_BASE_URL (never from
    a request's Host). ProviderError(permanent) when PUBLIC_BASE_URL is not set."""
    base = (settings.PUBLIC_BASE_URL or "").rstrip("/")
    if not base:
        raise ProviderError(
            "PUBLIC_BASE_URL is not set: phone calls need the public https address of this service", permanent=True
        )
    parts = urlsplit(base)
    socket_scheme = "wss" if parts.scheme == "https" else "ws"
    return PublicUrls(
        voice=base + VOICE_PATH,
        status=base + STATUS_PATH,
        stream=urlunsplit((socket_scheme, parts.netloc, parts.path + STREAM_PATH, "", "")),
    )


def phone_number_point(*, number: PhoneNumber) -> PhoneNumber:
    """Dashboard action "Point at this service": set the number's voice webhook and status callback at
    the provider. The number becomes `ready`, or `error` with the reason (nothing is raised)."""
    error = ""
    try:
        urls = public_urls()
        account = TelephonyAccount.objects.filter(organization_id=number.organization_id).first()
        if account is None:
            raise ProviderError(
                "The organization has no telephony account (dashboard: Telephony accounts)", permanent=True
            )
        if account.provider != number.provider:
            raise ProviderError(
                f"The number is a {number.provider} number; the account is {account.provider}", permanent=True
            )
        provider_for(account).configure_number(
            phone_number=number.phone_number, voice_url=urls.voice, status_callback_url=urls.status
        )
    except ProviderError as exc:
        error = exc.message
    number.setup_status = SetupStatus.ERROR if error else SetupStatus.READY
    number.setup_error = error[:1000]
    PhoneNumber.objects.filter(pk=number.pk).update(setup_status=number.setup_status, setup_error=number.setup_error)
    return number


# --- incoming calls ---------------------------------------------------------------------------

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
    short sorry and a hang-up when the number is unknown, not claimed, unassigned or its agent is not
    active (a `warn` line in the agent's log when there is an agent). ProviderError (permanent) when
    PUBLIC_BASE_URL is not set; TokenError when REALTIME_TOKEN_SECRET is not set."""
    from telephony.streams import stream_token_issue

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
        reason = ""
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
    urls = public_urls()
    # One of the organization's live-call slots (plan max_concurrent_calls, docs/limits.md); over the cap
    # ConcurrentCallLimitExceeded, which the voice webhook answers with a spoken sorry.
    from realtime.services import call_slot_reserve
    from telephony.streams import STREAM_TOKEN_TTL_SECONDS

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


def _open_call(*, organization_id: uuid.UUID, call_sid: str) -> Call | None:
    return Call.objects.filter(
        organization_id=organization_id, provider_call_id=call_sid, status=CallStatus.ACTIVE
    ).first()


async def call_status_receive(*, organization_id: uuid.UUID, call_sid: str, call_status: str) -> Call | None:
    """A status callback from the carrier. A final status tells the live media-stream session of the
    call (in whichever process holds it) to end, through the channel layer; a call record still open
    TELEPHONY_CALL_END_GRACE_SECONDS later has no live session (its process died) and is finished
    here. call_finish is idempotent, so a session ending at the same moment does not bill twice.
    Returns the call finished here, if any."""
    from telephony.streams import call_group

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
    return await sync_to_async(call_finish)(call=call, status=CALL_ENDED_STATUSES[call_status])
