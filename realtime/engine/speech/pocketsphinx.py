"""Offline speech recognition with PocketSphinx (its wheel ships the US-English acoustic model).

Each agent gets its own small language model (language_model.py); the general English model of the
wheel is only the fallback when that build fails. A recognizer is fed while the caller speaks, so
that little work is left when the turn ends.

PocketSphinx holds the GIL while it decodes, so in a server the decoders run in worker processes
(pocketsphinx_workers.py, `ASR_WORKERS` per server process); `ASR_WORKERS=0` decodes in the server process.
The decoder itself (one conversation's `Recognizer`) is in decoder.py, which both use.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any

from django.conf import settings

from realtime.engine.audio import IN_BYTES_PER_MS
from realtime.engine.speech import language_model, pocketsphinx_workers
from realtime.engine.speech.decoder import Recognizer
from realtime.engine.speech.language_model import LanguageModel
from realtime.engine.speech.pocketsphinx_workers import RemoteRecognizer

logger = logging.getLogger(__name__)

LANGUAGES = ("en",)  # languages with an offline model (by the agent language's primary subtag)


def supported(language: str) -> bool:
    return language.split("-", 1)[0].lower() in LANGUAGES


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
    return RemoteRecognizer(pocketsphinx_workers.pool(workers), model) if workers > 0 else Recognizer(model)


_preloaded = threading.Event()


def preload() -> None:
    """Read the pronunciation dictionary and the general corpus, start the worker processes and warm
    the acoustic model files."""
    if _preloaded.is_set():
        return
    language_model.known_words()
    language_model.general_lines()
    if settings.ASR_WORKERS > 0:
        pocketsphinx_workers.pool(settings.ASR_WORKERS).start()
    recognizer = _recognizer(language_model.language_model([], []), settings.ASR_WORKERS)
    recognizer.start()
    recognizer.feed(bytes(100 * IN_BYTES_PER_MS))
    recognizer.finish()
    _preloaded.set()
