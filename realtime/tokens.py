"""Realtime session tokens: signed with REALTIME_TOKEN_SECRET (django.core.signing, HMAC-SHA256),
naming the agent and organization, valid TOKEN_TTL_SECONDS for opening the socket.

Single use is not decided here (a signature cannot be spent): see services.session_token_redeem.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from uuid import UUID

from django.conf import settings
from django.core import signing

TOKEN_TTL_SECONDS = 60
_SALT = "realtime.session-token.v1"


class TokenError(Exception):
    """A token that cannot open a socket; `close_code` is the WebSocket close code to answer with."""

    def __init__(self, message: str, *, close_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.close_code = close_code


# WebSocket close codes (documented in the README).
CLOSE_INVALID_TOKEN = 4401  # missing, malformed, tampered or expired
CLOSE_WRONG_AGENT = 4403  # signed for another agent
CLOSE_NOT_FOUND = 4404  # the agent no longer exists
CLOSE_CONFLICT = 4409  # token already used, or agent not active
CLOSE_ENGINE_ERROR = 4500  # the conversation engine failed
CLOSE_NOT_CONFIGURED = 4503  # realtime sessions are not configured on this server


@dataclass(frozen=True)
class SessionClaims:
    token_id: str
    agent_id: UUID
    organization_id: UUID
    expires_at: float  # Unix time


def _secret() -> str:
    secret = settings.REALTIME_TOKEN_SECRET
    if not secret:
        raise TokenError("Realtime sessions are not configured", close_code=CLOSE_NOT_CONFIGURED)
    return secret


def issue_token(*, agent_id: UUID, organization_id: UUID, now: float | None = None) -> tuple[str, SessionClaims]:
    issued = time.time() if now is None else now
    claims = SessionClaims(
        token_id=secrets.token_hex(16),
        agent_id=agent_id,
        organization_id=organization_id,
        expires_at=issued + TOKEN_TTL_SECONDS,
    )
    payload = {"j": claims.token_id, "a": str(agent_id), "o": str(organization_id), "e": round(claims.expires_at, 3)}
    return signing.dumps(payload, key=_secret(), salt=_SALT), claims


def verify_token(token: str | None, *, agent_id: str, now: float | None = None) -> SessionClaims:
    """The claims of a genuine, unexpired token for this agent; TokenError otherwise."""
    if not token:
        raise TokenError("Missing session token", close_code=CLOSE_INVALID_TOKEN)
    try:
        payload = signing.loads(token, key=_secret(), salt=_SALT)
        claims = SessionClaims(
            token_id=str(payload["j"]),
            agent_id=UUID(payload["a"]),
            organization_id=UUID(payload["o"]),
            expires_at=float(payload["e"]),
        )
    except (signing.BadSignature, KeyError, TypeError, ValueError) as exc:
        raise TokenError("Invalid session token", close_code=CLOSE_INVALID_TOKEN) from exc
    if (time.time() if now is None else now) >= claims.expires_at:
        raise TokenError("Session token expired", close_code=CLOSE_INVALID_TOKEN)
    if str(claims.agent_id) != agent_id.lower():
        raise TokenError("Session token is for another agent", close_code=CLOSE_WRONG_AGENT)
    return claims
