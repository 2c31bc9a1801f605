"""Waiting for the call records a server process writes (real time: no clock to drive)."""

from __future__ import annotations

from asgiref.sync import sync_to_async

from calls.models import Call
from testing.waiting import polled


async def wait_call(call_sid: str, *, status: str | None = None, timeout: float = 20) -> Call:
    """The call record of `call_sid` (once it exists, or has left `active` when status is given)."""

    async def found() -> Call | None:
        call = await sync_to_async(Call.objects.filter(provider_call_id=call_sid).first)()
        return call if call is not None and (status is None or call.status == status) else None

    wanted = f"call {call_sid}" + (f" with status {status}" if status else "")
    return await polled(found, what=wanted, timeout=timeout)
