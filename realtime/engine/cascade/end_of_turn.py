"""Has the caller finished? The reading of a pause in the caller's speech, by one of two detectors
(setting TURN_END_DETECTOR; docs/guides/conversation.md "How turns end"):

  - `words`: the words recognized at the pause, read by realtime/engine/cascade/turn_taking.py (a last
    word that announces more keeps the turn open);
  - `smart-turn`: Smart Turn v3 (pipecat-ai, BSD-2), a Whisper-encoder model of the audio itself (the
    words and the voice's melody), on the last 8 s of the utterance: the probability that the caller has
    finished, read as finished above 0.5.

Both read at the same pause (VAD_QUICK_END_SILENCE_MS of silence) and their answers act the same way
(realtime/engine/cascade/pipeline.py `_paused`). bench/end_of_turn.py measures both on a labelled set.

The Smart Turn model is a file extracted from the pipecat-ai wheel at install time (`make setup`, into
SMART_TURN_MODEL_PATH, its licence beside it); it is never fetched at run time: a missing file is a
configuration problem (`manage.py check`, and sessions are refused), not a download.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Container, Iterable
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings

from realtime.engine.cascade.listener import RecognizerJob
from realtime.engine.cascade.turn_taking import FINISHED, UNFINISHED, reading

WORDS, SMART_TURN = "words", "smart-turn"
SAMPLE_RATE = 16000
WINDOW_SECONDS = 8  # the model hears the last 8 s, padded with silence at the start
THRESHOLD = 0.5  # above: finished (as pipecat reads it)
_WINDOW_BYTES = WINDOW_SECONDS * SAMPLE_RATE * 2


def model_path() -> Path:
    return Path(settings.SMART_TURN_MODEL_PATH)


def configuration_problems() -> list[str]:
    """What is missing for TURN_END_DETECTOR=smart-turn (empty when it can run, or is not chosen)."""
    if settings.TURN_END_DETECTOR != SMART_TURN:
        return []
    path = model_path()
    if not path.is_file():
        return [
            f"TURN_END_DETECTOR=smart-turn needs the Smart Turn model at SMART_TURN_MODEL_PATH ({path}): "
            "`make setup` extracts it from the pinned pipecat-ai wheel (it is never fetched at run time)"
        ]
    return []


class SmartTurn:
    """Smart Turn v3 on the CPU: the model loads once per process, on first use (blocking: off the
    event loop), from the local file only."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._session: Any = None
        self._features: Any = None

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._session is None:
                if not self.path.is_file():
                    raise FileNotFoundError(
                        f"no Smart Turn model at {self.path} (`make setup` extracts it; it is never downloaded)"
                    )
                import onnxruntime
                from transformers import WhisperFeatureExtractor

                options = onnxruntime.SessionOptions()
                options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
                options.inter_op_num_threads = options.intra_op_num_threads = 1
                options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
                # Built from its constructor's arguments: no configuration is read from a hub.
                self._features = WhisperFeatureExtractor(chunk_length=WINDOW_SECONDS)
                self._session = onnxruntime.InferenceSession(
                    str(self.path), sess_options=options, providers=["CPUExecutionProvider"]
                )
            return self._session, self._features

    def complete(self, pcm16_16k: bytes) -> float:
        """The probability that the caller has finished, from the utterance's audio so far (PCM16
        mono 16 kHz; its last 8 s count). Blocking (tens of milliseconds): off the event loop."""
        session, features = self._load()
        audio = np.frombuffer(pcm16_16k[-_WINDOW_BYTES:], dtype="<i2").astype(np.float32) / 32768.0
        audio = np.pad(audio, (WINDOW_SECONDS * SAMPLE_RATE - audio.size, 0))  # silence before, as trained
        mel = features(
            audio,
            sampling_rate=SAMPLE_RATE,
            return_tensors="np",
            padding="max_length",
            max_length=WINDOW_SECONDS * SAMPLE_RATE,
            truncation=True,
            do_normalize=True,
        ).input_features.astype(np.float32)
        (probability,) = session.run(None, {"input_features": mel})[0].reshape(-1)[:1]
        return float(probability)


_models: dict[Path, SmartTurn] = {}
_models_lock = threading.Lock()


def smart_turn() -> SmartTurn:
    """The process's model for SMART_TURN_MODEL_PATH (not loaded until used)."""
    path = model_path()
    with _models_lock:
        if path not in _models:
            _models[path] = SmartTurn(path)
        return _models[path]


def preload() -> None:
    """Load the model now when TURN_END_DETECTOR=smart-turn (blocking: with the kit's other models), so
    that the first pause of the first call does not wait for it."""
    if settings.TURN_END_DETECTOR == SMART_TURN:
        smart_turn().complete(bytes(SAMPLE_RATE // 5 * 2))


class TurnEnd:
    """One conversation's detector: keeps the current utterance's audio (its last 8 s) when the model
    needs it, and reads a pause as FINISHED, UNSURE or UNFINISHED (turn_taking.py)."""

    def __init__(self, language: str, known_pairs: Container[tuple[str, str]] | None, detector: str = "") -> None:
        self.detector = detector or settings.TURN_END_DETECTOR
        self.language = language
        self.known_pairs = known_pairs
        self._audio = bytearray()

    def hear(self, jobs: Iterable[tuple[RecognizerJob, bytes]]) -> None:
        """The recognizer's jobs, in order (cheap): START begins a new utterance."""
        if self.detector != SMART_TURN:
            return
        for kind, audio in jobs:
            if kind is RecognizerJob.START:
                self._audio.clear()
            self._audio += audio
        del self._audio[:-_WINDOW_BYTES]

    async def read(self, words: str, run_blocking: Callable[..., Awaitable[Any]]) -> str:
        """How the pause reads: by the words, or by the model (off the loop with `run_blocking`)."""
        if self.detector != SMART_TURN:
            return reading(words, self.language, self.known_pairs)
        probability = float(await run_blocking(smart_turn().complete, bytes(self._audio)))
        return FINISHED if probability > THRESHOLD else UNFINISHED


__all__ = ["SMART_TURN", "WORDS", "SmartTurn", "TurnEnd", "configuration_problems", "preload", "smart_turn"]
