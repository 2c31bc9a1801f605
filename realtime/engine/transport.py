"""What the engine needs from a transport. The browser socket implements it in realtime/consumers.py;
a phone media stream implements the same methods in its own wire format. The engine never knows
which transport it serves: endings are named (`Ending`), and each transport maps them to its wire
(close codes for the browser socket, a hang-up or a transfer for a phone call)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Protocol


class Ending(StrEnum):
    COMPLETED = "completed"  # the conversation ended normally (the caller or client stopped it)
    IDLE = "idle"  # no caller audio for REALTIME_INPUT_IDLE_SECONDS
    TRANSFERRED = "transferred"  # handed to a human (after `transfer`)
    FAILED = "failed"  # the engine (or the agent's configuration) failed; `message` says why


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
        """An extra, transport-specific message (for example `tool.started`); may be ignored."""

    async def transfer(self, destination: str) -> None:
        """Hand the caller to a human at `destination` (E.164). `hang_up(TRANSFERRED)` follows."""

    async def hang_up(self, ending: Ending, message: str = "") -> None:
        """End the connection (the conversation has finished or failed); idempotent."""

    # Optional: a transport that learns when its listener really played the audio (a phone stream's
    # mark echoes) may define `playback_lag(now: float) -> float`, the seconds by which the listener
    # is behind the playout's estimate; on barge-in the session keeps only what was heard by then.
