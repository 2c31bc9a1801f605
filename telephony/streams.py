"""Media-stream tokens: the voice webhook answers a call with a stream URL plus a token parameter
(Twilio strips query strings from stream URLs, so the token travels as `<Parameter name="token">` and
arrives in the stream's `start.customParameters`). The token is signed with REALTIME_TOKEN_SECRET
(the realtime session tokens' secret, under a salt of its own so that neither kind of token passes
for the other), valid STREAM_TOKEN_TTL_SECONDS to connect, and single-use across every process
sharing the database (spent ids are rows of realtime.models.UsedSessionToken). A redeemed token opens
a `PhoneCall` (phone_call_get): the active agent it names and the organization's phone provider.
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import UUID

from django.conf import settings
from django.core import signing
from django.db import IntegrityError, transaction
from django.utils import timezone

from agents.models import Agent, AgentStatus
from calls.models import Call, CallStatus
from kit.providers import ProviderError
from realtime.models import UsedSessionToken
from realtime.selectors import session_agent_get
from realtime.services import used_session_tokens_purge
from realtime.tokens import CLOSE_CONFLICT, CLOSE_INVALID_TOKEN, CLOSE_NOT_CONFIGURED, TokenError
from telephony.models import TelephonyAccount
from telephony.providers import PhoneProvider, provider_for

logger = logging.getLogger(__name__)

__all__ = [
    "STREAM_TOKEN_TTL_SECONDS",
    "PhoneCall",
    "StreamGrant",
    "TokenError",
    "outbound_call_waiting",
    "phone_call_get",
    "stream_token_issue",
    "stream_token_redeem",
]

STREAM_TOKEN_TTL_SECONDS = 60
_SALT = "telephony.stream-token.v1"
_PURPOSE = "phone-stream"


@dataclass(frozen=True)
class StreamGrant:
    """What a redeemed stream token allows: this call, on this number, talking to this agent."""

    organization_id: UUID
    agent_id: UUID
    phone_number_id: UUID
    call_sid: str
    from_number: str
    to_number: str
    # An outbound call: the call record (queued or ringing) the stream opens, instead of a new one.
    call_id: UUID | None = None


def _secret() -> str:
    secret = settings.REALTIME_TOKEN_SECRET
    if not secret:
        raise TokenError(
            "Phone streams are not configured (REALTIME_TOKEN_SECRET is empty)", close_code=CLOSE_NOT_CONFIGURED
        )
    return secret


def stream_token_issue(
    *,
    organization_id: UUID | str,
    agent_id: UUID | str,
    phone_number_id: UUID | str,
    call_sid: str,
    from_number: str,
    to_number: str,
    now: float | None = None,
    call_id: UUID | str | None = None,
    ttl_seconds: float = STREAM_TOKEN_TTL_SECONDS,
) -> str:
    """A signed, single-use token for opening the media stream of one call. `call_id`: the outbound
    call record the stream attaches to (its token lives `ttl_seconds`: the ring time and a margin)."""
    issued = time.time() if now is None else now
    payload = {
        "p": _PURPOSE,
        "j": secrets.token_hex(16),
        "o": str(organization_id),
        "a": str(agent_id),
        "n": str(phone_number_id),
        "c": call_sid,
        "f": from_number,
        "t": to_number,
        "e": round(issued + ttl_seconds, 3),
    }
    if call_id is not None:
        payload["i"] = str(call_id)
    return signing.dumps(payload, key=_secret(), salt=_SALT, compress=True)


def stream_token_redeem(token: str | None, *, now: float | None = None) -> StreamGrant:
    """Verify and spend a stream token (once, across processes). TokenError (with a reason and a
    WebSocket close code) when it is missing, malformed, tampered, expired or already used."""
    if not token:
        raise TokenError("Missing stream token", close_code=CLOSE_INVALID_TOKEN)
    try:
        payload = signing.loads(token, key=_secret(), salt=_SALT)
        if payload.get("p") != _PURPOSE:
            raise ValueError("wrong purpose")
        token_id = str(payload["j"])
        expires_at = float(payload["e"])
        grant = StreamGrant(
            organization_id=UUID(payload["o"]),
            agent_id=UUID(payload["a"]),
            phone_number_id=UUID(payload["n"]),
            call_sid=str(payload["c"]),
            from_number=str(payload["f"]),
            to_number=str(payload["t"]),
            call_id=UUID(payload["i"]) if payload.get("i") is not None else None,
        )
    except (signing.BadSignature, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise TokenError("Invalid stream token", close_code=CLOSE_INVALID_TOKEN) from exc
    if (time.time() if now is None else now) >= expires_at:
        raise TokenError("Stream token expired", close_code=CLOSE_INVALID_TOKEN)
    used_at = timezone.now()
    try:
        with transaction.atomic():
            UsedSessionToken.objects.create(
                token_id=token_id,
                organization_id=grant.organization_id,
                agent_id=grant.agent_id,
                used_at=used_at,
                expires_at=datetime.fromtimestamp(expires_at, tz=UTC),
            )
    except IntegrityError:
        raise TokenError("Stream token already used", close_code=CLOSE_CONFLICT) from None
    used_session_tokens_purge(now=used_at)
    return grant


@dataclass(frozen=True)
class PhoneCall:
    """What a redeemed stream token opens: the agent and the organization's provider account."""

    grant: StreamGrant
    agent: Agent
    provider: PhoneProvider | None


def phone_call_get(grant: StreamGrant) -> PhoneCall | None:
    """The active agent a stream grant names (None when it is gone or not active), with the phone
    provider of its organization (None without a telephony account)."""
    agent = session_agent_get(organization_id=grant.organization_id, agent_id=grant.agent_id)
    if agent is None or agent.status != AgentStatus.ACTIVE:
        return None
    account = TelephonyAccount.objects.filter(organization_id=grant.organization_id).first()
    provider = None
    if account is not None:
        try:
            provider = provider_for(account)
        except ProviderError:
            logger.warning("organization %s: unknown phone provider %r", grant.organization_id, account.provider)
    return PhoneCall(grant=grant, agent=agent, provider=provider)


def outbound_call_waiting(call_id: UUID) -> bool:
    """Whether the outbound call a stream token names is still waiting to be answered (queued or ringing):
    a call canceled or ended meanwhile opens no conversation."""
    return Call.objects.filter(pk=call_id, status__in=(CallStatus.QUEUED, CallStatus.RINGING)).exists()
