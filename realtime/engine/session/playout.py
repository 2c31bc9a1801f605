"""The playout stage: mixes agent speech with the ambient bed and keyboard loop and sends it to the
transport paced to real time, never more than `lead_ms` ahead of the listener's playback, so that a
barge-in can cut the answer within that lead. It knows when each segment starts playing at the
listener (`on_start`, at that moment: the live caption of what the agent says) and when a response
has played out (its end marker's `on_played`).

Keypad tones (`Tones`, the send_digits tool's) play in the queue's order but are never cut: a barge-in
keeps the tones still queued, and while tones are on their way to the listener (`tones_unheard`) the
stream is not restarted, so that the session need not clear the transport and a phone menu hears every
key."""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from realtime.engine.audio import FRAME_SECONDS, OUT_FRAME_BYTES
from realtime.engine.clock import Clock
from realtime.engine.contracts import Mixer, Segment, Transport

# Frames streamed after the keyboard stops, so that the mixer can fade it out instead of cutting it.
KEYBOARD_TAIL_FRAMES = 4


@dataclass(eq=False)
class Tones:
    """Keypad tones (PCM16 at the output rate, whole frames) queued for playout; not cut by a barge-in."""

    audio: bytes
    position: int = 0


@dataclass(eq=False)
class EndMarker:
    """Queued after a response's last segment; `on_played` runs once its audio has played out."""

    owner: Any
    on_played: Callable[[Any], Awaitable[None]]


class Playout:
    def __init__(
        self,
        *,
        mixer: Mixer,
        transport: Transport,
        clock: Clock,
        user_speaking: Callable[[], bool],
        keyboard: Callable[[], bool],
        on_start: Callable[[Segment], Awaitable[None]] | None = None,
        on_sent: Callable[[float, bytes], None] | None = None,
        lead_ms: int = 200,
        chunk_ms: int = 60,
    ) -> None:
        self.mixer = mixer
        self.transport = transport
        self.clock = clock
        self.user_speaking = user_speaking
        self.keyboard = keyboard
        self.on_start = on_start
        self.on_sent = on_sent  # (clock time its first frame plays, audio): what the listener is sent
        self.lead = lead_ms / 1000
        # Audio goes out in chunks of about chunk_ms, topping the lead back up to lead_ms.
        self.chunk = min(chunk_ms, lead_ms) / 1000
        self.wake = asyncio.Event()
        self._queue: deque[Segment | EndMarker | Tones] = deque()
        self._tones_until: float | None = None  # clock time the last tone frame sent has played by
        self._ending: list[tuple[float, EndMarker]] = []
        self._starting: deque[tuple[float, Segment]] = deque()  # (play_start, segment) whose on_start is due
        self._cuts = 0
        self._anchor: float | None = None  # clock time at which stream frame 0 plays
        self._frames = 0
        self._keyboard_tail = 0  # frames still to stream for the keyboard's fade-out

    def enqueue(self, item: Segment | EndMarker | Tones) -> None:
        self._queue.append(item)
        self.wake.set()

    def cut(self) -> list[EndMarker]:
        """Drop everything not yet sent (barge-in); the transport is told to clear what it holds.
        Returns the end markers that were pending."""
        dropped = [marker for _, marker in self._ending]
        dropped += [item for item in self._queue if isinstance(item, EndMarker)]
        tones = [item for item in self._queue if isinstance(item, Tones)]
        sending = self.tones_unheard(self.clock.now())
        self._queue.clear()
        self._queue.extend(tones)
        self._ending.clear()
        self._starting.clear()
        self._cuts += 1
        if not sending:
            self._anchor = None  # the listener's buffer is emptied: the stream restarts now
        self.wake.set()
        return dropped

    def tones_unheard(self, heard_by: float) -> bool:
        """Keypad tones have been sent that the listener has not heard by `heard_by` (clock time): a
        barge-in must not clear the transport now (the session asks before it cuts)."""
        return self._tones_until is not None and self._tones_until > heard_by

    def _stream_end(self) -> float:
        assert self._anchor is not None
        return self._anchor + self._frames * FRAME_SECONDS

    def _mark_end(self, marker: EndMarker, now: float) -> None:
        at = max(now, self._stream_end()) if self._anchor is not None else now
        self._ending.append((at, marker))

    def _next_speech(self, now: float) -> bytes | None:
        while self._queue and isinstance(self._queue[0], EndMarker):
            self._mark_end(self._queue.popleft(), now)  # type: ignore[arg-type]  # the loop's condition: the queue's head is an EndMarker
        if not self._queue:
            return None
        segment = self._queue[0]
        if isinstance(segment, Tones):
            piece = segment.audio[segment.position : segment.position + OUT_FRAME_BYTES]
            segment.position += OUT_FRAME_BYTES
            if segment.position >= len(segment.audio):
                self._queue.popleft()
            self._tones_until = self._stream_end() + FRAME_SECONDS
            return piece
        assert isinstance(segment, Segment)
        if segment.position == 0:
            segment.play_start = self._stream_end()
            if self.on_start is not None:
                self._starting.append((segment.play_start, segment))
        piece = segment.audio[segment.position : segment.position + OUT_FRAME_BYTES]
        segment.position += OUT_FRAME_BYTES
        if segment.position >= len(segment.audio):
            self._queue.popleft()
        return piece

    async def _start_due(self, now: float) -> None:
        while self._starting and self._starting[0][0] <= now + 1e-6:
            _, segment = self._starting.popleft()
            assert self.on_start is not None
            await self.on_start(segment)

    def _deadline(self, deadline: float) -> float:
        """`deadline`, or earlier when a segment starts or a response ends before it."""
        if self._starting:
            deadline = min(deadline, self._starting[0][0])
        if self._ending:
            deadline = min(deadline, self._ending[0][0])
        return deadline

    async def _finish_due(self, now: float) -> None:
        while self._ending and self._ending[0][0] <= now + 1e-6:
            _, marker = self._ending.pop(0)
            await marker.on_played(marker.owner)

    def _background(self) -> bool:
        """Whether something plays even without speech: the ambient bed, or the keyboard (and its
        fade-out). The keyboard is heard without a bed too."""
        if self.keyboard():
            self._keyboard_tail = KEYBOARD_TAIL_FRAMES
            return True
        return self.mixer.has_bed or self._keyboard_tail > 0

    async def run(self) -> None:
        while True:
            now = self.clock.now()
            await self._start_due(now)
            await self._finish_due(now)
            bed = self._background()
            if not bed and not any(isinstance(item, (Segment, Tones)) for item in self._queue):
                while self._queue:  # end markers with nothing before them
                    self._mark_end(self._queue.popleft(), now)  # type: ignore[arg-type]  # the loop's condition: the queue's head is an EndMarker
                deadline = self._deadline(math.inf)
                if deadline <= now:
                    continue
                await self.clock.sleep_until(deadline, self.wake)
                self.wake.clear()
                continue
            if self._anchor is None or self._stream_end() < now:
                self._anchor, self._frames = now, 0  # start, or restart after an idle gap
            frames: list[bytes] = []
            while self._stream_end() - now < self.lead - 1e-9:
                speech = self._next_speech(now)
                if speech is None and not bed:
                    break
                keyboard = self.keyboard()
                if not keyboard and self._keyboard_tail > 0:
                    self._keyboard_tail -= 1
                    bed = self._background()
                frames.append(self.mixer.next_frame(speech, user_speaking=self.user_speaking(), keyboard=keyboard))
                self._frames += 1
            # A segment that starts now is announced before its first audio goes out (unless a barge-in
            # cut the playout meanwhile: then these frames are not sent at all).
            cuts = self._cuts
            await self._start_due(now)
            if self._cuts != cuts:
                continue
            if frames:
                audio = b"".join(frames)
                if self.on_sent is not None:
                    self.on_sent(self._stream_end() - len(frames) * FRAME_SECONDS, audio)
                await self.transport.send_audio(audio)
            deadline = self._deadline(self._stream_end() - self.lead + self.chunk)
            await self.clock.sleep_until(deadline, self.wake)
            self.wake.clear()
