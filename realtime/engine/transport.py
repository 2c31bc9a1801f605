"""What the engine needs from a transport. The browser socket implements it in realtime/consumers.py;
the phone media stream of a later issue implements the same methods in its own wire format."""

from __future__ import annotations

from typing import Any, Protocol


class Transport(Protocol):
    async def started(self, call_id: str) -> None:
        """The engine is ready (models loaded, call record open); the greeting plays next."""

    async def send_audio(self, pcm16_24k: bytes) -> None:
        """Agent audio, PCM16 LE mono 24 kHz, a whole number of 20 ms frames, already paced."""

    async def clear(self) -> None:
        """Barge-in: the caller's side must drop audio it has queued and stop playback now."""

    async def send_transcript(self, role: str, text: str) -> None:
        """A completed turn (`user` or `assistant`)."""

    async def send_event(self, event: dict[str, Any]) -> None:
        """An extra, transport-specific message (for example `error`); may be ignored."""

    async def close(self, code: int, reason: str = "") -> None:
        """End the connection (the engine has finished or failed)."""
