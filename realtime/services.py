"""Realtime sessions: issue a session token for an active agent, and spend it when a socket opens."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, urlsplit
from uuid import UUID

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from accounts.models import CallReservation, Organization
from agents.models import Agent, AgentStatus
from agents.selectors import agent_get
from calls.budgets.services import budget_exceeded_check
from calls.models import Call, CallChannel, CallModality, CallStatus
from calls.variables import metadata_clean, variables_clean
from kit import metrics
from kit.errors import ApiError
from realtime import tokens
from realtime.engine.audio import IN_RATE, OUT_RATE
from realtime.models import SessionVariables, UsedSessionToken
from realtime.selectors import session_agent_get

logger = logging.getLogger(__name__)

PROTOCOL = {
    "inputAudio": {"encoding": "pcm16", "sampleRate": IN_RATE},
    "outputAudio": {"encoding": "pcm16", "sampleRate": OUT_RATE},
}


def socket_path(agent_id: object) -> str:
    """The WebSocket path of an agent's browser sessions (see realtime/routing.py)."""
    return f"/ws/agents/{agent_id}/realtime"


def webrtc_offer_path(agent_id: object) -> str:
    """The path of an agent's WebRTC offers (the session's offerUrl, realtime/webrtc/urls.py)."""
    return f"/realtime/webrtc/agents/{agent_id}/session"


def webrtc_offer_url(agent_id: object, token: str) -> str:
    """A WebRTC session's offerUrl: the same host as the socket (REALTIME_WS_URL) over http(s), with the token."""
    base = _websocket_base()
    http = ("https" if base.startswith("wss:") else "http") + base[base.index(":") :]
    return f"{http}{webrtc_offer_path(agent_id)}?token={quote(token, safe='')}"


def _websocket_base() -> str:
    base = settings.REALTIME_WS_URL.strip()
    if not base:
        raise ApiError(
            "Realtime sessions are not configured on this server: REALTIME_WS_URL is not set", status_code=500
        )
    parts = urlsplit(base)
    if parts.scheme not in ("ws", "wss") or not parts.netloc:
        raise ApiError(
            "Realtime sessions are misconfigured: REALTIME_WS_URL must be a ws:// or wss:// URL", status_code=500
        )
    if not settings.REALTIME_TOKEN_SECRET:
        raise ApiError("Realtime session tokens are not configured: REALTIME_TOKEN_SECRET is not set", status_code=500)
    return base.rstrip("/")


@dataclass(frozen=True)
class RealtimeSession:
    token: str
    expires_at: datetime
    websocket_url: str
    # With transport "webrtc": where the client POSTs its SDP offer (the same token; docs/webrtc.md).
    offer_url: str | None = None


CONCURRENT_CALL_LIMIT = "CONCURRENT_CALL_LIMIT_EXCEEDED"
# A refused caller may try again once a call ends; there is no telling when, so a short hint.
CONCURRENT_CALL_RETRY_AFTER_SECONDS = 5


class ConcurrentCallLimitExceeded(ApiError):
    """The organization holds its plan's max_concurrent_calls live calls (and pending sessions)."""

    def __init__(self, *, limit: int) -> None:
        super().__init__(
            f"Concurrent call limit reached: the plan allows {limit} live calls at once (browser and phone).",
            status_code=429,
            code=CONCURRENT_CALL_LIMIT,
            extra={"maxConcurrentCalls": limit, "retryAfter": CONCURRENT_CALL_RETRY_AFTER_SECONDS},
        )
        self.limit = limit


def live_call_count(*, organization_id: UUID | str, now: datetime) -> int:
    """Calls that hold a slot: active call records and outbound calls ringing, plus reservations whose
    socket has not opened yet (unexpired, and neither the session token spent nor the phone call's record
    created; an outbound call being placed holds one until it rings)."""
    active = Call.objects.filter(
        organization_id=organization_id, status__in=(CallStatus.ACTIVE, CallStatus.RINGING)
    ).count()
    spent_token = UsedSessionToken.objects.filter(token_id=OuterRef("key"))
    phone_call = Call.objects.filter(organization_id=organization_id, provider_call_id=OuterRef("key"))
    pending = CallReservation.objects.filter(organization_id=organization_id, expires_at__gt=now).exclude(
        channel=CallChannel.WEB, key__in=spent_token.values("token_id")
    )
    pending = pending.exclude(Exists(phone_call), channel=CallChannel.PHONE)
    return active + pending.count()


def call_slot_reserve(*, organization_id: UUID | str, channel: str, key: str, expires_at: datetime) -> None:
    """Take one of the organization's live-call slots for a session about to start (`key`: the session
    token's id, or the phone call's CallSid), or raise ConcurrentCallLimitExceeded. The count and the
    insert run under the organization's row lock, so processes racing for the last slot are serialized."""
    now = timezone.now()
    with transaction.atomic():
        organization = Organization.objects.select_for_update().select_related("plan").get(pk=organization_id)
        limit = organization.plan.max_concurrent_calls
        if limit is not None and live_call_count(organization_id=organization_id, now=now) >= limit:
            metrics.record_rate_limit_refusal("concurrent_calls")
            raise ConcurrentCallLimitExceeded(limit=limit)
        CallReservation.objects.filter(expires_at__lt=now - timedelta(minutes=5)).delete()
        CallReservation.objects.update_or_create(
            channel=channel, key=key[:64], defaults={"organization_id": organization_id, "expires_at": expires_at}
        )


def call_slots_reserve(
    *, organization_id: UUID | str, channel: str, keys: list[str], expires_at: datetime
) -> list[str]:
    """call_slot_reserve for several sessions at once (outbound calls about to be placed): as many of
    `keys`, first ones first, as the organization has free slots; returns the keys that got one (none
    at the cap: they wait, nothing is refused). One count under the organization's row lock; call it
    inside the transaction that claims the calls."""
    now = timezone.now()
    with transaction.atomic():
        organization = Organization.objects.select_for_update().select_related("plan").get(pk=organization_id)
        limit = organization.plan.max_concurrent_calls
        free = len(keys) if limit is None else max(0, limit - live_call_count(organization_id=organization_id, now=now))
        taken = [key[:64] for key in keys[:free]]
        CallReservation.objects.bulk_create(
            [
                CallReservation(organization_id=organization_id, channel=channel, key=key, expires_at=expires_at)
                for key in taken
            ],
            ignore_conflicts=True,
        )
    return taken


def call_slot_release(*, channel: str, key: str) -> None:
    """Give a slot back before its token expires (a phone call that ended before its stream opened)."""
    CallReservation.objects.filter(channel=channel, key=key[:64]).delete()


# Rows of spent tokens are kept this long past the token's expiry (clock skew between processes); after
# it a reuse is refused as expired anyway.
SPENT_TOKEN_MARGIN = timedelta(minutes=5)


def used_session_tokens_purge(*, now: datetime | None = None) -> int:
    """Delete the rows of spent session and stream tokens that expired more than the margin ago; the count."""
    deleted, _ = UsedSessionToken.objects.filter(expires_at__lt=(now or timezone.now()) - SPENT_TOKEN_MARGIN).delete()
    return deleted


# The event kinds a session may ask for beyond the protocol's own (docs/guides/typed-sessions.md).
SESSION_EVENTS = ("tool",)  # tool.call / tool.result as they happen


def session_modality_clean(value: Any) -> str:
    """A realtime session's `modality`: "audio" (the default) or "text"; ApiError (400) otherwise."""
    if value is None:
        return CallModality.AUDIO
    if not isinstance(value, str) or value not in CallModality.values:
        raise ApiError.field("modality", f"must be one of {', '.join(CallModality.values)}")
    return value


TRANSPORTS = ("websocket", "webrtc")


def session_transport_clean(value: Any, *, modality: str) -> str:
    """A realtime session's `transport`: "websocket" (the default) or "webrtc" (the answer also has the
    offerUrl; the socket stays open to the token as a fallback); ApiError (400) otherwise. WebRTC carries
    audio: a typed session (modality text) uses the socket."""
    if value is None:
        return "websocket"
    if not isinstance(value, str) or value not in TRANSPORTS:
        raise ApiError.field("transport", f"must be one of {', '.join(TRANSPORTS)}")
    if value == "webrtc" and modality == CallModality.TEXT:
        raise ApiError.field("transport", "webrtc carries audio; a typed session (modality text) uses websocket")
    return value


def session_events_clean(value: Any) -> list[str]:
    """A realtime session's `events`: a list of distinct kinds among SESSION_EVENTS; ApiError (400) otherwise."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(kind, str) for kind in value):
        raise ApiError.field("events", "must be a list of strings")
    unknown = [kind for kind in value if kind not in SESSION_EVENTS]
    if unknown:
        raise ApiError.field("events", f"unknown event kind {unknown[0]!r} (known: {', '.join(SESSION_EVENTS)})")
    return list(dict.fromkeys(value))


def realtime_session_create(
    *,
    organization: Organization,
    agent_id: str,
    variables: Any = None,
    metadata: Any = None,
    modality: Any = None,
    events: Any = None,
    transport: Any = None,
) -> RealtimeSession:
    """A session token for the agent. `variables` and `metadata` (docs/guides/variables.md: checked by
    calls.variables, a 400 naming what is wrong), `modality` ("audio" | "text") and `events` (["tool"]:
    docs/guides/typed-sessions.md) are kept server-side under the token's id, never in the token or its URL;
    the socket that spends the token gives them to its session and call. `transport` "webrtc" adds the
    offerUrl (docs/webrtc.md): the token is spent by whichever of the socket and the offer comes first."""
    variables = variables_clean(variables)
    metadata = metadata_clean(metadata)
    modality = session_modality_clean(modality)
    events = session_events_clean(events)
    transport = session_transport_clean(transport, modality=modality)
    agent = agent_get(organization=organization, agent_id=agent_id)
    base = _websocket_base()
    if agent.status != AgentStatus.ACTIVE:
        raise ApiError.conflict(f"Agent is {agent.status}; only an active agent can start realtime sessions")
    # 402 BUDGET_EXCEEDED when a `block` budget of the organization, the agent or a variable's value is spent.
    budget_exceeded_check(organization=organization, agent_id=agent.pk, variables=variables)
    token, claims = tokens.issue_token(agent_id=agent.pk, organization_id=organization.pk)
    # The live-call slot and what the session keeps are stored together: a store that fails never
    # leaves a slot held until the token expires.
    with transaction.atomic():
        try:
            call_slot_reserve(
                organization_id=organization.pk,
                channel=CallChannel.WEB,
                key=claims.token_id,
                expires_at=datetime.fromtimestamp(claims.expires_at, tz=UTC),
            )
        except ConcurrentCallLimitExceeded as exc:
            logger.info(
                "realtime session refused: organization %s is at its %s concurrent calls", organization.pk, exc.limit
            )
            raise
        if variables or metadata is not None or modality != CallModality.AUDIO or events:
            expires_at = datetime.fromtimestamp(claims.expires_at, tz=UTC)
            SessionVariables.objects.filter(expires_at__lt=timezone.now() - SPENT_TOKEN_MARGIN).delete()
            SessionVariables.objects.create(
                token_id=claims.token_id,
                variables=variables,
                metadata=metadata,
                modality=modality,
                events=events,
                expires_at=expires_at,
            )
    offer_url = webrtc_offer_url(agent.pk, token) if transport == "webrtc" else None
    return RealtimeSession(
        token=token,
        expires_at=datetime.fromtimestamp(claims.expires_at, tz=UTC),
        websocket_url=f"{base}{socket_path(agent.pk)}?token={quote(token, safe='')}",
        offer_url=offer_url,
    )


@dataclass(frozen=True)
class OpenedSession:
    """A spent session token: the active agent it names, and the variables, metadata, modality and
    event kinds given with it."""

    agent: Agent
    variables: dict[str, str]
    metadata: Any
    modality: str = CallModality.AUDIO
    events: tuple[str, ...] = ()


def realtime_session_open(*, token: str | None, agent_id: str, now: float | None = None) -> OpenedSession:
    """session_token_redeem, with the token's variables, metadata, modality and events (taken: the row is
    deleted)."""
    agent, claims = _redeem(token=token, agent_id=agent_id, now=now)
    # The token is spent once (its UsedSessionToken row), so only this socket reaches its variables.
    kept = SessionVariables.objects.filter(token_id=claims.token_id).first()
    if kept is None:
        return OpenedSession(agent=agent, variables={}, metadata=None)
    kept.delete()
    return OpenedSession(
        agent=agent,
        variables=dict(kept.variables or {}),
        metadata=kept.metadata,
        modality=kept.modality or CallModality.AUDIO,
        events=tuple(kept.events or ()),
    )


def session_token_redeem(*, token: str | None, agent_id: str, now: float | None = None) -> Agent:
    """Open a socket with a session token: verify it, spend it (once, across every process sharing the
    database) and return the active agent it names. TokenError (with the close code) otherwise."""
    return _redeem(token=token, agent_id=agent_id, now=now)[0]


def _redeem(*, token: str | None, agent_id: str, now: float | None) -> tuple[Agent, tokens.SessionClaims]:
    claims = tokens.verify_token(token, agent_id=agent_id, now=now)
    used_at = timezone.now()
    try:
        with transaction.atomic():
            UsedSessionToken.objects.create(
                token_id=claims.token_id,
                organization_id=claims.organization_id,
                agent_id=claims.agent_id,
                used_at=used_at,
                expires_at=datetime.fromtimestamp(claims.expires_at, tz=UTC),
            )
    except IntegrityError:
        raise tokens.TokenError("Session token already used", close_code=tokens.CLOSE_CONFLICT) from None
    used_session_tokens_purge(now=used_at)
    agent = session_agent_get(organization_id=claims.organization_id, agent_id=claims.agent_id)
    if agent is None:
        raise tokens.TokenError("Agent not found", close_code=tokens.CLOSE_NOT_FOUND)
    if agent.status != AgentStatus.ACTIVE:
        raise tokens.TokenError(f"Agent is {agent.status}, not active", close_code=tokens.CLOSE_CONFLICT)
    return agent, claims
