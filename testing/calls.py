"""Waiting for the call records a server process writes (real time: no clock to drive)."""

from __future__ import annotations

import asyncio
import time

from asgiref.sync import sync_to_async

from calls.models import Call


async def wait_call(call_sid: str, *, status: str | None = None, timeout: float = 20) -> Call:
    """The call record of `call_sid` (once it exists, or has left `active` when status is given)."""
    deadline = time.monotonic() + timeout
    while True:
        call = await sync_to_async(Call.objects.filter(provider_call_id=call_sid).first)()
        if call is not None and (status is None or call.status == status):
            return call
        if time.monotonic() > deadline:
            raise AssertionError(f"call {call_sid}: {call and call.status}")
        await asyncio.sleep(0.05)
