"""Whether this process is shutting down: the server marks it (voiceagent/server.py) before it cancels
the live connections, so that the calls they carry end with the ended reason `server-shutdown`
rather than as an error. Plain module state, no Django: the server sets it before anything else."""

from __future__ import annotations

_under_way = False


def begin() -> None:
    """The server is stopping (SIGTERM, SIGINT): every connection still open is being cancelled."""
    global _under_way
    _under_way = True


def under_way() -> bool:
    return _under_way
