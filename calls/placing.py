"""The seam between the calls API and outbound calls.

POST /calls (place a call) and POST /calls/{id}/hang-up are routes of the calls resource, served by its
views (calls/apis.py), but placing a call from one of the organization's numbers and hanging one up at
the carrier are telephony's work, a floor up (telephony/outbound/services.py): this app does not import
it. The telephony app registers both operations here when it starts (telephony/apps.py), as realtime
registers the analysis queue (calls/analysis.py).
"""

from __future__ import annotations

from typing import Any, Protocol

from accounts.models import Organization
from calls.models import Call


class PlaceCall(Protocol):
    """Check a POST /calls request (400, 403, 404, 503: ApiError) and queue the call it asks for."""

    def __call__(
        self,
        *,
        organization: Organization,
        agent_id: Any,
        phone_number_id: Any,
        to: Any,
        variables: Any = None,
        metadata: Any = None,
    ) -> Call: ...


class HangUp(Protocol):
    """Cancel a queued or ringing call, or hang up a live one (409 CALL_ENDED for an ended call): the call
    as it is now."""

    def __call__(self, *, call: Call) -> Call: ...


_place: PlaceCall | None = None
_hang_up: HangUp | None = None


def register(*, place: PlaceCall, hang_up: HangUp) -> None:
    """Set the operations behind POST /calls and POST /calls/{id}/hang-up (telephony/apps.py)."""
    global _place, _hang_up
    _place, _hang_up = place, hang_up


def call_place(
    *,
    organization: Organization,
    agent_id: Any,
    phone_number_id: Any,
    to: Any,
    variables: Any = None,
    metadata: Any = None,
) -> Call:
    if _place is None:
        raise RuntimeError("no outbound calls: the telephony app registers them when it starts (telephony/apps.py)")
    return _place(
        organization=organization,
        agent_id=agent_id,
        phone_number_id=phone_number_id,
        to=to,
        variables=variables,
        metadata=metadata,
    )


def call_hang_up(*, call: Call) -> Call:
    if _hang_up is None:
        raise RuntimeError("no hang-up: the telephony app registers it when it starts (telephony/apps.py)")
    return _hang_up(call=call)
