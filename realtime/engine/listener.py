"""The listening stage's parts: voice activity detection (cheap, run on the event loop for every
piece of caller audio) and the recognizer's work it schedules (heavy, run in a worker thread by its
own stage, so that a slow recognizer never delays end-of-turn or barge-in detection)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from realtime.engine.voice import Detector, Recognizer

BYTES_PER_MS_16K = 32


@dataclass
class Heard:
    """What one piece of caller audio changed."""

    speaking: bool
    speech_ms: int
    speech_started: bool = False
    utterances_ended: int = 0
    jobs: list[tuple[str, bytes]] = field(default_factory=list)  # ("start" | "feed" | "finish", audio)


class Listener:
    def __init__(self, *, detector: Detector, recognizer: Recognizer | None, preroll_ms: int = 400) -> None:
        self.detector = detector
        self.recognizer = recognizer
        # The detector reports a start only after some speech; the recognizer must hear it from its onset.
        self._preroll: deque[bytes] = deque()
        self._preroll_bytes = 0
        self._preroll_limit = preroll_ms * BYTES_PER_MS_16K
        self._in_utterance = False

    def detect(self, pcm16_16k: bytes) -> Heard:
        """Run the detector over new audio; say what the recognizer must do with it."""
        heard = Heard(speaking=False, speech_ms=0)
        fed = False
        for event in self.detector.feed(pcm16_16k):
            if event.kind == "speech_start" and not self._in_utterance:
                self._in_utterance = heard.speech_started = fed = True
                self._remember(pcm16_16k)
                heard.jobs.append(("start", b"".join(self._preroll)))
                self._preroll.clear()
                self._preroll_bytes = 0
            elif event.kind == "speech_end" and self._in_utterance:
                if not fed:
                    heard.jobs.append(("feed", pcm16_16k))
                fed = True
                self._in_utterance = False
                heard.utterances_ended += 1
                heard.jobs.append(("finish", b""))
        if not fed:
            if self._in_utterance:
                heard.jobs.append(("feed", pcm16_16k))
            else:
                self._remember(pcm16_16k)
        heard.speaking = bool(self.detector.speaking)
        heard.speech_ms = int(self.detector.current_speech_ms) if heard.speaking else 0
        if self.recognizer is None:
            heard.jobs = [job for job in heard.jobs if job[0] == "finish"]
        return heard

    def recognize(self, jobs: list[tuple[str, bytes]]) -> list[str]:
        """Do the recognizer's work (blocking); the texts of the utterances that ended ('' = not
        understood, or no recognizer for the language)."""
        texts: list[str] = []
        recognizer = self.recognizer
        for kind, audio in jobs:
            if recognizer is None:
                texts += [""] if kind == "finish" else []
            elif kind == "start":
                recognizer.start()
                recognizer.feed(audio)
            elif kind == "feed":
                recognizer.feed(audio)
            else:
                texts.append(recognizer.finish())
        return texts

    def _remember(self, pcm: bytes) -> None:
        self._preroll.append(pcm)
        self._preroll_bytes += len(pcm)
        while len(self._preroll) > 1 and self._preroll_bytes - len(self._preroll[0]) >= self._preroll_limit:
            self._preroll_bytes -= len(self._preroll.popleft())
