"""Whether this process is shutting down: the server marks it (voiceagent/server.py) before it cancels
the live connections, so that the calls they carry end with the ended reason `server-shutdown`
rather than as an error. Plain module state, no Django: the server sets it before anything else."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

_under_way = False


def begin() -> None:
    """The server is stopping (SIGTERM, SIGINT): every connection still open is being cancelled."""
    global _under_way
    _under_way = True


def under_way() -> bool:
    return _under_way


# Connections the server does not know of (WebRTC peers: realtime/webrtc/peer.py) register how to end them;
# the server runs these as it stops, beside the cancelled connections, and waits for them.
_closers: list[Callable[[], Awaitable[None]]] = []


def on_stop(closer: Callable[[], Awaitable[None]]) -> None:
    """Run `closer()` (a coroutine function) when the server stops; registered once per function."""
    if closer not in _closers:
        _closers.append(closer)


async def close_registered() -> None:
    """Run every registered closer, at once, and wait for them (a failing one is left to its own logs)."""
    await asyncio.gather(*(closer() for closer in list(_closers)), return_exceptions=True)
