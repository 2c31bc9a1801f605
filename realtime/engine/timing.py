"""A caller turn's way through the engine, timed on the engine's clock (realtime/engine/clock.py):
the stages behind the turn latency metrics (kit.metrics) and each call's stored `latency`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TurnTiming:
    """When a caller turn went through each stage (engine clock times; None: not known for this engine
    or turn). The turn is measured when its answer's first audio goes to the playout."""

    turn_ended_at: float  # the turn was taken (the end of turn decided)
    speech_ended_at: float | None = None  # the caller's last speech (VAD), before the end-of-turn wait
    recognized_at: float | None = None  # the turn's words are known
    first_token_at: float | None = None  # the model's first output (text, a tool call, or audio)
    first_audio_at: float | None = None  # the answer's first audio byte handed to the playout

    def first_token(self, now: float) -> None:
        if self.first_token_at is None:
            self.first_token_at = now

    def stages_ms(self) -> dict[str, float | None]:
        """Each stage's duration (metrics.TURN_STAGES): each starts where the one before it ended."""

        def ms(start: float | None, end: float | None) -> float | None:
            return None if start is None or end is None else max(0.0, (end - start) * 1000)

        heard = self.recognized_at if self.recognized_at is not None else self.turn_ended_at
        answered = self.first_token_at if self.first_token_at is not None else heard
        began = self.speech_ended_at if self.speech_ended_at is not None else self.turn_ended_at
        return {
            "end_of_turn": ms(self.speech_ended_at, self.turn_ended_at),
            "recognition": ms(self.turn_ended_at, self.recognized_at),
            "first_token": ms(heard, self.first_token_at),
            "first_audio": ms(answered, self.first_audio_at),
            "total": ms(began, self.first_audio_at),
        }
