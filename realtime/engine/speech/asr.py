"""Offline speech recognition with PocketSphinx (its wheel ships the US-English acoustic model).

Each agent gets its own small language model (language_model.py); the general English model of the
wheel is only the fallback when that build fails. A recognizer is fed while the caller speaks, so
that little work is left when the turn ends.

PocketSphinx holds the GIL while it decodes, so in a server the decoders run in worker processes
(asr_workers.py, `ASR_WORKERS` per server process); `ASR_WORKERS=0` decodes in the server process.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from typing import Any

from django.conf import settings

from realtime.engine.audio import IN_BYTES_PER_MS
from realtime.engine.speech import asr_workers, language_model
from realtime.engine.speech.asr_workers import RemoteRecognizer
from realtime.engine.speech.language_model import LanguageModel

logger = logging.getLogger(__name__)

SLICE_BYTES = 100 * IN_BYTES_PER_MS  # 100 ms of PCM16
# PocketSphinx normalizes features with a running cepstral mean that starts from a generic value and
# is updated at the end of an utterance: the first words of a conversation are decoded with a mean
# that fits nobody (about half the words wrong, against a third once adapted). So the first audio of
# a conversation is decoded twice: once up to 2.5 s (or the first pause of the quick end of turn, or
# the end of the first utterance), which adapts the mean to this caller, then again from the start of
# the utterance. (1.0 s recognized worse, 61% word errors against 46% on 50 eSpeak NG turns in five
# voices; 1.5 s about as well, 48%, but changed which words were misheard in later turns.)
WARMUP_BYTES = 2500 * IN_BYTES_PER_MS  # 2.5 s
LANGUAGES = ("en",)  # languages with an offline model (by the agent language's primary subtag)


def supported(language: str) -> bool:
    return language.split("-", 1)[0].lower() in LANGUAGES


def _acoustic_model() -> str:
    from pocketsphinx import get_model_path

    return os.path.join(get_model_path(), "en-us", "en-us")


def _decoder(model: LanguageModel | None) -> Any:
    from pocketsphinx import Decoder

    options: dict[str, Any] = {"hmm": _acoustic_model(), "loglevel": "FATAL", "fwdflat": False}
    if model is not None:
        options.update(lm=model.lm, dict=model.dict)
    # fwdflat=False: the second pass costs ~50 ms at the end of every utterance for no gain here.
    return Decoder(**options)


class Recognizer:
    """One conversation's recognizer: start(), feed() while the caller speaks, finish() -> text."""

    def __init__(self, model: LanguageModel | None) -> None:
        self.model = model
        self._decoder = _decoder(model)
        self._pending = b""
        self._active = False
        self._warm = False  # the cepstral mean has adapted to this caller
        self._cold_audio: list[bytes] = []  # the current utterance, while not warm
        self._cold_bytes = 0

    def start(self) -> None:
        if self._active:
            self._decoder.end_utt()
        self._decoder.start_utt()
        self._pending = b""
        self._cold_audio, self._cold_bytes = [], 0
        self._active = True

    def _decode(self, pcm: bytes) -> None:
        for offset in range(0, len(pcm), SLICE_BYTES):
            self._decoder.process_raw(pcm[offset : offset + SLICE_BYTES], False, False)

    def _redecode(self) -> None:
        """End the utterance (which updates the cepstral mean) and decode it again from its start."""
        self._decoder.end_utt()
        self._decoder.start_utt()
        self._decode(b"".join(self._cold_audio))
        self._cold_audio, self._cold_bytes = [], 0
        self._warm = True

    def feed(self, pcm16_16k: bytes) -> None:
        if not self._active:
            self.start()
        data = self._pending + pcm16_16k
        usable = len(data) - len(data) % 2
        self._pending = data[usable:]
        data = data[:usable]
        self._decode(data)
        if not self._warm:
            self._cold_audio.append(data)
            self._cold_bytes += len(data)
            if self._cold_bytes >= WARMUP_BYTES:
                self._redecode()

    def known_word_pairs(self) -> frozenset[tuple[str, str]] | None:
        """The word pairs of this recognizer's language model (None: the general model)."""
        return language_model.word_pairs(self.model)

    def peek(self) -> str:
        """The words so far, the utterance going on (a caller's pause: has the turn ended?)."""
        if not self._active:
            return ""
        if not self._warm and self._cold_bytes:
            self._redecode()
        return self._words()

    def finish(self) -> str:
        """The words of the utterance ('' when nothing was recognized)."""
        if not self._active:
            return ""
        if not self._warm and self._cold_bytes:
            self._redecode()
        self._active = False
        self._decoder.end_utt()
        return self._words()

    def _words(self) -> str:
        hypothesis = self._decoder.hyp()
        text = hypothesis.hypstr if hypothesis is not None else ""
        return " ".join(word for word in text.split() if not word.startswith(("<", "[", "++")))


def agent_texts(agent: Any) -> list[str]:
    """The agent's own words a caller may repeat."""
    return [
        text
        for text in (agent.name, agent.identity, agent.instructions, agent.static_greeting or "")
        if text and text.strip()
    ]


def recognizer_for_agent(
    agent: Any, *, vocabulary_texts: Iterable[str] = (), workers: int | None = None
) -> Recognizer | RemoteRecognizer | None:
    """A recognizer with the agent's language model (built or taken from the cache), decoding in a
    worker process unless `workers` (default: settings.ASR_WORKERS) is 0; None when the agent's
    language has no offline model."""
    if not supported(agent.language):
        return None
    try:
        model = language_model.language_model(agent_texts(agent), vocabulary_texts)
    except Exception:
        logger.exception("the agent's language model could not be built; using the general model")
        model = None
    return _recognizer(model, settings.ASR_WORKERS if workers is None else workers)


def _recognizer(model: LanguageModel | None, workers: int) -> Recognizer | RemoteRecognizer:
    """In a worker process of the pool when `workers` > 0, else in this process."""
    return RemoteRecognizer(asr_workers.pool(workers), model) if workers > 0 else Recognizer(model)


_preloaded = threading.Event()


def preload() -> None:
    """Read the pronunciation dictionary and the general corpus, start the worker processes and warm
    the acoustic model files."""
    if _preloaded.is_set():
        return
    language_model.known_words()
    language_model.general_lines()
    if settings.ASR_WORKERS > 0:
        asr_workers.pool(settings.ASR_WORKERS).start()
    recognizer = _recognizer(language_model.language_model([], []), settings.ASR_WORKERS)
    recognizer.start()
    recognizer.feed(bytes(100 * IN_BYTES_PER_MS))
    recognizer.finish()
    _preloaded.set()
