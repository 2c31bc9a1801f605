"""Offline neural speech synthesis with a Piper voice (piper-tts: VITS on onnxruntime) in this process:
TTS_PROVIDER=piper (docs/guides/neural-speech.md).

The voice is the `.onnx` file at PIPER_MODEL_PATH with its `.onnx.json` configuration beside it; it is
loaded once per process when the server starts (`preload`) and shared by every conversation (an
onnxruntime session runs calls from several threads at once). PIPER_MODEL_SHA256, when set, pins the
`.onnx` file (checked at load and by the system check). Text becomes phonemes with the espeak-ng library
and data inside the piper-tts wheel (its own copy, apart from the offline voice's): nothing is
downloaded. Only voices phonemized by espeak-ng (or by plain characters) are taken: the Chinese,
Japanese, Thai and Hebrew front ends of piper-tts need further packages and data.

A Piper voice speaks one language. A sentence for an agent whose language's primary subtag differs
from the voice's (an en_US or en_GB voice speaks for every en-* agent) is a permanent `ProviderError`:
the cascade says it, and the rest of the call, in the offline voice, which speaks every agent language.

Agent voices: a single-speaker voice speaks for all five. A multi-speaker voice maps them to its
speakers through PIPER_SPEAKER_MAP ("eve=p225,ara=3,*=p226": a speaker's name from the voice's
configuration or its number; `*` for the names not listed); an agent voice not mapped speaks with the
voice's default speaker.

Each call synthesizes one sentence (the cascade speaks sentence by sentence): PCM16 mono at the voice's
rate (22,050 Hz for medium voices), resampled with soxr to the 24 kHz of the browser protocol.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soxr
from django.conf import settings

from kit.providers import ProviderError
from realtime.engine.audio import OUT_RATE
from realtime.engine.speech.espeak import VOICE_PROFILES
from realtime.engine.speech.providers import sha256_problem

logger = logging.getLogger(__name__)

AGENT_VOICES = tuple(VOICE_PROFILES)
OFFLINE_PHONEME_TYPES = ("espeak", "text")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


# --- settings ------------------------------------------------------------------------------------
def parse_speaker_map(text: str) -> dict[str, str]:
    """PIPER_SPEAKER_MAP ("eve=p225,*=3") as agent voice -> speaker; ValueError for an entry that is
    not name=speaker or names no agent voice."""
    given: dict[str, str] = {}
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        name, sep, speaker = (piece.strip() for piece in entry.partition("="))
        if not sep or not name or not speaker:
            raise ValueError(f"PIPER_SPEAKER_MAP entry {entry!r} is not name=speaker")
        if name != "*" and name not in AGENT_VOICES:
            raise ValueError(f"PIPER_SPEAKER_MAP names {name!r}, not one of the agent voices {', '.join(AGENT_VOICES)}")
        given[name] = speaker
    every = given.pop("*", None)
    return {name: chosen for name in AGENT_VOICES if (chosen := given.get(name) or every)}


def _config_path(model_path: Path) -> Path:
    return model_path.with_name(model_path.name + ".json")


def _read_config(path: Path) -> dict[str, Any]:
    """The voice's .onnx.json; ValueError when it is not a Piper voice configuration."""
    try:
        config: dict[str, Any] = json.loads(_config_path(path).read_text(encoding="utf-8"))
        int(config["audio"]["sample_rate"]), int(config["num_speakers"]), dict(config["phoneme_id_map"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{_config_path(path)} is not a Piper voice configuration ({type(exc).__name__})") from None
    return config


def speaker_ids(config: dict[str, Any], text: str) -> dict[str, int]:
    """Agent voice -> speaker number for a multi-speaker voice (empty for a single-speaker one);
    ValueError for a speaker the voice does not have."""
    mapping = parse_speaker_map(text)
    count = int(config.get("num_speakers", 1))
    if count <= 1:
        return {}
    names = {str(name): int(number) for name, number in (config.get("speaker_id_map") or {}).items()}
    ids: dict[str, int] = {}
    for voice, speaker in mapping.items():
        if speaker in names:
            ids[voice] = names[speaker]
        elif speaker.isdigit() and int(speaker) < count:
            ids[voice] = int(speaker)
        else:
            raise ValueError(f"PIPER_SPEAKER_MAP maps {voice} to {speaker!r}, not a speaker of this voice")
    return ids


def voice_language(config: dict[str, Any]) -> str:
    """The voice's language as a primary subtag ("en_US" -> "en"), from its configuration."""
    code = (config.get("language") or {}).get("code") or (config.get("espeak") or {}).get("voice") or ""
    return re.split(r"[-_]", str(code), maxsplit=1)[0].lower()


def configuration_problems(kind: str = "TTS") -> list[str]:
    """What is missing or wrong for TTS_PROVIDER=piper (empty when it can run)."""
    problems = []
    if importlib.util.find_spec("piper") is None:
        problems.append("TTS_PROVIDER=piper needs the piper-tts package (pinned in requirements.txt)")
    text = settings.PIPER_MODEL_PATH.strip()
    if not text:
        problems.append(
            "PIPER_MODEL_PATH is not set (a Piper voice's .onnx file, its .onnx.json beside it, such as "
            "en_US-joe-medium.onnx from rhasspy/piper-voices: docs/guides/neural-speech.md)"
        )
        return problems
    path = Path(text)
    if not path.is_file():
        problems.append(f"PIPER_MODEL_PATH {path} is not a file (a Piper voice's .onnx file)")
        return problems
    if not _config_path(path).is_file():
        problems.append(
            f"PIPER_MODEL_PATH {path} has no {_config_path(path).name} beside it (the voice's configuration)"
        )
        return problems
    try:
        config = _read_config(path)
        if config.get("phoneme_type", "espeak") not in OFFLINE_PHONEME_TYPES:
            problems.append(
                f"The Piper voice at PIPER_MODEL_PATH is phonemized by {config['phoneme_type']!r}, which needs "
                f"more packages and data: only {' and '.join(OFFLINE_PHONEME_TYPES)} voices are supported"
            )
        speaker_ids(config, settings.PIPER_SPEAKER_MAP)
    except ValueError as exc:
        problems.append(str(exc))
    mismatch = sha256_problem(path, settings.PIPER_MODEL_SHA256, "PIPER_MODEL_SHA256")
    if mismatch:
        problems.append(mismatch)
    return problems


# --- the voice, once per process -----------------------------------------------------------------
@dataclass
class LoadedVoice:
    voice: Any  # piper.PiperVoice
    language: str  # primary subtag
    rate: int
    speakers: dict[str, int]  # agent voice -> speaker number (multi-speaker voices)


_voices: dict[tuple[str, str, str], LoadedVoice] = {}
_voices_lock = threading.Lock()  # held while a voice loads


def loaded_voice() -> LoadedVoice:
    """The process's voice for the current settings (loaded on first use; blocking). A permanent
    ProviderError when the settings or the voice are wrong."""
    key = (settings.PIPER_MODEL_PATH.strip(), settings.PIPER_MODEL_SHA256.strip().lower(), settings.PIPER_SPEAKER_MAP)
    with _voices_lock:
        if key not in _voices:
            _voices[key] = _load(Path(key[0]), key[2])
        return _voices[key]


def _load(path: Path, speaker_map: str) -> LoadedVoice:
    problems = configuration_problems()
    if problems:
        raise ProviderError("; ".join(problems), permanent=True)
    from piper import PiperVoice  # the voice library (onnxruntime) loads with the first voice, not the engine

    try:
        config = _read_config(path)
        voice = PiperVoice.load(path, config_path=_config_path(path), download_dir=path.parent)
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own kinds
        raise ProviderError(f"The Piper voice at PIPER_MODEL_PATH cannot be loaded: {exc}", permanent=True) from None
    logger.info("Piper voice loaded from %s (%s, %d Hz)", path, voice_language(config), voice.config.sample_rate)
    return LoadedVoice(
        voice=voice,
        language=voice_language(config),
        rate=int(voice.config.sample_rate),
        speakers=speaker_ids(config, speaker_map),
    )


def reset() -> None:
    """Forget the loaded voices (tests that change the settings)."""
    with _voices_lock:
        _voices.clear()


# --- synthesis -----------------------------------------------------------------------------------
class PiperSpeech:
    """TTS_PROVIDER=piper. The settings are checked when the kit is made (the first session); the voice
    loads at server start (`preload`) or at the first sentence."""

    def __init__(self) -> None:
        problems = configuration_problems()
        if problems:
            raise ProviderError("; ".join(problems), permanent=True)

    @staticmethod
    def preload() -> None:
        loaded_voice()

    def synthesize(self, text: str, language: str, voice_name: str) -> bytes:
        """Speech for one sentence as PCM16 LE mono 24 kHz (empty for text with nothing to say)."""
        from piper import SynthesisConfig  # as above: loaded with the voice

        text = _CONTROL.sub(" ", text).strip()
        if not text:
            return b""
        loaded = loaded_voice()
        wanted = language.split("-", 1)[0].lower()
        if wanted != loaded.language:
            raise ProviderError(
                f"The Piper voice at PIPER_MODEL_PATH speaks {loaded.language or 'an unknown language'}, "
                f"not the agent's language {language}",
                permanent=True,
            )
        config = SynthesisConfig(speaker_id=loaded.speakers.get(voice_name))
        try:
            chunks = [chunk.audio_int16_array for chunk in loaded.voice.synthesize(text, syn_config=config)]
        except Exception as exc:  # noqa: BLE001 - the cascade expects ProviderError only
            logger.warning("Piper failed on a sentence: %s", type(exc).__name__)
            raise ProviderError(f"Piper failed on this sentence ({type(exc).__name__})") from None
        if not chunks:
            return b""
        samples = np.concatenate(chunks)
        if loaded.rate != OUT_RATE:
            samples = soxr.resample(samples, loaded.rate, OUT_RATE, quality="HQ")
        audio: bytes = np.clip(samples, -32768, 32767).astype("<i2").tobytes()
        return audio
