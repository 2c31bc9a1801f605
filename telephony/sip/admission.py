"""Who may call over SIP: an INVITE for a number claimed by an organization whose telephony account is
of provider `sip`, from one of that account's allowed networks or authenticated with the account's digest
credentials, rings the number's active agent, within the organization's concurrent-call cap and its
budgets (a spent `block` budget of the organization or the agent: 480 "Budget Exceeded"). An INVITE
from elsewhere without credentials is challenged (401), whatever the number; one whose credentials do not
match, or for a number no SIP account claims, is refused (403), so that a scanner learns nothing of which
numbers exist. Every refusal is a SIP status and a log line, never a call."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from uuid import UUID

from django.utils import timezone

from agents.models import Agent, AgentStatus
from calls.budgets.services import budget_refusal
from calls.logging import LogSession, agent_log, new_session_id
from realtime.selectors import session_agent_get
from realtime.services import ConcurrentCallLimitExceeded, call_slot_reserve
from telephony.models import PhoneNumber, PhoneNumberProvider, PhoneNumberStatus, TelephonyAccount
from telephony.sip.outbound import sip_domain

logger = logging.getLogger(__name__)

# How long an admitted call's live-call slot is held before its session has opened the call record.
SLOT_SECONDS = 60


@dataclass(frozen=True)
class Admitted:
    organization_id: UUID
    agent: Agent
    from_number: str
    to_number: str
    domain: tuple[str, int]  # the account's trunk or PBX (host, port): where a transfer is sent


@dataclass(frozen=True)
class Refused:
    code: int
    reason: str  # the SIP reason phrase


FORBIDDEN = Refused(403, "Forbidden")


@dataclass(frozen=True)
class Challenge:
    """Answer 401 with a digest challenge: the caller may authenticate."""


# (username, password) -> whether the INVITE's Authorization proves them (None: the INVITE has none).
Authorize = Callable[[str, str], bool]


def _allowed(account: TelephonyAccount, address: str) -> bool:
    try:
        source = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(source in ipaddress.ip_network(network) for network in account.allowed_networks)


def sip_call_admit(
    *, called: str, caller: str, address: str, call_id: str, authorize: Authorize | None = None
) -> Admitted | Refused | Challenge:
    """The agent that answers an INVITE from `address` for `called` (the request URI's user part, E.164),
    or why not. Takes a live-call slot (keyed by the SIP Call-ID) for an admitted call."""
    number = (
        PhoneNumber.objects.select_related("assigned_agent")
        .filter(phone_number=called, provider=PhoneNumberProvider.SIP)
        .first()
    )
    account = (
        TelephonyAccount.objects.filter(
            organization_id=number.organization_id, provider=PhoneNumberProvider.SIP
        ).first()
        if number is not None
        else None
    )
    if account is None or not _allowed(account, address):
        if authorize is None:
            return Challenge()
        if account is None or not account.sip_username or not authorize(account.sip_username, account.auth_token):
            logger.warning("SIP call to %s from %s refused: unknown number or credentials", called[:20], address)
            return FORBIDDEN
    assert number is not None and account is not None
    agent = number.assigned_agent
    if number.status != PhoneNumberStatus.CLAIMED or agent is None or agent.status != AgentStatus.ACTIVE:
        problem = "no active agent answers the number"
        logger.info("SIP call to %s refused: %s", called, problem)
        if agent is not None:
            session = LogSession(organization_id=agent.organization_id, agent_id=agent.pk, session_id=new_session_id())
            agent_log(session, "warn", f"Phone call refused: {problem}", **{"from": caller, "to": called})
        return Refused(480, "Temporarily Unavailable")
    refusal = budget_refusal(organization=number.organization_id, agent_id=agent.pk, variables=None)
    if refusal is not None:  # a spent `block` budget of the organization or the agent
        logger.info("SIP call to %s refused: %s", called, refusal.reason)
        session = LogSession(organization_id=agent.organization_id, agent_id=agent.pk, session_id=new_session_id())
        agent_log(session, "warn", f"Phone call refused: {refusal.reason}", **{"from": caller, "to": called})
        return Refused(480, "Budget Exceeded")
    try:
        call_slot_reserve(
            organization_id=number.organization_id,
            channel="phone",
            key=call_id,
            expires_at=timezone.now() + timedelta(seconds=SLOT_SECONDS),
        )
    except ConcurrentCallLimitExceeded as exc:
        logger.info("SIP call to %s refused: the organization is at its %s concurrent calls", called, exc.limit)
        return Refused(486, "Busy Here")
    loaded = session_agent_get(organization_id=number.organization_id, agent_id=agent.pk)
    assert loaded is not None  # read a moment ago, under the same organization
    return Admitted(
        organization_id=number.organization_id,
        agent=loaded,
        from_number=caller,
        to_number=called,
        domain=sip_domain(account.account_sid),
    )
