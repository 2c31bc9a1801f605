"""Realtime session tokens: signed with REALTIME_TOKEN_SECRET (django.core.signing, HMAC-SHA256),
naming the agent and organization, valid TOKEN_TTL_SECONDS for opening the socket.

The token travels to the browser (in the websocketUrl), so the ids it names are sealed: AES-256-GCM under a
key derived from REALTIME_TOKEN_SECRET, bound to the token's id. The browser sees a token id and an expiry,
not which organization the session belongs to.

Single use is not decided here (a signature cannot be spent): see services.session_token_redeem.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import secrets
import time
from dataclasses import dataclass
from uuid import UUID

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings
from django.core import signing

TOKEN_TTL_SECONDS = 60
# v2: the ids are sealed (v1 tokens carried them in clear; they expired within a minute of the change).
_SALT = "realtime.session-token.v2"
_NONCE_BYTES = 12


class TokenError(Exception):
    """A token that cannot open a socket; `close_code` is the WebSocket close code to answer with."""

    def __init__(self, message: str, *, close_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.close_code = close_code


# WebSocket close codes (documented in docs/reference/realtime-protocol.md, "Close codes").
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


def _cipher(secret: str) -> AESGCM:
    # A key of its own (not the signing key itself): SHA-256 of a purpose label and the secret.
    return AESGCM(hashlib.sha256(f"{_SALT}:encryption:".encode() + secret.encode()).digest())


def _seal(secret: str, value: UUID, token_id: str) -> str:
    nonce = secrets.token_bytes(_NONCE_BYTES)
    sealed = _cipher(secret).encrypt(nonce, value.bytes, token_id.encode())
    return base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")


def _open(secret: str, value: object, token_id: str) -> UUID:
    if not isinstance(value, str):
        raise ValueError("not a sealed id")
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        return UUID(bytes=_cipher(secret).decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], token_id.encode()))
    except (InvalidTag, binascii.Error) as exc:
        raise ValueError("not a sealed id") from exc


def issue_token(*, agent_id: UUID, organization_id: UUID, now: float | None = None) -> tuple[str, SessionClaims]:
    issued = time.time() if now is None else now
    claims = SessionClaims(
        token_id=secrets.token_hex(16),
        agent_id=agent_id,
        organization_id=organization_id,
        expires_at=issued + TOKEN_TTL_SECONDS,
    )
    secret = _secret()
    payload = {
        "j": claims.token_id,
        "a": _seal(secret, UUID(str(agent_id)), claims.token_id),
        "o": _seal(secret, UUID(str(organization_id)), claims.token_id),
        "e": round(claims.expires_at, 3),
    }
    return signing.dumps(payload, key=secret, salt=_SALT), claims


def verify_token(token: str | None, *, agent_id: str, now: float | None = None) -> SessionClaims:
    """The claims of a genuine, unexpired token for this agent; TokenError otherwise."""
    if not token:
        raise TokenError("Missing session token", close_code=CLOSE_INVALID_TOKEN)
    try:
        secret = _secret()
        payload = signing.loads(token, key=secret, salt=_SALT)
        token_id = str(payload["j"])
        claims = SessionClaims(
            token_id=token_id,
            agent_id=_open(secret, payload["a"], token_id),
            organization_id=_open(secret, payload["o"], token_id),
            expires_at=float(payload["e"]),
        )
    except (signing.BadSignature, KeyError, TypeError, ValueError) as exc:
        raise TokenError("Invalid session token", close_code=CLOSE_INVALID_TOKEN) from exc
    if (time.time() if now is None else now) >= claims.expires_at:
        raise TokenError("Session token expired", close_code=CLOSE_INVALID_TOKEN)
    if str(claims.agent_id) != agent_id.lower():
        raise TokenError("Session token is for another agent", close_code=CLOSE_WRONG_AGENT)
    return claims
