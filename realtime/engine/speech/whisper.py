"""Offline speech recognition with Whisper on CTranslate2 (faster-whisper) in this process:
ASR_PROVIDER=whisper (docs/guides/neural-speech.md).

The model is a CTranslate2 conversion of a Whisper model in the directory WHISPER_MODEL_PATH (model.bin,
config.json, tokenizer.json, vocabulary.json or .txt): a path, never a model name, so nothing is ever
downloaded. It is loaded once per process, at int8 on the CPU, when the server starts (`preload`) and
shared by every conversation; WHISPER_MODEL_SHA256, when set, pins its model.bin (checked at load and by
the system check). A problem with the model is a permanent `ProviderError` at the session's start.

Recognition: the cascade's voice activity detector ends each caller turn, so the recognizer keeps the
turn's audio (start/feed) and transcribes it in one go at finish(): decoding at temperature 0 only (no
fallback to sampling, whose retries cost seconds), with WHISPER_BEAM_SIZE beams (5 by default: half the
word errors of greedy decoding for 6% more CPU), without timestamps, not conditioned on earlier text, in
the agent's language (its primary subtag), and at most `token_cap(seconds)` generated tokens per 30 s
window: TOKENS_PER_SECOND per second of audio plus TOKENS_BASE. People say about 2.5 words, some 3.5
tokens, a second; the cap leaves room for fast speech and numbers but stops Whisper's known failure of
repeating a phrase until its 448-token limit (seconds of CPU, and a transcript of nonsense).

No initial prompt by default: the agent's words as a prompt (as the openai provider sends them) made
Whisper base drop the words of the turn that the prompt already held ("Ava, book table" and "Please book
a table for two people on Friday evening." heard as "for two people on Friday evening." in 6 of 8 Piper
renditions; never without the prompt). WHISPER_PROMPT_CHARS > 0 turns it on for vocabularies that need it.

One transcription runs at a time per process (a lock), with WHISPER_CPU_THREADS threads; CTranslate2
releases the GIL, so the event loop keeps running. A failure of a turn is a `ProviderError`: the cascade
apologizes in the offline voice and the call goes on.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings

from kit.providers import ProviderError
from realtime.engine.audio import IN_RATE
from realtime.engine.speech.openai_audio import vocabulary_prompt
from realtime.engine.speech.providers import TurnAudio, sha256_problem

logger = logging.getLogger(__name__)
logging.getLogger("faster_whisper").setLevel(logging.WARNING)  # not a line per turn

MIN_UTTERANCE_SECONDS = 0.1  # shorter audio holds no word
TOKENS_PER_SECOND = 6
TOKENS_BASE = 10
WINDOW_SECONDS = 30  # Whisper's input window: a longer turn is decoded window by window
# Whisper decodes at most 448 tokens, prompt included; faster-whisper caps the initial prompt at 223.
MAX_WINDOW_TOKENS = 448 - 224 - 4
MAX_PROMPT_CHARS = 400  # about 100 tokens: well within the 223 faster-whisper keeps
MODEL_FILES = ("model.bin", "config.json", "tokenizer.json")


def token_cap(seconds: float) -> int:
    """The most tokens Whisper may generate for one window of `seconds` of audio."""
    return min(MAX_WINDOW_TOKENS, math.ceil(TOKENS_PER_SECOND * min(seconds, WINDOW_SECONDS)) + TOKENS_BASE)


def whisper_language(language: str) -> str:
    """The agent's language tag as Whisper's language code ("es-US" -> "es")."""
    return language.split("-", 1)[0].lower()


# --- settings ------------------------------------------------------------------------------------
def configuration_problems(kind: str = "ASR") -> list[str]:
    """What is missing or wrong for ASR_PROVIDER=whisper (empty when it can run)."""
    problems = []
    if importlib.util.find_spec("faster_whisper") is None:
        problems.append("ASR_PROVIDER=whisper needs the faster-whisper package (pinned in requirements.txt)")
    text = settings.WHISPER_MODEL_PATH.strip()
    if not text:
        problems.append(
            "WHISPER_MODEL_PATH is not set (the directory of a CTranslate2 Whisper model such as "
            "Systran/faster-whisper-base: docs/guides/neural-speech.md)"
        )
    else:
        path = Path(text)
        if not path.is_dir():
            problems.append(f"WHISPER_MODEL_PATH {path} is not a directory (a CTranslate2 Whisper model directory)")
        else:
            missing = [name for name in MODEL_FILES if not (path / name).is_file()]
            if missing:
                problems.append(
                    f"WHISPER_MODEL_PATH {path} has no {', '.join(missing)}: not a CTranslate2 Whisper model directory"
                )
            else:
                mismatch = sha256_problem(path / "model.bin", settings.WHISPER_MODEL_SHA256, "WHISPER_MODEL_SHA256")
                if mismatch:
                    problems.append(mismatch)
    if settings.WHISPER_BEAM_SIZE < 1:
        problems.append("WHISPER_BEAM_SIZE must be 1 (greedy decoding) or more")
    if not 0 <= settings.WHISPER_PROMPT_CHARS <= MAX_PROMPT_CHARS:
        problems.append(f"WHISPER_PROMPT_CHARS must be between 0 (no prompt) and {MAX_PROMPT_CHARS}")
    if settings.WHISPER_CPU_THREADS < 0:
        problems.append("WHISPER_CPU_THREADS must be 0 (CTranslate2's default) or more")
    return problems


# --- the model, once per process -----------------------------------------------------------------
@dataclass
class LoadedModel:
    whisper: Any  # faster_whisper.WhisperModel
    lock: threading.Lock  # one transcription at a time
    multilingual: bool
    languages: frozenset[str]


_models: dict[tuple[str, str, int], LoadedModel] = {}
_models_lock = threading.Lock()  # held while a model loads: a second caller waits for it


def model() -> LoadedModel:
    """The process's model for the current settings (loaded on first use; blocking, seconds).
    A permanent ProviderError when the settings or the model are wrong."""
    key = (
        settings.WHISPER_MODEL_PATH.strip(),
        settings.WHISPER_MODEL_SHA256.strip().lower(),
        settings.WHISPER_CPU_THREADS,
    )
    with _models_lock:
        if key not in _models:
            _models[key] = _load(key[0], key[2])
        return _models[key]


def _load(path: str, threads: int) -> LoadedModel:
    problems = configuration_problems()
    if problems:
        raise ProviderError("; ".join(problems), permanent=True)
    from faster_whisper import WhisperModel  # the model library (CTranslate2) loads with the first model

    try:
        whisper = WhisperModel(
            path, device="cpu", compute_type="int8", cpu_threads=threads, num_workers=1, local_files_only=True
        )
    except Exception as exc:  # noqa: BLE001 - CTranslate2 raises RuntimeError, ValueError...
        raise ProviderError(
            f"The Whisper model in WHISPER_MODEL_PATH cannot be loaded: {exc}", permanent=True
        ) from None
    logger.info("Whisper model loaded from %s (int8, %d threads)", path, threads)
    return LoadedModel(
        whisper=whisper,
        lock=threading.Lock(),
        multilingual=bool(whisper.model.is_multilingual),
        languages=frozenset(whisper.supported_languages),
    )


def reset() -> None:
    """Forget the loaded models (tests that change the settings)."""
    with _models_lock:
        _models.clear()


# --- recognition ---------------------------------------------------------------------------------
class WhisperRecognizer(TurnAudio):
    """One conversation's recognizer: the turn's audio is kept while the caller speaks and transcribed
    when the turn ends (finish)."""

    def __init__(self, loaded: LoadedModel, *, language: str, prompt: str = "", beam_size: int = 1) -> None:
        super().__init__()
        self.loaded = loaded
        self.language = language
        self.prompt = prompt
        self.beam_size = beam_size

    def finish(self) -> str:
        """The caller's words ('' when the turn had none); ProviderError when Whisper fails (the audio
        is dropped either way)."""
        pcm = self.take()
        samples = np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768.0
        seconds = samples.size / IN_RATE
        if seconds < MIN_UTTERANCE_SECONDS:
            return ""
        try:
            with self.loaded.lock:
                segments, _ = self.loaded.whisper.transcribe(
                    samples,
                    language=self.language,
                    beam_size=self.beam_size,
                    best_of=1,
                    temperature=0.0,
                    condition_on_previous_text=False,
                    without_timestamps=True,
                    initial_prompt=self.prompt or None,
                    max_new_tokens=token_cap(seconds),
                    vad_filter=False,
                )
                text = " ".join(segment.text for segment in segments)  # decoding happens as this iterates
        except Exception as exc:  # noqa: BLE001 - the cascade expects ProviderError only
            logger.warning("Whisper failed on a turn: %s", type(exc).__name__)
            raise ProviderError(f"Whisper failed on this turn ({type(exc).__name__})") from None
        return " ".join(text.split())


class WhisperRecognition:
    """ASR_PROVIDER=whisper. The settings are checked when the kit is made (the first session); the
    model loads at server start (`preload`) or at the first session."""

    def __init__(self) -> None:
        problems = configuration_problems()
        if problems:
            raise ProviderError("; ".join(problems), permanent=True)

    @staticmethod
    def preload() -> None:
        model()

    def recognizer(self, agent: Any, vocabulary_texts: Iterable[str]) -> WhisperRecognizer:
        loaded = model()
        language = whisper_language(agent.language)
        if language not in loaded.languages:
            kind = "multilingual" if loaded.multilingual else "English-only"
            raise ProviderError(
                f"The Whisper model in WHISPER_MODEL_PATH ({kind}) does not recognize the agent's language "
                f"{agent.language}",
                permanent=True,
            )
        prompt = vocabulary_prompt(agent, vocabulary_texts, settings.WHISPER_PROMPT_CHARS)
        return WhisperRecognizer(loaded, language=language, prompt=prompt, beam_size=settings.WHISPER_BEAM_SIZE)
