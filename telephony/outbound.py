"""Outbound calls: the service places a call from one of the organization's numbers to a person, and
the answered call runs through the same media stream, engine, tools, billing and events as an inbound
one (README, "Outbound calls").

SEAM (issue 21): `outbound_call_create` and `outbound_call_cancel` are the entry points the call
batches (telephony/batches.py) and the API use. Placing (the dispatcher), status callbacks and the
provider request are built behind them.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from agents.models import Agent
from calls.models import Call, CallChannel, CallDirection, CallStatus
from calls.variables import metadata_clean, variables_clean
from telephony.models import CallBatchRecipient, OutboundCall, PhoneNumber

logger = logging.getLogger(__name__)


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
    return call


def outbound_call_cancel(*, call: Call) -> Call:
    """Cancel a queued or ringing outbound call (ringing: the carrier is told); a live call is hung up.
    Ends it exactly once (`canceled`, endedReason `canceled`, when it was not answered)."""
    raise NotImplementedError("built by the outbound part of issue 21")
