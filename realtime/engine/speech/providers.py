"""Speech providers of the cascade, chosen per deployment by settings.ASR_PROVIDER and TTS_PROVIDER.

`embedded` is the offline pair (PocketSphinx in worker processes, eSpeak NG); other names are
adapters registered here and imported on first use: `openai` (an OpenAI-compatible audio server),
`whisper` and `piper` (offline neural models in this process, docs/guides/neural-speech.md). A recognition
provider makes one recognizer per conversation (start/feed/finish, realtime/engine/cascade/kit.py
`Recognizer`); a synthesis provider turns a sentence into PCM16 mono 24 kHz. Both are blocking (the
cascade runs them off the event loop) and raise `ProviderError` for their own failures: the cascade
then speaks with the offline voice (realtime/engine/cascade/pipeline.py), so a provider failure never ends a
call.

A provider module may define `configuration_problems()` (the system check reports them); a provider
may have a `preload()` that loads its models (called at server start, realtime/engine/cascade/kit.py).
Model files named by a setting can be pinned by their sha256 (`sha256_problem`).
"""

from __future__ import annotations

import hashlib
import re
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from kit.providers import Registry
from realtime.engine.audio import IN_BYTES_PER_SECOND

EMBEDDED = "embedded"

RECOGNITION_PROVIDERS = Registry(
    "speech recognition provider",
    {
        "openai": "realtime.engine.speech.openai_audio:OpenAITranscription",
        "whisper": "realtime.engine.speech.whisper:WhisperRecognition",
    },
)
SYNTHESIS_PROVIDERS = Registry(
    "speech synthesis provider",
    {
        "openai": "realtime.engine.speech.openai_audio:OpenAISpeech",
        "piper": "realtime.engine.speech.piper:PiperSpeech",
    },
)


MAX_UTTERANCE_SECONDS = 120  # a longer turn is cut there (OpenAI's API takes files up to 25 MB)


class TurnAudio:
    """The part of a provider's recognizer that hears each caller turn whole: keeps the turn's audio
    while the caller speaks (start, feed; up to MAX_UTTERANCE_SECONDS) and hands it over once at the
    turn's end (`take`, for the provider's `finish`)."""

    def __init__(self) -> None:
        self._audio = bytearray()

    def start(self) -> None:
        self._audio.clear()

    def feed(self, pcm16_16k: bytes) -> None:
        room = MAX_UTTERANCE_SECONDS * IN_BYTES_PER_SECOND - len(self._audio)
        if room > 0:
            self._audio += pcm16_16k[:room]

    def take(self) -> bytes:
        """The turn's audio (whole samples), forgotten here."""
        audio = bytes(self._audio[: len(self._audio) - len(self._audio) % 2])
        self._audio.clear()
        return audio


class RecognitionProvider(Protocol):
    def recognizer(self, agent: Any, vocabulary_texts: Iterable[str]) -> Any: ...


class SynthesisProvider(Protocol):
    def synthesize(self, text: str, language: str, voice_name: str) -> bytes: ...


def recognition_provider(name: str) -> RecognitionProvider:
    provider: RecognitionProvider = RECOGNITION_PROVIDERS.get(name)()
    return provider


def synthesis_provider(name: str) -> SynthesisProvider:
    provider: SynthesisProvider = SYNTHESIS_PROVIDERS.get(name)()
    return provider


def configuration_problems(asr: str, tts: str) -> list[str]:
    """Why the configured speech providers cannot run (for the system check), empty when fine."""
    problems: list[str] = []
    for setting, name, registry in (
        ("ASR_PROVIDER", asr, RECOGNITION_PROVIDERS),
        ("TTS_PROVIDER", tts, SYNTHESIS_PROVIDERS),
    ):
        if name == EMBEDDED:
            continue
        if name not in registry:
            problems.append(f"{setting}={name} is unknown; use embedded or {', '.join(registry.names)}")
            continue
        try:
            module = registry.get(name).__module__
        except ImportError as exc:
            problems.append(f"{setting}={name} cannot be imported: {exc}")
            continue
        check = getattr(sys.modules[module], "configuration_problems", None)
        if check is not None:
            problems += [problem for problem in check(setting[:3]) if problem not in problems]
    return problems


# --- model files pinned by their sha256 ----------------------------------------------------------
_SHA256 = re.compile(r"[0-9a-f]{64}")
_digests: dict[tuple[str, int, int], str] = {}
_digests_lock = threading.Lock()


def file_sha256(path: Path) -> str:
    """The file's sha256 (hex), computed once per process for a given path, size and modification time
    (the system check and the model load both ask)."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    with _digests_lock:
        if key not in _digests:
            with path.open("rb") as source:
                _digests[key] = hashlib.file_digest(source, "sha256").hexdigest()
        return _digests[key]


def sha256_problem(path: Path, expected: str, setting: str) -> str | None:
    """Why the file at `path` is not the one the `setting` (a sha256 in hex) pins; None when it is, or
    when the setting is empty (nothing pinned)."""
    expected = expected.strip().lower()
    if not expected:
        return None
    if not _SHA256.fullmatch(expected):
        return f"{setting} must be a sha256: 64 hexadecimal digits"
    actual = file_sha256(path)
    if actual != expected:
        return f"{path} does not match {setting}: its sha256 is {actual}, {setting} is {expected}"
    return None
