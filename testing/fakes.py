"""Small stand-ins for the speech parts, for pipeline tests that drive time by hand.

Caller audio: a sample value of 0 is silence, anything else is speech. The detector reports a start
after 40 ms of speech and an end after 100 ms of silence (with `pause_ms`, also a pause after that much
silence, for the quick end of turn); the recognizer answers scripted texts, and tells as the words so
far (`peek`) those its current utterance will end with.
Synthesized speech lasts 100 ms per word at a constant level, so tests can reason about durations.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pytest

from realtime.engine.cascade.kit import VoiceKit
from realtime.engine.contracts import (
    BrainContext,
    BrainOutput,
    Ending,
    TextPiece,
    ToolCall,
    ToolOutcome,
    ToolSpec,
    Turn,
)
from testing.waiting import Signal

IN_BYTES_PER_MS = 32
OUT_BYTES_PER_MS = 48
WORD_MS = 100


def speech(ms: int) -> bytes:
    return (1000).to_bytes(2, "little", signed=True) * (16 * ms)


def silence(ms: int) -> bytes:
    return b"\x00\x00" * (16 * ms)


class Event(NamedTuple):
    kind: str
    at_ms: int


class FakeDetector:
    def __init__(self, start_ms: int = 40, end_ms: int = 100, pause_ms: int = 0) -> None:
        self.start_ms, self.end_ms, self.pause_ms = start_ms, end_ms, pause_ms
        self.speaking = False
        self.current_speech_ms = 0
        self.pauses = 0
        self._voiced = 0
        self._quiet = 0
        self._pos = 0
        self._pause_end_ms = 0
        # The last pause the caller ended by speaking: (its number, its length, the position where speech
        # came back, the speech before it in this utterance), all in ms.
        self._resumed: tuple[int, int, int, int] | None = None

    def use_quick_end(self) -> bool:
        return self.pause_ms > 0

    def in_pause(self, number: int) -> bool:
        return self.speaking and self.pauses == number and self.pause_ms > 0 and self._quiet >= self.pause_ms

    def end_pause(self, number: int, after_ms: int = 0) -> bool:
        if not self.in_pause(number):
            return False
        if self._quiet < after_ms:
            self._pause_end_ms = after_ms
            return False
        self._end()
        return True

    def split_at_pause(self, number: int, after_ms: int = 0) -> int | None:
        resumed = self._resumed
        if not self.speaking or resumed is None or resumed[0] != number or resumed[1] < after_ms:
            return None
        _, length, resumed_at, voiced_before = resumed
        self._resumed = None
        self._voiced -= voiced_before  # the new utterance is what was said since
        self.current_speech_ms = self._voiced
        return self._pos - resumed_at + length

    def _end(self) -> None:
        self.speaking = False
        self._voiced = self._pause_end_ms = 0
        self.current_speech_ms = 0
        self._resumed = None

    @property
    def silence_ms(self) -> int:
        """The silence since the last speech (what the real detector reports for the turn latency)."""
        return self._quiet

    def feed(self, pcm: bytes) -> list[Event]:
        events = []
        for i in range(0, len(pcm) - 1, IN_BYTES_PER_MS):  # one decision per millisecond
            voiced = any(pcm[i : i + IN_BYTES_PER_MS])
            self._pos += 1
            if voiced:
                if self.speaking and self.pause_ms and self._quiet >= self.pause_ms:  # a pause, ended by speech
                    self._resumed = (self.pauses, self._quiet, self._pos - 1, self._voiced)
                self._voiced += 1
                self._quiet = self._pause_end_ms = 0
                if not self.speaking and self._voiced >= self.start_ms:
                    self.speaking = True
                    events.append(Event("speech_start", self._pos))
            else:
                self._quiet += 1
                if not self.speaking:
                    self._voiced = 0
                elif self._quiet >= (self._pause_end_ms or self.end_ms):
                    self._end()
                    events.append(Event("speech_end", self._pos))
                elif self.pause_ms and self._quiet == self.pause_ms:
                    self.pauses += 1
                    events.append(Event("pause", self._pos))
            self.current_speech_ms = self._voiced if self.speaking else 0
        return events


@dataclass
class FakeRecognizer:
    texts: list[str]
    heard: list[bytes] = field(default_factory=list)  # the audio of each finished utterance
    _current: list[bytes] = field(default_factory=list)

    @property
    def heard_bytes(self) -> list[int]:
        return [len(audio) for audio in self.heard]

    def peek(self) -> str:
        return self.texts[0] if self.texts else ""

    def start(self) -> None:
        self._current = []

    def feed(self, pcm: bytes) -> None:
        self._current.append(pcm)

    def finish(self) -> str:
        self.heard.append(b"".join(self._current))
        return self.texts.pop(0) if self.texts else ""


class FakeMixer:
    def __init__(self, has_bed: bool = False) -> None:
        self.has_bed = has_bed
        self.calls: list[tuple[bool, bool, bool]] = []  # (speech present, user_speaking, keyboard)

    def next_frame(self, speech: bytes | None, *, user_speaking: bool, keyboard: bool) -> bytes:
        self.calls.append((bool(speech), user_speaking, keyboard))
        frame = (speech or b"")[:960]
        return frame + b"\x00" * (960 - len(frame))


def synthesize(text: str, language: str, voice: str) -> bytes:
    return (3000).to_bytes(2, "little", signed=True) * (24 * WORD_MS * len(text.split()))


def split_sentences(text: str) -> list[str]:
    return [part.strip() for part in re.findall(r"[^.!?]+[.!?]*", text) if part.strip()]


def make_kit(
    *,
    texts: Sequence[str] = (),
    has_bed: bool = False,
    recognizer: bool = True,
    detector: Callable[[], FakeDetector] = FakeDetector,
) -> tuple[VoiceKit, Any]:
    parts: dict[str, Any] = {"mixer": FakeMixer(has_bed), "recognizer": FakeRecognizer(list(texts))}
    kit = VoiceKit(
        name="fake",
        preload=lambda: None,
        detector=detector,
        recognizer=lambda agent, knowledge: parts["recognizer"] if recognizer else None,
        synthesize=synthesize,
        split_sentences=split_sentences,
    )
    return kit, parts


class RecordingTransport:
    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self.events: list[tuple[float, str, Any]] = []
        self.ended: tuple[Ending, str] | None = None
        self.transferred_to: str | None = None

    async def started(self, call_id: str) -> None:
        self.events.append((self.clock.now(), "started", call_id))

    async def send_audio(self, pcm: bytes) -> None:
        assert len(pcm) % 960 == 0
        self.events.append((self.clock.now(), "audio", pcm))

    async def clear(self) -> None:
        self.events.append((self.clock.now(), "clear", None))

    async def send_transcript(self, role: str, text: str) -> None:
        self.events.append((self.clock.now(), "transcript", (role, text)))

    async def send_event(self, event: dict[str, Any]) -> None:
        self.events.append((self.clock.now(), "event", event))

    async def transfer(self, destination: str) -> None:
        self.events.append((self.clock.now(), "transfer", destination))
        self.transferred_to = destination

    async def hang_up(self, ending: Ending, message: str = "") -> None:
        if self.ended is None:
            self.ended = (ending, message)

    def kinds(self) -> list[str]:
        return [kind for _, kind, _ in self.events]

    def messages(self) -> list[tuple[float, str, Any]]:
        """The events with each client message named by its type (`agent_speech`, `tool.finished`...)."""
        return [(at, value["type"] if kind == "event" else kind, value) for at, kind, value in self.events]

    def assert_captioned(self, sentences: Sequence[str], starts: Sequence[float], transcript: str) -> None:
        """The first answer was sent as `agent_speech` sentence by sentence, each at its `starts` offset
        (seconds) into the audio (the first one before any audio), then `agent_speech.ended`, then its
        transcript."""
        events = self.messages()
        kinds = [kind for _, kind, _ in events]
        first_audio = next(at for at, kind, _ in events if kind == "audio")
        spoken = [(at, value["text"]) for at, kind, value in events if kind == "agent_speech"]
        assert [text for _, text in spoken] == list(sentences)
        assert [at - first_audio for at, _ in spoken] == [pytest.approx(start, abs=0.021) for start in starts]
        assert kinds.index("agent_speech") < kinds.index("audio")
        ended = kinds.index("agent_speech.ended")
        assert events[ended][2] == {"type": "agent_speech.ended", "interrupted": False}
        assert kinds[ended + 1] == "transcript" and events[ended + 1][2] == ("assistant", transcript)

    def transcripts(self) -> list[tuple[str, str]]:
        return [value for _, kind, value in self.events if kind == "transcript"]

    def audio_ms(self, since: float = float("-inf")) -> float:
        return sum(len(value) / OUT_BYTES_PER_MS for at, kind, value in self.events if kind == "audio" and at >= since)


class ScriptedBrain:
    """Answers each user turn with the next script entry: text pieces and tool requests."""

    def __init__(self, *scripts: Sequence[BrainOutput]) -> None:
        self.scripts = list(scripts)
        self.seen: list[list[Turn]] = []
        self.contexts: list[BrainContext] = []

    async def respond(self, context: BrainContext, conversation: Sequence[Turn]) -> AsyncIterator[BrainOutput]:
        self.seen.append(list(conversation))
        self.contexts.append(context)
        if conversation and conversation[-1].role == "tool":
            yield TextPiece("Done.")
            return
        for output in self.scripts.pop(0) if self.scripts else [TextPiece("Okay.")]:
            yield output


class ScriptedTools:
    """A tool dispatcher stand-in: offers `specs`, answers each call with `results[name]` once
    `release` is set (set from the start unless `wait`), and remembers the calls."""

    def __init__(self, results: dict[str, ToolOutcome] | None = None, *, wait: bool = False) -> None:
        self.results = results or {}
        self.calls: list[ToolCall] = []
        self.arrived = Signal()  # notified on each call
        self.release = asyncio.Event()
        if not wait:
            self.release.set()
        self.closed = False

    async def load(self) -> tuple[ToolSpec, ...]:
        return tuple(ToolSpec(name=name, description="", parameters={"type": "object"}) for name in self.results)

    async def run(self, call: ToolCall) -> ToolOutcome:
        self.calls.append(call)
        self.arrived.notify()
        await self.release.wait()
        return self.results.get(call.name) or ToolOutcome(result='{"error": "unknown tool"}', status="error")

    async def aclose(self) -> None:
        self.closed = True


__all__ = ["ScriptedTools", "TextPiece", "ToolCall"]
