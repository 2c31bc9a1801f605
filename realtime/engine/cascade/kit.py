"""The cascade's speech parts (detector, recognizer, synthesizer) as a `VoiceKit`, chosen by the
ASR_PROVIDER and TTS_PROVIDER settings: the embedded ones (Silero VAD, PocketSphinx, eSpeak NG) or a
provider's recognizer and/or voice (realtime/engine/speech/providers.py) beside the embedded detector
and offline voice.

A kit is built once per process for a pair of settings, and its heavy models are loaded once
(`ensure_preloaded`, blocking: call it off the event loop). `reset_kits()` forgets both, for a test
that changes the settings.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from realtime.engine.cascade import end_of_turn
from realtime.engine.contracts import Detector, Recognizer
from realtime.engine.speech import espeak, pocketsphinx, providers, silero_vad


@dataclass(frozen=True)
class VoiceKit:
    """The cascade's speech parts for one conversation; the models behind them are shared per process."""

    name: str
    preload: Callable[[], None]
    detector: Callable[[], Detector]
    recognizer: Callable[[Any, Iterable[str]], Recognizer | None]  # (agent, vocabulary texts)
    synthesize: Callable[[str, str, str], bytes]  # (text, language, voice name) -> PCM16 at OUT_RATE
    split_sentences: Callable[[str], list[str]]
    # The offline voice (eSpeak NG) when `synthesize` is a provider's: the cascade speaks with it when
    # the provider fails (apologies, and sentences the provider could not say). None: `synthesize` is it.
    offline_synthesize: Callable[[str, str, str], bytes] | None = None


def _embedded_kit() -> VoiceKit:
    def preload() -> None:
        silero_vad.preload()
        pocketsphinx.preload()
        espeak.preload()
        end_of_turn.preload()

    return VoiceKit(
        name="embedded",
        preload=preload,
        detector=lambda: silero_vad.VoiceActivityDetector(),
        recognizer=lambda agent, texts: pocketsphinx.recognizer_for_agent(agent, vocabulary_texts=texts),
        synthesize=lambda text, language, voice: espeak.synthesize(text, language=language, voice_name=voice),
        split_sentences=espeak.split_sentences,
    )


def _speech_kit(asr_provider: str, tts_provider: str) -> VoiceKit:
    """The embedded kit with a provider's recognizer and/or voice (settings ASR_PROVIDER, TTS_PROVIDER);
    voice activity detection and the offline voice stay embedded. ProviderError when a provider's
    settings are incomplete."""
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
        silero_vad.preload()
        if asr_provider == providers.EMBEDDED:
            pocketsphinx.preload()  # a provider's recognizer needs no PocketSphinx workers
        espeak.preload()  # the offline voice speaks whenever a provider fails
        end_of_turn.preload()
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


def configuration_problems() -> list[str]:
    """Why the configured speech providers and end-of-turn detector of the cascade cannot run, empty when fine."""
    return (
        providers.configuration_problems(settings.ASR_PROVIDER, settings.TTS_PROVIDER)
        + end_of_turn.configuration_problems()
    )


_kits: dict[tuple[str, str], VoiceKit] = {}
_preloaded: set[str] = set()
_kit_lock = threading.Lock()
_preload_lock = threading.Lock()  # held for seconds while models load: never from the event loop


def voice_kit() -> VoiceKit:
    """The cascade's speech parts as configured (ASR_PROVIDER, TTS_PROVIDER; a provider's first use may
    load its libraries: off the loop)."""
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


def reset_kits() -> None:
    """Forget the kits built and the kits preloaded (the models themselves stay loaded in their
    modules): the next `voice_kit()` is built from the settings of that moment."""
    with _kit_lock, _preload_lock:
        _kits.clear()
        _preloaded.clear()
