"""Speech providers of the cascade, chosen per deployment by settings.ASR_PROVIDER and TTS_PROVIDER.

`embedded` is the offline pair (PocketSphinx in worker processes, eSpeak NG); other names are
adapters registered here and imported on first use. A recognition provider makes one recognizer per
conversation (start/feed/finish, realtime/engine/voice.py `Recognizer`); a synthesis provider turns
a sentence into PCM16 mono 24 kHz. Both are blocking (the cascade runs them off the event loop) and
raise `ProviderError` for their own failures: the cascade then speaks with the offline voice
(realtime/engine/cascade.py), so a provider failure never ends a call.

A provider module may define `configuration_problems()` (the system check reports them).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any, Protocol

from voiceagent.providers import Registry

EMBEDDED = "embedded"

RECOGNITION_PROVIDERS = Registry(
    "speech recognition provider", {"openai": "realtime.engine.speech.openai_audio:OpenAITranscription"}
)
SYNTHESIS_PROVIDERS = Registry(
    "speech synthesis provider", {"openai": "realtime.engine.speech.openai_audio:OpenAISpeech"}
)


class RecognitionProvider(Protocol):
    def recognizer(self, agent: Any, vocabulary_texts: Iterable[str]) -> Any: ...


class SynthesisProvider(Protocol):
    def synthesize(self, text: str, language: str, voice_name: str) -> bytes: ...


def recognition_provider(name: str) -> RecognitionProvider:
    return RECOGNITION_PROVIDERS.get(name)()


def synthesis_provider(name: str) -> SynthesisProvider:
    return SYNTHESIS_PROVIDERS.get(name)()


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
