"""The response handle: one assistant turn being produced, spoken and heard, and the segments of its
speech on their way to the listener.

Like LiveKit's `SpeechHandle`, the handle owns its state changes: a pipeline or the shell calls its
methods (`cancel`, `lock_said`, `transfer_after`, `end_after`, `heard_text`...) and never writes its
fields, so that what a barge-in may cut, what joins the history and what happens once it has played
are decided in one place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from realtime.engine.audio import OUT_BYTES_PER_SECOND
from realtime.engine.contracts import Ending
from realtime.engine.timing import TurnTiming

# A word that ends a sentence (the live caption of a speech-to-speech answer goes sentence by sentence).
SENTENCE_END = re.compile(r"[.!?][\"')\]]*$")


@dataclass(eq=False)
class Segment:
    """One synthesized sentence on its way to the listener."""

    text: str
    audio: bytes
    owner: Any = None  # the response it belongs to
    index: int = 0  # its sentence number within that response
    position: int = 0  # bytes handed to the mixer so far
    play_start: float | None = None  # clock time its first frame plays at the listener

    @property
    def duration(self) -> float:
        return len(self.audio) / OUT_BYTES_PER_SECOND

    def heard_fraction(self, now: float) -> float:
        if self.play_start is None or now <= self.play_start:
            return 0.0
        if self.duration <= 0:
            return 1.0
        return min(1.0, (now - self.play_start) / self.duration)


@dataclass(eq=False)
class Response:
    """One assistant turn being produced, spoken and heard."""

    locked: int = 0  # leading sentences that a barge-in cannot cut (the AI-identity disclosure)
    turn_ended_at: float | None = None  # when the user turn that prompted it ended
    sentences: list[str] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    done: bool = False
    cancelled: bool = False  # interrupted: every stage drops the work it still holds for it
    in_history: int = 0  # leading sentences already in the history (said before a tool call)
    transfer_to: str | None = None  # hand the caller to this number once the response has played
    then_end: tuple[Ending, str] | None = None  # or end the session once it has played
    timing: TurnTiming | None = None  # the caller turn it answers (None: the shell's own, the greeting)
    shown: dict[int, int] = field(default_factory=dict)  # sentence number -> its words sent as agent_speech
    speaking: bool = False  # an agent_speech was sent and its agent_speech.ended not yet

    # --- state changes: pipelines and the shell call these, never write the fields -------------------

    def add_sentence(self, text: str) -> int:
        """A sentence to be spoken (possibly empty, its words still to come); its sentence number."""
        self.sentences.append(text)
        return len(self.sentences) - 1

    def revise_sentence(self, index: int, text: str) -> None:
        """The words of sentence `index` as known now (a provider's transcript grows as it speaks)."""
        self.sentences[index] = text

    def add_segment(self, segment: Segment) -> None:
        """Speech of this response queued for playout."""
        self.segments.append(segment)

    def answers(self, timing: TurnTiming) -> None:
        """The caller turn this response answers, timed through the engine."""
        self.timing = timing

    def lock_said(self) -> None:
        """A barge-in cannot cut the sentences said so far (a handoff announcement)."""
        self.locked = len(self.sentences)

    def transfer_after(self, destination: str) -> None:
        """Hand the caller to `destination` once the response has played."""
        self.transfer_to = destination

    def end_after(self, ending: Ending, message: str = "") -> None:
        """End the session once the response has played."""
        self.then_end = (ending, message)

    def said_in_history(self) -> None:
        """The sentences said so far are in the history (said before a tool call)."""
        self.in_history = len(self.sentences)

    def cancel(self) -> None:
        """Interrupted: every stage drops the work it still holds for it."""
        self.cancelled = True

    def finish(self) -> None:
        """Played out, cut, or dropped: nothing more of it is committed."""
        self.done = True

    def start_speaking(self) -> None:
        """Its words began to be shown as agent speech."""
        self.speaking = True

    def stop_speaking(self) -> bool:
        """Its words stopped being shown; False when they were not being shown."""
        was, self.speaking = self.speaking, False
        return was

    # --- what was heard -------------------------------------------------------------------------------

    def heard_text(self, now: float, *, first_sentence: int = 0) -> str:
        """The words the listener has heard by `now` (whole sentences, then a proportional share of
        the sentence that was playing)."""
        words: list[str] = []
        for segment in self.segments:
            fraction = segment.heard_fraction(now)
            part = segment.text.split()
            heard = part if fraction >= 1.0 else part[: int(len(part) * fraction)]
            if segment.index >= first_sentence:
                words.extend(heard)
            if fraction < 1.0:
                break
        return " ".join(words)

    def starting(self, segment: Segment) -> str:
        """The words that start playing with `segment` and were not shown yet: its whole sentence (a
        cascade's segment is one sentence). A speech-to-speech item's words are spread over many
        segments: the words placed on this segment and the earlier ones of its item, carried on to
        the end of their sentence as far as the provider's transcript has come."""
        index = segment.index
        words = (self.sentences[index] if index < len(self.sentences) else segment.text).split()
        due = 0
        for earlier in self.segments:
            if earlier.index == index and earlier.text:
                due += earlier.text.count(" ") + 1  # placed words are joined by single spaces
            if earlier is segment:
                break
        shown = self.shown.get(index, 0)
        if min(due, len(words)) <= shown:
            return ""
        end = next((n + 1 for n in range(due - 1, len(words)) if SENTENCE_END.search(words[n])), len(words))
        self.shown[index] = end
        return " ".join(words[shown:end])

    def heard_seconds(self, now: float) -> float:
        """How long the listener has been hearing it by `now` (0 before its first audio plays)."""
        start = self.segments[0].play_start if self.segments else None
        return max(0.0, now - start) if start is not None else 0.0

    def interruptible(self, now: float) -> bool:
        if self.locked == 0:
            return True
        if len(self.segments) < self.locked:
            return False
        last = self.segments[self.locked - 1]
        return last.play_start is not None and now >= last.play_start + last.duration
