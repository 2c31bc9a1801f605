"""The call's audio as the two sides heard it, kept while the call runs and stored once it has ended
(agents with `recordingEnabled`; calls/recordings.py encodes and stores it).

Two PCM16 mono tracks on the call's clock, time 0 being the moment the call record opened:
- the caller (left): what the transport delivered, at IN_RATE, placed where it arrived (a gap in the
  caller's audio stays silent, a burst is laid end to end);
- the agent (right): what the playout actually sent, at OUT_RATE (speech with the ambient bed and the
  keyboard, as mixed), placed at the stream time the listener plays it. A barge-in cuts the track
  where the listener stopped hearing (`cut`): what was sent ahead but cleared from the listener's
  buffer was never heard, and is dropped.

Each track is a spooled temporary file written at byte offsets (a few MB in memory, then on disk):
appending a chunk is one seek and one write, nothing per sample in Python, and a long call costs disk,
not memory. At most RECORDING_MAX_SECONDS are kept.
"""

from __future__ import annotations

import asyncio
import io
import logging
import tempfile
from typing import IO, Any

from django.conf import settings
from django.db import connections

from calls import services as calls
from calls.recordings import encode_stereo_ogg, recording_store
from realtime.engine.audio import IN_RATE, OUT_RATE, SAMPLE_BYTES

logger = logging.getLogger(__name__)

SPOOL_BYTES = 1024 * 1024  # per track kept in memory (30 s of the caller) before it spills to a temporary file
CALLER_GAP_SECONDS = 0.25  # caller audio arriving later than this after the last ends a gap of silence

# Recordings being encoded and stored after their call ended (referenced until done).
_saving: set[asyncio.Task[Any]] = set()


class Track:
    def __init__(self, rate: int, max_seconds: float) -> None:
        self.rate = rate
        self.file: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # closed in close()
        self.size = 0  # bytes written so far (the track's end)
        self.limit = int(max_seconds * rate) * SAMPLE_BYTES

    def offset(self, seconds: float) -> int:
        return max(0, round(seconds * self.rate)) * SAMPLE_BYTES

    def write_at(self, offset: int, pcm: bytes) -> None:
        if offset >= self.limit:
            return
        pcm = pcm[: self.limit - offset]
        self.file.seek(offset)  # past the end: the gap reads as zeros (silence)
        self.file.write(pcm)
        self.size = max(self.size, offset + len(pcm))

    def truncate(self, offset: int) -> None:
        if offset < self.size:
            self.file.truncate(offset)
            self.size = offset

    def close(self) -> None:
        self.file.close()


class CallAudio:
    """Both tracks of one call; `origin` is the clock time of the call's start (time 0)."""

    def __init__(self, origin: float, *, max_seconds: float | None = None) -> None:
        limit = float(max_seconds if max_seconds is not None else settings.RECORDING_MAX_SECONDS)
        self.origin = origin
        self.caller = Track(IN_RATE, limit)
        self.agent = Track(OUT_RATE, limit)
        self._caller_end = 0  # byte offset where the caller's audio so far ends

    def caller_audio(self, now: float, pcm16_16k: bytes) -> None:
        """Caller audio that arrived at clock time `now` (it ended then)."""
        duration = len(pcm16_16k) / (IN_RATE * SAMPLE_BYTES)
        arrived = self.caller.offset(now - self.origin - duration)
        gap = self.caller.offset(CALLER_GAP_SECONDS)
        offset = arrived if arrived > self._caller_end + gap else self._caller_end
        self.caller.write_at(offset, pcm16_16k)
        self._caller_end = offset + len(pcm16_16k)

    def agent_audio(self, at: float, pcm16_24k: bytes) -> None:
        """Agent audio the playout sent, whose first frame plays at clock time `at`."""
        self.agent.write_at(self.agent.offset(at - self.origin), pcm16_24k)

    def cut(self, heard_by: float) -> None:
        """Barge-in (or the end of the call): the listener heard the agent's audio up to `heard_by`."""
        self.agent.truncate(self.agent.offset(heard_by - self.origin))

    @property
    def empty(self) -> bool:
        return self.caller.size == 0 and self.agent.size == 0

    def close(self) -> None:
        self.caller.close()
        self.agent.close()


def _encode_and_store(audio: CallAudio, call_id: str) -> str | None:
    """In a worker thread: encode both tracks to Ogg/Opus and write it once to the recordings storage;
    the call is then given its recording key. None when the call is gone."""
    try:
        call = calls.call_for_recording(call_id=call_id)
        if call is None:
            return None
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as encoded:
            encode_stereo_ogg(
                left=audio.caller.file,
                left_rate=audio.caller.rate,
                right=audio.agent.file,
                right_rate=audio.agent.rate,
                out=encoded,
            )
            size = encoded.seek(0, io.SEEK_END)
            key = recording_store(call=call, data=encoded)
        calls.call_recording_attach(call_id=call_id, key=key, size_bytes=size)
        return key
    finally:
        audio.close()
        connections.close_all()  # this worker thread's


def _abandon(call_id: str) -> None:
    try:
        calls.call_recording_abandon(call_id=call_id)
    finally:
        connections.close_all()  # this worker thread's


def save_recording(audio: CallAudio, *, call_id: str, log: Any) -> asyncio.Task[Any]:
    """Encode and store the recording in the background once the call has ended: the call's end never
    waits for it. A failure leaves the call as it is (no recording) with an `error` agent log line."""

    async def run() -> None:
        try:
            key = await asyncio.to_thread(_encode_and_store, audio, call_id)
            if key:
                log("info", "recording saved", callId=call_id)
        except Exception as exc:  # a failed recording never fails the call
            logger.warning("recording of call %s failed", call_id, exc_info=True)
            await asyncio.to_thread(_abandon, call_id)  # before the log line that says so
            log("error", "recording failed", callId=call_id, reason=f"{type(exc).__name__}: {str(exc)[:300]}")

    task = asyncio.get_running_loop().create_task(run(), name=f"recording-{call_id}")
    _saving.add(task)
    task.add_done_callback(_saving.discard)
    return task


async def recordings_saved() -> None:
    """Wait for the recordings being saved (a server shutting down, tests)."""
    while _saving:
        await asyncio.gather(*list(_saving), return_exceptions=True)


__all__ = ("CallAudio", "recordings_saved", "save_recording")
