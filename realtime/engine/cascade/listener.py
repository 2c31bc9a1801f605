"""The listening stage's parts: voice activity detection (cheap, run on the event loop for every
piece of caller audio) and the recognizer's work it schedules (heavy, run in a worker thread by its
own stage, so that a slow recognizer never delays end-of-turn or barge-in detection)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import Enum

from realtime.engine.audio import IN_BYTES_PER_MS, LISTEN_BYTES
from realtime.engine.contracts import Detector, Recognizer


class RecognizerJob(Enum):
    """The recognizer's work, in order: START an utterance (with the audio before speech was detected),
    FEED it audio, PEEK at its words so far (at a pause, for the quick end of turn), FINISH it."""

    START = "start"
    FEED = "feed"
    PEEK = "peek"
    FINISH = "finish"


@dataclass
class Heard:
    """What one piece of caller audio changed."""

    speaking: bool
    speech_ms: int
    speech_started: bool = False
    utterances_ended: int = 0
    jobs: list[tuple[RecognizerJob, bytes]] = field(default_factory=list)  # (what to do, its audio)
    pause: int | None = None  # the number of the pause a PEEK job asks about


class Listener:
    def __init__(self, *, detector: Detector, recognizer: Recognizer | None, preroll_ms: int = 400) -> None:
        self.detector = detector
        self.recognizer = recognizer
        self._next_recognizer: Recognizer | None = None  # takes over at the next utterance (`recognize_with`)
        # The detector reports a start only after some speech; the recognizer must hear it from its onset.
        self._preroll: deque[bytes] = deque()
        self._preroll_bytes = 0
        self._preroll_limit = preroll_ms * IN_BYTES_PER_MS
        self._in_utterance = False
        self._pending = b""  # less than LISTEN_BYTES, waiting for more audio
        # Quick end of turn: the detector reports pauses and can end an utterance early, the
        # recognizer tells the words so far.
        self.quick_end = (
            callable(getattr(recognizer, "peek", None))
            and callable(getattr(detector, "use_quick_end", None))
            and detector.use_quick_end()  # type: ignore[attr-defined]  # an optional method: used only when quick_end (set in __init__) says it exists
        )

    def detect(self, pcm16_16k: bytes) -> Heard:
        """Run the detector over new audio; say what the recognizer must do with it. The audio is taken in
        pieces of LISTEN_MS (a remainder waits for the next piece), and each recognizer job holds the audio up
        to the piece where the detector's event came: what the recognizer hears of an utterance follows from
        the audio alone, however the transport cut it in pieces or the listener took waiting pieces together
        (a loaded machine), so the words it makes of the same sound are the same."""
        heard = Heard(speaking=False, speech_ms=0)
        data = self._pending + pcm16_16k
        usable = len(data) - len(data) % LISTEN_BYTES
        self._pending = data[usable:]
        unfed: list[bytes] = []  # audio of the utterance going on, not yet in a job

        def feed_unfed() -> None:
            if unfed:
                heard.jobs.append((RecognizerJob.FEED, b"".join(unfed)))
                unfed.clear()

        for offset in range(0, usable, LISTEN_BYTES):
            piece = data[offset : offset + LISTEN_BYTES]
            taken = self._in_utterance
            if taken:
                unfed.append(piece)
            for event in self.detector.feed(piece):
                if event.kind == "speech_start" and not self._in_utterance:
                    self._in_utterance = heard.speech_started = taken = True
                    self._remember(piece)
                    heard.jobs.append((RecognizerJob.START, b"".join(self._preroll)))
                    self._preroll.clear()
                    self._preroll_bytes = 0
                elif event.kind == "speech_end" and self._in_utterance:
                    feed_unfed()
                    self._in_utterance = False
                    heard.utterances_ended += 1
                    heard.jobs.append((RecognizerJob.FINISH, b""))
                elif event.kind == "pause" and self._in_utterance and self.quick_end:
                    feed_unfed()
                    heard.pause = self.detector.pauses  # type: ignore[attr-defined]
                    heard.jobs.append((RecognizerJob.PEEK, b""))
            if not taken:
                self._remember(piece)
        feed_unfed()
        heard.speaking = bool(self.detector.speaking)
        heard.speech_ms = int(self.detector.current_speech_ms) if heard.speaking else 0
        if self.recognizer is None:
            heard.jobs = [job for job in heard.jobs if job[0] is RecognizerJob.FINISH]
        return heard

    def end_turn(self, pause: int, *, after_ms: int = 0) -> bool:
        """End the utterance if the caller is still silent in the given pause: now, or once the pause
        has lasted `after_ms`. True when it ended now; then the recognizer's FINISH job is the
        caller's to schedule (a later end comes from the detector, as usual)."""
        if not self._in_utterance or not self.detector.end_pause(pause, after_ms):  # type: ignore[attr-defined]  # an optional method: used only when quick_end (set in __init__) says it exists
            return False
        self._in_utterance = False
        return True

    def split_turn(self, pause: int, *, after_ms: int = 0) -> int | None:
        """End the utterance at the given pause although the caller has spoken again since (the words at
        the pause were recognized too late to end it there): what they said since goes on as a new
        utterance. The milliseconds since the pause began, or None when it cannot be split there. The
        recognizer's FINISH of the utterance and START of the new one are then the caller's to schedule,
        before the audio that follows the pause."""
        if not self._in_utterance:
            return None
        return self.detector.split_at_pause(pause, after_ms)  # type: ignore[attr-defined,no-any-return]  # an optional method: used only when quick_end (set in __init__) says it exists

    def recognize_with(self, recognizer: Recognizer) -> None:
        """Hear the caller with `recognizer` from the next utterance on (the one under way keeps its own):
        the call was handed to an agent with a language or words of its own."""
        self._next_recognizer = recognizer

    def recognize(self, jobs: list[tuple[RecognizerJob, bytes]]) -> list[tuple[RecognizerJob, str]]:
        """Do the recognizer's work (blocking); for each PEEK and FINISH job its kind and text:
        the words so far, or of the utterance that ended ('' = not understood, or no recognizer)."""
        texts: list[tuple[RecognizerJob, str]] = []
        recognizer = self.recognizer
        for kind, audio in jobs:
            if kind is RecognizerJob.START and self._next_recognizer is not None:
                recognizer = self.recognizer = self._next_recognizer  # from this utterance on (a handoff)
                self._next_recognizer = None
            if recognizer is None:
                texts += [(kind, "")] if kind in (RecognizerJob.PEEK, RecognizerJob.FINISH) else []
            elif kind is RecognizerJob.START:
                recognizer.start()
                if audio:
                    recognizer.feed(audio)
            elif kind is RecognizerJob.FEED:
                recognizer.feed(audio)
            elif kind is RecognizerJob.PEEK:
                texts.append((kind, recognizer.peek()))  # type: ignore[attr-defined]  # an optional method: used only when quick_end (set in __init__) says it exists
            else:
                texts.append((kind, recognizer.finish()))
        return texts

    def _remember(self, pcm: bytes) -> None:
        self._preroll.append(pcm)
        self._preroll_bytes += len(pcm)
        while len(self._preroll) > 1 and self._preroll_bytes - len(self._preroll[0]) >= self._preroll_limit:
            self._preroll_bytes -= len(self._preroll.popleft())
