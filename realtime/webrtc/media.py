"""The audio of a WebRTC session, at the edge: each direction resampled once, with soxr as the rest of the
engine resamples (its low quality: flat to 80 % of the lower rate's band, plenty for speech, and it answers
every 20 ms chunk; its high quality holds 33 ms of audio back).

- In: the caller's track as aiortc decodes it (Opus at 48 kHz, PCMU/PCMA at 8 kHz; Opus decodes to two
  channels, the browser sends one) -> one channel -> soxr to the engine's 16 kHz -> `push_audio`.
- Out: the engine's 24 kHz PCM -> soxr to the sending codec's rate (48 kHz for Opus, 8 kHz for G.711, so
  that aiortc's encoder resamples nothing) -> `AgentTrack`, which aiortc's sender reads a 20 ms frame at a
  time: it paces itself to real time and plays silence when nothing is queued; `clear` (barge-in) drops
  what is queued at once.
"""

from __future__ import annotations

import asyncio
import fractions
import logging
from collections.abc import Callable

import numpy as np
import soxr
from aiortc import MediaStreamTrack
from aiortc.mediastreams import MediaStreamError
from av import AudioFrame
from av.frame import Frame

from realtime.engine.audio import FRAME_MS, IN_RATE, OUT_RATE, SAMPLE_BYTES

logger = logging.getLogger(__name__)

RESAMPLE_QUALITY = "LQ"
# At most this much agent audio waits in the track (the playout keeps REALTIME_OUTPUT_LEAD_MS ahead; more
# means the sender stopped reading: a stalled connection), the oldest dropped beyond it.
MAX_QUEUED_SECONDS = 5.0
# A sender behind its schedule (a busy loop) catches up by sending frames at once, up to this far behind;
# beyond it the audio it should have played by now is dropped and its schedule starts again from now, so
# that the agent's voice keeps its real-time place (a backlog would delay every answer after it).
RESYNC_SECONDS = 0.2


class AgentTrack(MediaStreamTrack):
    """The agent's voice as the client hears it: a mono track at `rate`, 20 ms frames at real time."""

    kind = "audio"

    def __init__(self, rate: int = 48000) -> None:
        super().__init__()
        self.rate = rate
        self.frame_samples = rate * FRAME_MS // 1000
        self._resampler: soxr.ResampleStream | None = soxr.ResampleStream(
            OUT_RATE, rate, 1, dtype="int16", quality=RESAMPLE_QUALITY
        )
        self._queued = bytearray()  # PCM16 at `rate`
        self._limit = int(MAX_QUEUED_SECONDS * rate) * SAMPLE_BYTES
        self._start: float | None = None  # loop time of frame 0 of the current schedule
        self._sent = 0  # samples sent in the current schedule
        self._pts = 0
        self.drained = asyncio.Event()  # nothing queued
        self.drained.set()

    def use_rate(self, rate: int) -> None:
        """The codec the connection agreed on samples at `rate` (known once the answer is made)."""
        if rate != self.rate:
            self.rate = rate
            self.frame_samples = rate * FRAME_MS // 1000
            self._resampler = soxr.ResampleStream(OUT_RATE, rate, 1, dtype="int16", quality=RESAMPLE_QUALITY)
            self._limit = int(MAX_QUEUED_SECONDS * rate) * SAMPLE_BYTES
            self._queued.clear()

    def push(self, pcm16_24k: bytes) -> None:
        """Agent audio (PCM16 24 kHz) to play after what is queued."""
        if self._resampler is None:  # stopped
            return
        samples = np.frombuffer(pcm16_24k, dtype="<i2")
        self._queued += self._resampler.resample_chunk(samples).astype("<i2").tobytes()
        if len(self._queued) > self._limit:
            del self._queued[: len(self._queued) - self._limit]
        if self._queued:
            self.drained.clear()

    def clear(self) -> None:
        """Barge-in: what is queued is dropped; the next frame is silence."""
        self._queued.clear()
        if self._resampler is not None:
            self._resampler.clear()
        self.drained.set()

    def stop(self) -> None:
        super().stop()
        self._queued.clear()
        self._resampler = None  # soxr's native state goes with the session, not with the process's exit
        self.drained.set()

    @property
    def queued_seconds(self) -> float:
        return len(self._queued) / SAMPLE_BYTES / self.rate

    async def recv(self) -> Frame:
        if self.readyState != "live":
            raise MediaStreamError
        loop = asyncio.get_running_loop()
        now = loop.time()
        late = 0.0 if self._start is None else now - (self._start + self._sent / self.rate)
        if self._start is None or late > RESYNC_SECONDS:
            if late > 0:
                del self._queued[: int(late * self.rate) * SAMPLE_BYTES]
            self._start, self._sent = now, 0
        elif late < 0:
            await asyncio.sleep(-late)
        size = self.frame_samples * SAMPLE_BYTES
        chunk = bytes(self._queued[:size])
        del self._queued[:size]
        if len(chunk) < size:
            chunk += bytes(size - len(chunk))
        if not self._queued:
            self.drained.set()
        frame = AudioFrame.from_ndarray(np.frombuffer(chunk, dtype="<i2").reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = self.rate
        frame.pts = self._pts
        frame.time_base = fractions.Fraction(1, self.rate)
        self._sent += self.frame_samples
        self._pts += self.frame_samples
        return frame


async def listen(track: MediaStreamTrack, deliver: Callable[[bytes], None]) -> None:
    """Read the caller's track until it ends, handing each frame to `deliver` as PCM16 16 kHz mono."""
    resampler: soxr.ResampleStream | None = None
    rate = 0
    while True:
        try:
            frame = await track.recv()
        except MediaStreamError:
            return
        if not isinstance(frame, AudioFrame) or frame.format.name != "s16":
            continue  # aiortc's audio decoders give s16
        channels = len(frame.layout.channels)
        if frame.sample_rate != rate or resampler is None:
            rate = frame.sample_rate
            resampler = soxr.ResampleStream(rate, IN_RATE, 1, dtype="int16", quality=RESAMPLE_QUALITY)
        samples = frame.to_ndarray().reshape(-1, channels)[:, 0]
        pcm = resampler.resample_chunk(np.ascontiguousarray(samples)).astype("<i2").tobytes()
        if pcm:
            deliver(pcm)
