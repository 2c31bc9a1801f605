"""Voice activity detection with Silero VAD, run directly on onnxruntime from the model file that the
`silero-vad` package ships (no torch, no download).

One inference session is shared by every conversation of the process (onnxruntime sessions are safe
to run from several threads); each detector keeps its own recurrent state and 64-sample context. A
32 ms window (512 samples at 16 kHz) takes well under a millisecond.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from django.conf import settings

from realtime.engine.audio import IN_RATE

WINDOW = 512  # samples per decision (32 ms)
CONTEXT = 64  # samples of the previous window the model sees again
WINDOW_MS = WINDOW * 1000 // IN_RATE

START_THRESHOLD = 0.5  # speech probability that starts (or continues) speech
END_THRESHOLD = 0.35  # below this, a window counts as silence
MIN_SPEECH_MS = 64  # consecutive speech needed before a start is reported
MAX_SPEECH_MS = 30_000  # an utterance this long is ended even without a pause
# Windows quieter than this (RMS, about -66 dBFS) are silence without asking the model: far below any
# speech, and most of a call is the caller listening. Saves most of the VAD's cost on quiet lines.
QUIET_RMS = 0.0005


class Event(NamedTuple):
    kind: str  # "speech_start" | "pause" | "speech_end"
    at_ms: int  # milliseconds of audio fed to this detector when it happened


_session = None
_session_lock = threading.Lock()


def _model() -> Any:
    global _session
    with _session_lock:
        if _session is None:
            import onnxruntime  # the inference runtime (a model library) loads with the first detector, not the engine

            options = onnxruntime.SessionOptions()
            # Many sessions run at once: one thread per inference is faster than contending pools.
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            _session = onnxruntime.InferenceSession(
                _model_path(), sess_options=options, providers=["CPUExecutionProvider"]
            )
        return _session


def _model_path() -> str:
    """The model file the silero-vad package ships, found without importing the package: its __init__
    imports torch for its PyTorch helpers (about a second of CPU and 200 MB in every process), which
    nothing here uses."""
    spec = importlib.util.find_spec("silero_vad")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the silero-vad package (the voice activity model) is not installed")
    return str(Path(spec.submodule_search_locations[0]) / "data" / "silero_vad.onnx")


def preload() -> None:
    VoiceActivityDetector().feed(b"\x00\x00" * WINDOW)


class VoiceActivityDetector:
    """Feeds PCM16 mono 16 kHz of any length; reports where speech starts and ends.

    With `use_quick_end()` (a listener whose recognizer can tell the words so far) it also reports a
    `pause` when the caller has been silent for VAD_QUICK_END_SILENCE_MS inside an utterance (once
    per pause): the listener ends the turn there (`end_pause`) when the words so far read as finished,
    after VAD_UNSURE_SILENCE_MS when they may be misheard, and otherwise the utterance ends after
    VAD_UNFINISHED_SILENCE_MS of silence. When the words come only after the caller has spoken again
    (a recognizer that lags on a busy machine), the listener can still end the utterance at that pause
    (`split_at_pause`): where a turn ends follows from the audio, not from how soon it was recognized."""

    def __init__(self, *, end_silence_ms: int | None = None) -> None:
        self.end_silence_ms = end_silence_ms if end_silence_ms is not None else settings.VAD_END_SILENCE_MS
        self.pause_ms = 0  # quick end off
        self.pauses = 0  # pauses reported so far (a pause's number identifies it)
        self.speaking = False
        self._session = _model()
        self._state = np.zeros((2, 1, 128), dtype=np.float32)
        self._context = np.zeros(CONTEXT, dtype=np.float32)
        self._sr = np.array(IN_RATE, dtype=np.int64)
        self._pending = b""
        self._position_ms = 0
        self._voiced_ms = 0  # consecutive speech before a start
        self._silent_ms = 0  # consecutive silence while speaking
        self._pause_end_ms = 0  # this pause ends the utterance after this much silence (0: the usual window)
        self._started_at_ms = 0
        # The last pause of this utterance that the caller ended by speaking again:
        # (its number, its length in ms, the position where the caller spoke again).
        self._resumed: tuple[int, int, int] | None = None

    def use_quick_end(self) -> bool:
        """Report pauses (see the class); False when VAD_QUICK_END_SILENCE_MS turns it off."""
        pause_ms, unfinished_ms = settings.VAD_QUICK_END_SILENCE_MS, settings.VAD_UNFINISHED_SILENCE_MS
        if not 0 < pause_ms < unfinished_ms:
            return False
        self.pause_ms, self.end_silence_ms = pause_ms, unfinished_ms
        return True

    def in_pause(self, number: int) -> bool:
        """The caller is still silent in the pause reported as `number` (it has not spoken since)."""
        return self.speaking and self.pauses == number and self.pause_ms > 0 and self._silent_ms >= self.pause_ms

    def end_pause(self, number: int, after_ms: int = 0) -> bool:
        """End the utterance in the pause reported as `number`, once the pause has lasted `after_ms`
        (0: now). True when it ended now; a later end is reported by `feed`. False too when the caller
        has spoken since the pause."""
        if not self.in_pause(number):
            return False
        if self._silent_ms < after_ms:
            self._pause_end_ms = after_ms
            return False
        self.end_now()
        return True

    def split_at_pause(self, number: int, after_ms: int = 0) -> int | None:
        """End the utterance in the pause reported as `number` although the caller has spoken again
        since: the utterance goes on as a new one from where they did. Only when that pause is the last
        one of this utterance, the caller ended it by speaking, and it lasted `after_ms` (at least the
        quick end's pause in any case). The milliseconds of audio since the pause began; None when it
        cannot be split there."""
        resumed = self._resumed
        if not self.speaking or resumed is None or resumed[0] != number or resumed[1] < after_ms:
            return None
        _, pause_ms, resumed_at_ms = resumed
        self._resumed = None
        self._started_at_ms = resumed_at_ms
        return self._position_ms - (resumed_at_ms - pause_ms)

    def end_now(self) -> Event:
        """End the current utterance at once."""
        self.speaking = False
        self._voiced_ms = 0
        self._pause_end_ms = 0
        self._resumed = None
        return Event("speech_end", self._position_ms)

    @property
    def silence_ms(self) -> int:
        """The silence since the caller's last speech in the current (or the just ended) utterance: how
        long the end of turn waited when an utterance ends (turn latency metrics)."""
        return self._silent_ms

    @property
    def current_speech_ms(self) -> int:
        """How long the current utterance has lasted (0 when not speaking)."""
        return self._position_ms - self._started_at_ms if self.speaking else 0

    def probability(self, window: np.ndarray) -> float:
        """Speech probability of one 512-sample window of float samples in [-1, 1]."""
        if float(np.sqrt(np.mean(window * window))) < QUIET_RMS:
            self._context = window[-CONTEXT:]
            return 0.0
        frame = np.concatenate((self._context, window))[np.newaxis, :]
        output, self._state = self._session.run(None, {"input": frame, "state": self._state, "sr": self._sr})
        self._context = window[-CONTEXT:]
        return float(output[0][0])

    def feed(self, pcm16: bytes) -> list[Event]:
        events: list[Event] = []
        data = self._pending + pcm16
        usable = len(data) - len(data) % (WINDOW * 2)
        self._pending = data[usable:]
        if not usable:
            return events
        samples = np.frombuffer(data[:usable], dtype="<i2").astype(np.float32) / 32768.0
        for start in range(0, samples.size, WINDOW):
            probability = self.probability(samples[start : start + WINDOW])
            self._position_ms += WINDOW_MS
            if not self.speaking:
                self._voiced_ms = self._voiced_ms + WINDOW_MS if probability >= START_THRESHOLD else 0
                if self._voiced_ms >= MIN_SPEECH_MS:
                    self.speaking = True
                    self._silent_ms = 0
                    self._started_at_ms = self._position_ms - self._voiced_ms
                    events.append(Event("speech_start", self._started_at_ms))
                continue
            if probability < END_THRESHOLD:
                self._silent_ms += WINDOW_MS
            else:
                if self.pause_ms and self._silent_ms >= self.pause_ms:  # a reported pause, ended by speech
                    self._resumed = (self.pauses, self._silent_ms, self._position_ms - WINDOW_MS)
                self._silent_ms = self._pause_end_ms = 0
            too_long = self._position_ms - self._started_at_ms >= MAX_SPEECH_MS
            if self._silent_ms >= (self._pause_end_ms or self.end_silence_ms) or too_long:
                events.append(self.end_now())
            elif self.pause_ms and self.pause_ms <= self._silent_ms < self.pause_ms + WINDOW_MS:
                self.pauses += 1
                events.append(Event("pause", self._position_ms))
        return events
