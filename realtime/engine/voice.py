"""Voice engines, chosen per deployment by settings.VOICE_ENGINE, behind one small interface.

`embedded` is the offline engine (Silero VAD, PocketSphinx, eSpeak NG and the mixer, built in
realtime/engine/speech and realtime/engine/sound). `realtime` (a speech-to-speech provider speaking
the OpenAI Realtime protocol) is not available yet: selecting it refuses sessions with a clear error.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from django.conf import settings

logger = logging.getLogger(__name__)


class EngineUnavailable(Exception):
    """The configured voice engine or brain cannot run in this deployment (permanent)."""


class Detector(Protocol):
    speaking: bool
    current_speech_ms: int

    def feed(self, pcm16_16k: bytes) -> list[Any]: ...


class Recognizer(Protocol):
    def start(self) -> None: ...
    def feed(self, pcm16_16k: bytes) -> None: ...
    def finish(self) -> str: ...


class Mixer(Protocol):
    has_bed: bool

    def next_frame(self, speech: bytes | None, *, user_speaking: bool, keyboard: bool) -> bytes: ...


@dataclass(frozen=True)
class VoiceKit:
    """The parts one conversation uses; the heavy models behind them are shared per process."""

    name: str
    preload: Callable[[], None]
    detector: Callable[[], Detector]
    recognizer: Callable[[Any, Iterable[str]], Recognizer | None]  # (agent, vocabulary texts)
    synthesize: Callable[[str, str, str], bytes]  # (text, language, voice name) -> PCM16 24 kHz
    split_sentences: Callable[[str], list[str]]
    mixer: Callable[[str | None, float, bool], Mixer]  # (ambient, volume, ducking)


def _embedded() -> VoiceKit:
    from realtime.engine.sound import mixer
    from realtime.engine.speech import asr, tts, vad

    def preload() -> None:
        vad.preload()
        asr.preload()
        tts.preload()
        mixer.preload()

    return VoiceKit(
        name="embedded",
        preload=preload,
        detector=lambda: vad.VoiceActivityDetector(),
        recognizer=lambda agent, texts: asr.recognizer_for_agent(agent, vocabulary_texts=texts),
        synthesize=lambda text, language, voice: tts.synthesize(text, language=language, voice_name=voice),
        split_sentences=tts.split_sentences,
        mixer=lambda ambient, volume, ducking: mixer.Mixer(ambient=ambient, volume=volume, ducking=ducking),
    )


# Engines this version knows but cannot run, with the reason given to the operator.
UNAVAILABLE_ENGINES = {
    "realtime": "the speech-to-speech provider arrives in a later release; use embedded",
}

VOICE_ENGINES: dict[str, Callable[[], VoiceKit]] = {
    "embedded": _embedded,
}


_kits: dict[str, VoiceKit] = {}
_preloaded: set[str] = set()
_kits_lock = threading.Lock()
_preload_lock = threading.Lock()  # held for seconds while models load: never from the event loop


def voice_kit(name: str | None = None) -> VoiceKit:
    """The configured engine's kit (its first use imports the speech libraries: call it off the loop)."""
    name = name or settings.VOICE_ENGINE
    if name in UNAVAILABLE_ENGINES:
        raise EngineUnavailable(f"VOICE_ENGINE={name} is not available in this version: {UNAVAILABLE_ENGINES[name]}")
    factory = VOICE_ENGINES.get(name)
    if factory is None:
        raise EngineUnavailable(f"Unknown VOICE_ENGINE {name!r}")
    with _kits_lock:
        if name not in _kits:
            _kits[name] = factory()
        return _kits[name]


def ensure_preloaded(kit: VoiceKit) -> bool:
    """Load the kit's models once per process (blocking; call from a worker thread). True when this
    call did the loading."""
    with _preload_lock:
        if kit.name in _preloaded:
            return False
        kit.preload()
        _preloaded.add(kit.name)
        return True


def preload_in_background() -> threading.Thread | None:
    """Warm the configured engine at server start, so that the first session does not wait for it."""
    try:
        kit = voice_kit()
    except EngineUnavailable as exc:
        logger.error("%s", exc)
        return None
    except ImportError:
        logger.exception("the voice engine cannot be imported")
        return None

    def run() -> None:
        try:
            ensure_preloaded(kit)
        except Exception:
            logger.exception("voice engine preload failed; sessions will retry")
        try:
            from knowledge.embeddings import session

            session()  # the search_knowledge tool's model (exported on the first start of a machine)
        except Exception:
            logger.exception("knowledge embedding model preload failed; the first search will retry")

    thread = threading.Thread(target=run, name="voice-preload", daemon=True)
    thread.start()
    return thread


def configuration_problems() -> list[str]:
    """Why the configured voice engine or brain cannot run (for the system check), empty when fine."""
    from realtime.engine.brain import AVAILABLE_BRAINS

    problems = []
    if settings.VOICE_ENGINE not in VOICE_ENGINES:
        reason = UNAVAILABLE_ENGINES.get(settings.VOICE_ENGINE, "unknown engine")
        problems.append(f"VOICE_ENGINE={settings.VOICE_ENGINE} is not available in this version: {reason}")
    if settings.LLM_PROVIDER not in AVAILABLE_BRAINS:
        problems.append(f"LLM_PROVIDER={settings.LLM_PROVIDER} is not available in this version; use embedded")
    return problems
