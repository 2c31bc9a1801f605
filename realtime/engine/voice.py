"""Voice engines, chosen per deployment by settings.VOICE_ENGINE, in one registry.

A voice engine is a `VoicePipeline` class (realtime/engine/session/shell.py) that the session shell runs:
`embedded` is the offline cascade (realtime/engine/cascade/pipeline.py: Silero VAD -> PocketSphinx -> brain ->
eSpeak NG); `realtime` is a speech-to-speech provider speaking the OpenAI Realtime protocol
(realtime/engine/speech_to_speech/pipeline.py), which needs REALTIME_PROVIDER_URL and REALTIME_PROVIDER_MODEL:
without them sessions are refused with a clear error (and `manage.py check` names them).

The cascade's speech parts (detector, recognizer, synthesizer) come as a `VoiceKit`; their heavy
models are shared per process and loaded once (`ensure_preloaded`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from django.conf import settings

from kit.providers import ProviderError, Registry

logger = logging.getLogger(__name__)


class EngineUnavailable(ProviderError):
    """The configured voice engine or brain cannot run in this deployment (permanent)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, permanent=True)


class Detector(Protocol):
    speaking: bool
    current_speech_ms: int

    def feed(self, pcm16_16k: bytes) -> list[Any]: ...


class Recognizer(Protocol):
    """start(), feed() while the caller speaks, finish() -> the turn's words. A recognizer that can
    tell the words so far without ending the utterance also has `peek() -> str`: the cascade then
    ends turns that read as finished after VAD_QUICK_END_SILENCE_MS (realtime/engine/cascade/turn_taking.py)."""

    def start(self) -> None: ...
    def feed(self, pcm16_16k: bytes) -> None: ...
    def finish(self) -> str: ...


class Mixer(Protocol):
    has_bed: bool

    def next_frame(self, speech: bytes | None, *, user_speaking: bool, keyboard: bool) -> bytes: ...


@dataclass(frozen=True)
class VoiceKit:
    """The cascade's speech parts for one conversation; the models behind them are shared per process."""

    name: str
    preload: Callable[[], None]
    detector: Callable[[], Detector]
    recognizer: Callable[[Any, Iterable[str]], Recognizer | None]  # (agent, vocabulary texts)
    synthesize: Callable[[str, str, str], bytes]  # (text, language, voice name) -> PCM16 24 kHz
    split_sentences: Callable[[str], list[str]]
    # The offline voice (eSpeak NG) when `synthesize` is a provider's: the cascade speaks with it when
    # the provider fails (apologies, and sentences the provider could not say). None: `synthesize` is it.
    offline_synthesize: Callable[[str, str, str], bytes] | None = None


def _embedded_kit() -> VoiceKit:
    from realtime.engine.speech import asr, tts, vad

    def preload() -> None:
        vad.preload()
        asr.preload()
        tts.preload()

    return VoiceKit(
        name="embedded",
        preload=preload,
        detector=lambda: vad.VoiceActivityDetector(),
        recognizer=lambda agent, texts: asr.recognizer_for_agent(agent, vocabulary_texts=texts),
        synthesize=lambda text, language, voice: tts.synthesize(text, language=language, voice_name=voice),
        split_sentences=tts.split_sentences,
    )


def _speech_kit(asr_provider: str, tts_provider: str) -> VoiceKit:
    """The embedded kit with a provider's recognizer and/or voice (settings ASR_PROVIDER, TTS_PROVIDER);
    voice activity detection and the offline voice stay embedded. ProviderError when a provider's
    settings are incomplete."""
    from realtime.engine.speech import asr, providers, tts, vad

    kit = _embedded_kit()
    if asr_provider == tts_provider == providers.EMBEDDED:
        return kit
    recognizer = kit.recognizer
    chosen: list[Any] = []  # the providers: the models of those that have them preload with the kit
    if asr_provider != providers.EMBEDDED:
        chosen.append(providers.recognition_provider(asr_provider))
        recognizer = chosen[-1].recognizer
    synthesize, offline = kit.synthesize, None
    if tts_provider != providers.EMBEDDED:
        chosen.append(providers.synthesis_provider(tts_provider))
        synthesize, offline = chosen[-1].synthesize, kit.synthesize

    def preload() -> None:
        vad.preload()
        if asr_provider == providers.EMBEDDED:
            asr.preload()  # a provider's recognizer needs no PocketSphinx workers
        tts.preload()  # the offline voice speaks whenever a provider fails
        for provider in chosen:
            if hasattr(provider, "preload"):
                provider.preload()  # the models of the in-process providers (whisper, piper)

    return VoiceKit(
        name=f"asr={asr_provider},tts={tts_provider}",
        preload=preload,
        detector=kit.detector,
        recognizer=recognizer,
        synthesize=synthesize,
        split_sentences=kit.split_sentences,
        offline_synthesize=offline,
    )


def speech_problems() -> list[str]:
    """Why the configured speech providers of the cascade cannot run, empty when fine."""
    if settings.VOICE_ENGINE != "embedded":
        return []
    from realtime.engine.speech.providers import configuration_problems as provider_problems

    return provider_problems(settings.ASR_PROVIDER, settings.TTS_PROVIDER)


VOICE_ENGINES = Registry(
    "voice engine",
    {
        "embedded": "realtime.engine.cascade.pipeline:CascadePipeline",
        "realtime": "realtime.engine.speech_to_speech.pipeline:RealtimePipeline",
    },
)

# Engines this version knows but cannot run, with the reason given to the operator.
UNAVAILABLE_ENGINES: dict[str, str] = {}
# Settings an engine cannot run without (checked before a session opens a call record).
REQUIRED_SETTINGS = {"realtime": ("REALTIME_PROVIDER_URL", "REALTIME_PROVIDER_MODEL")}


def _missing_settings(name: str) -> list[str]:
    return [setting for setting in REQUIRED_SETTINGS.get(name, ()) if not str(getattr(settings, setting, "")).strip()]


def pipeline_class(name: str | None = None) -> Any:
    """The configured voice engine's pipeline class (imports it on first use: call it off the loop)."""
    name = name or settings.VOICE_ENGINE
    if name in UNAVAILABLE_ENGINES:
        raise EngineUnavailable(f"VOICE_ENGINE={name} is not available in this version: {UNAVAILABLE_ENGINES[name]}")
    if name not in VOICE_ENGINES:
        raise EngineUnavailable(f"Unknown VOICE_ENGINE {name!r}")
    missing = _missing_settings(name)
    if missing:
        raise EngineUnavailable(f"VOICE_ENGINE={name} needs {' and '.join(missing)} to be set")
    return VOICE_ENGINES.get(name)


_kits: dict[tuple[str, str], VoiceKit] = {}
_preloaded: set[str] = set()
_kit_lock = threading.Lock()
_preload_lock = threading.Lock()  # held for seconds while models load: never from the event loop


def voice_kit() -> VoiceKit:
    """The cascade's speech parts as configured (ASR_PROVIDER, TTS_PROVIDER; the first use imports the
    speech libraries: off the loop)."""
    key = (settings.ASR_PROVIDER, settings.TTS_PROVIDER)
    with _kit_lock:
        if key not in _kits:
            _kits[key] = _speech_kit(*key)
        return _kits[key]


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
        pipeline = pipeline_class()
    except EngineUnavailable as exc:
        logger.error("%s", exc)
        return None
    except ImportError:
        logger.exception("the voice engine cannot be imported")
        return None

    def run() -> None:
        try:
            from realtime.engine.sound import mixer

            mixer.preload()
            pipeline.preload()
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
    from realtime.engine.brain import brain_problems

    problems = []
    if settings.VOICE_ENGINE not in VOICE_ENGINES:
        reason = UNAVAILABLE_ENGINES.get(settings.VOICE_ENGINE, "unknown engine")
        problems.append(f"VOICE_ENGINE={settings.VOICE_ENGINE} is not available in this version: {reason}")
    missing = _missing_settings(settings.VOICE_ENGINE)
    if missing:
        problems.append(f"VOICE_ENGINE={settings.VOICE_ENGINE} needs {' and '.join(missing)} to be set")
    if settings.VOICE_ENGINE == "realtime":
        # The cascade's brain is not used: the provider's model answers.
        from realtime.engine.speech_to_speech.pipeline import configuration_problems as provider_problems

        return problems + [problem for problem in provider_problems() if problem not in problems]
    return problems + brain_problems() + speech_problems()
