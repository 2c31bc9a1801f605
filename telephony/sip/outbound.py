"""Outbound SIP calls, the database side: where a call to place goes (the organization's SIP account:
its domain, credentials; the call record its stream token names) and how one never answered ends. The
endpoint (telephony/sip/endpoint.py) runs these off its signalling thread."""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass
from uuid import UUID

from calls.logging import LogSession, agent_log, new_session_id
from calls.models import Call, CallStatus, EndedReason
from calls.services import call_end_unanswered
from realtime.tokens import TokenError
from telephony.models import PhoneNumberProvider, TelephonyAccount
from telephony.providers.sip import SipDial
from telephony.streams import StreamGrant, stream_token_redeem

logger = logging.getLogger(__name__)

SIP_PORT = 5060


@dataclass(frozen=True)
class DialTarget:
    grant: StreamGrant  # the call record, its agent and numbers
    domain: tuple[str, int]  # the account's SIP domain: the request URI's host and port
    address: tuple[str, int]  # where the INVITE is sent (the domain resolved)
    username: str
    password: str


@dataclass(frozen=True)
class DialProblem:
    call_id: UUID | None  # the call record, when its stream token could be read
    problem: str  # why the call cannot be placed: a clause for the call's endedMessage


def sip_domain(value: str) -> tuple[str, int]:
    """A SIP account's domain (`HOST` or `HOST:PORT`, telephony/services/accounts.py) as (host, port)."""
    host, _, port = value.rpartition(":")
    if host and port.isdigit():
        return host.strip("[]"), int(port)
    return value.strip("[]"), SIP_PORT


def sip_dial_target(dial: SipDial) -> DialTarget | DialProblem:
    """Where the call goes, or why it cannot be placed. Spends the call's stream token."""
    try:
        grant = stream_token_redeem(dial.token)
    except TokenError as exc:
        return DialProblem(None, f"its stream token was refused ({exc.message})")
    account = TelephonyAccount.objects.filter(
        organization_id=grant.organization_id, provider=PhoneNumberProvider.SIP
    ).first()
    if account is None:
        return DialProblem(grant.call_id, "the organization has no SIP account")
    host, port = sip_domain(account.account_sid)
    try:
        resolved = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_DGRAM)[0][4]
    except (OSError, UnicodeError):
        return DialProblem(grant.call_id, f"the SIP domain {host} does not resolve")
    return DialTarget(
        grant=grant,
        domain=(host, port),
        address=(str(resolved[0]), int(resolved[1])),
        username=account.sip_username,
        password=account.auth_token if account.sip_username else "",
    )


# A final SIP answer to the INVITE as the call's outcome: busy, not answered in time (or unavailable),
# anything else a failure of the far end.
BUSY_CODES = frozenset({486, 600})
NO_ANSWER_CODES = frozenset({408, 480, 487})


def sip_dial_unanswered(call_id: UUID, *, code: int, reason: str) -> Call | None:
    """End an outbound call the far end never answered, by its final SIP answer (`code` 0: no answer
    within the ring timeout; -1: it could not be placed, `reason` says why), with an `error` line in the
    agent's log for a failure. Exactly once (calls.services.call_end_unanswered)."""
    if code in BUSY_CODES:
        status, ended_reason, message = CallStatus.BUSY, EndedReason.BUSY, f"The far end answered {code} {reason}."
    elif code == 0 or code in NO_ANSWER_CODES:
        status, ended_reason = CallStatus.NO_ANSWER, EndedReason.NO_ANSWER
        message = "Nobody answered within the ring timeout." if code == 0 else f"The far end answered {code} {reason}."
    else:
        status, ended_reason = CallStatus.FAILED, EndedReason.PROVIDER_ERROR
        message = f"The call could not be placed: {reason}." if code < 0 else f"The far end answered {code} {reason}."
    ended = call_end_unanswered(call_id=call_id, status=status, ended_reason=ended_reason, message=message)
    if ended is not None and status == CallStatus.FAILED and ended.agent_id is not None:
        session = LogSession(
            organization_id=ended.organization_id, agent_id=ended.agent_id, session_id=new_session_id()
        )
        agent_log(session, "error", f"Outbound SIP call failed: {message}", callId=str(ended.pk), to=ended.to_number)
    logger.info("outbound SIP call %s ended %s: %s", call_id, status, message)
    return ended
