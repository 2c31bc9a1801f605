"""Voice engines, chosen per deployment by settings.VOICE_ENGINE, in one registry.

A voice engine is a `VoicePipeline` class (realtime/engine/contracts.py) that the session shell runs:
`cascade` (realtime/engine/cascade/: voice activity detection -> speech recognition -> brain -> speech
synthesis; offline by default, Silero VAD -> PocketSphinx -> eSpeak NG) or `speech-to-speech` (a
provider speaking the OpenAI Realtime protocol, realtime/engine/speech_to_speech/). The former names
`embedded` and `realtime` are read as these when the settings load (voiceagent/settings.py). Typed
sessions (modality "text") run the text pipeline beside them (realtime/engine/cascade/text.py: the
cascade's brain without speech) whatever the setting. The registry imports no pipeline: each is
imported by its dotted path on first use (as kit.providers does for every provider), and each pipeline
reports its own configuration: `required_settings` (without them sessions are refused with a clear
error, before a call record is opened) and `configuration_problems()` (what `manage.py check` reports).
"""

from __future__ import annotations

from django.conf import settings

from kit.providers import ProviderError, Registry
from realtime.engine.brain import brain_problems
from realtime.engine.contracts import VoicePipeline


class EngineUnavailable(ProviderError):
    """The configured voice engine or brain cannot run in this deployment (permanent)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, permanent=True)


VOICE_ENGINES = Registry(
    "voice engine",
    {
        "cascade": "realtime.engine.cascade.pipeline:CascadePipeline",
        "speech-to-speech": "realtime.engine.speech_to_speech.pipeline:SpeechToSpeechPipeline",
    },
)

# The pipeline of typed sessions (modality "text"), whatever VOICE_ENGINE says: the brain without speech.
TEXT_PIPELINE = Registry("text pipeline", {"text": "realtime.engine.cascade.text:TextPipeline"})

# Engines this version knows but cannot run, with the reason given to the operator.
UNAVAILABLE_ENGINES: dict[str, str] = {}


def _missing_settings(pipeline: type[VoicePipeline]) -> list[str]:
    return [setting for setting in pipeline.required_settings if not str(getattr(settings, setting, "")).strip()]


def pipeline_class(name: str | None = None) -> type[VoicePipeline]:
    """The configured voice engine's pipeline class (imports it on first use: call it off the loop)."""
    name = name or settings.VOICE_ENGINE
    if name in UNAVAILABLE_ENGINES:
        raise EngineUnavailable(f"VOICE_ENGINE={name} is not available in this version: {UNAVAILABLE_ENGINES[name]}")
    if name not in VOICE_ENGINES:
        raise EngineUnavailable(f"Unknown VOICE_ENGINE {name!r}")
    pipeline: type[VoicePipeline] = VOICE_ENGINES.get(name)
    missing = _missing_settings(pipeline)
    if missing:
        raise EngineUnavailable(f"VOICE_ENGINE={name} needs {' and '.join(missing)} to be set")
    return pipeline


def text_pipeline_class() -> type[VoicePipeline]:
    """The pipeline of typed sessions (imports it on first use: call it off the loop)."""
    pipeline: type[VoicePipeline] = TEXT_PIPELINE.get("text")
    return pipeline


def configuration_problems() -> list[str]:
    """Why the configured voice engine or brain cannot run (for the system check), empty when fine."""
    name = settings.VOICE_ENGINE
    if name not in VOICE_ENGINES:
        reason = UNAVAILABLE_ENGINES.get(name, "unknown engine")
        return [f"VOICE_ENGINE={name} is not available in this version: {reason}", *brain_problems()]
    try:
        pipeline = VOICE_ENGINES.get(name)
    except ImportError as exc:
        return [f"VOICE_ENGINE={name} cannot be imported: {exc}"]
    problems = []
    missing = _missing_settings(pipeline)
    if missing:
        problems.append(f"VOICE_ENGINE={name} needs {' and '.join(missing)} to be set")
    return problems + [problem for problem in pipeline.configuration_problems() if problem not in problems]
