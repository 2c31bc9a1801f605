"""Text to speech with eSpeak NG, loaded through ctypes from the `espeakng-loader` wheel (the library
and its data ship inside the wheel: no system package, no download).

eSpeak NG keeps global state, so one process-wide lock serializes synthesis; a sentence takes a few
milliseconds, far less than it lasts. Output is PCM16 mono at eSpeak's 22,050 Hz, resampled with
soxr to the 24 kHz of the browser protocol.
"""

from __future__ import annotations

import ctypes
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import soxr

from realtime.engine.audio import OUT_RATE

# eSpeak NG constants (speak_lib.h).
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INITIALIZE_DONT_EXIT = 0x8000
_CHARS_UTF8 = 1
_PHONEMES_SPACE_SEPARATED = ord(" ") << 8  # eSpeak's ASCII phoneme names, a space between phonemes
_POS_CHARACTER = 1
_PARAM_RATE = 1
_PARAM_PITCH = 3
_PARAM_RANGE = 4

# The agent's language -> eSpeak NG's voice for it. es-US speaks with the Latin-American voice.
LANGUAGE_VOICES = {"en-US": "en-us", "es-ES": "es", "es-US": "es-419", "it-IT": "it"}
FALLBACK_LANGUAGE_VOICE = "en-us"


@dataclass(frozen=True)
class VoiceProfile:
    variant: str  # an eSpeak NG voice variant (espeak-ng-data/voices/!v)
    rate: int  # words per minute
    pitch: int  # 0-100, 50 is eSpeak's normal
    pitch_range: int  # 0-100


# The five built-in voices of the API, each a distinct variant, rate and pitch in every language.
VOICE_PROFILES = {
    "eve": VoiceProfile(variant="f3", rate=165, pitch=55, pitch_range=60),
    "ara": VoiceProfile(variant="f4", rate=160, pitch=62, pitch_range=70),
    "rex": VoiceProfile(variant="m3", rate=160, pitch=40, pitch_range=50),
    "sal": VoiceProfile(variant="m7", rate=170, pitch=48, pitch_range=55),
    "leo": VoiceProfile(variant="m1", rate=155, pitch=35, pitch_range=45),
}
DEFAULT_VOICE = "eve"


class SpeechSynthesisError(Exception):
    """eSpeak NG could not be loaded or refused a request (permanent for this process)."""


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)


class _Espeak:
    """The loaded library; every call happens under `lock`."""

    def __init__(self) -> None:
        import espeakng_loader  # the eSpeak NG library is located when the voice is first loaded

        self.lock = threading.Lock()
        self.lib = ctypes.CDLL(espeakng_loader.get_library_path())
        self.lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        self.lib.espeak_Initialize.restype = ctypes.c_int
        self.lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        self.lib.espeak_SetVoiceByName.restype = ctypes.c_int
        self.lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        self.lib.espeak_SetParameter.restype = ctypes.c_int
        self.lib.espeak_Synth.argtypes = [
            ctypes.c_char_p,
            ctypes.c_size_t,
            ctypes.c_uint,
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        self.lib.espeak_Synth.restype = ctypes.c_int
        self.lib.espeak_TextToPhonemes.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_int]
        self.lib.espeak_TextToPhonemes.restype = ctypes.c_char_p
        data = espeakng_loader.get_data_path().encode()
        self.sample_rate = self.lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, data, _INITIALIZE_DONT_EXIT)
        if self.sample_rate <= 0:
            raise SpeechSynthesisError("eSpeak NG could not be initialized")
        self._chunks: list[bytes] = []
        self._callback = _CALLBACK(self._collect)  # keep a reference: eSpeak calls it from C
        self.lib.espeak_SetSynthCallback(self._callback)
        self._voice: tuple[str, str] | None = None

    def _collect(self, wav: ctypes._Pointer[ctypes.c_short], samples: int, events: ctypes.c_void_p) -> int:
        if samples > 0:
            self._chunks.append(ctypes.string_at(wav, samples * 2))
        return 0  # go on

    def synthesize(self, text: str, base_voice: str, profile: VoiceProfile) -> bytes:
        """PCM16 at self.sample_rate (caller holds the lock)."""
        self._use_voice(base_voice, profile.variant)
        for parameter, value in ((_PARAM_RATE, profile.rate), (_PARAM_PITCH, profile.pitch)):
            self.lib.espeak_SetParameter(parameter, value, 0)
        self.lib.espeak_SetParameter(_PARAM_RANGE, profile.pitch_range, 0)
        encoded = text.encode("utf-8")
        self._chunks = []
        status = self.lib.espeak_Synth(encoded, len(encoded) + 1, 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None)
        if status != 0:
            raise SpeechSynthesisError(f"eSpeak NG failed to synthesize (status {status})")
        return b"".join(self._chunks)

    def _use_voice(self, base_voice: str, variant: str) -> None:
        if self._voice != (base_voice, variant):
            name = f"{base_voice}+{variant}" if variant else base_voice
            if self.lib.espeak_SetVoiceByName(name.encode()) != 0:
                raise SpeechSynthesisError(f"eSpeak NG has no voice {name}")
            self._voice = (base_voice, variant)

    def phonemes(self, word: str, base_voice: str) -> str:
        """eSpeak's own phoneme names for `word`, separated by spaces (caller holds the lock)."""
        self._use_voice(base_voice, "")
        text = ctypes.c_char_p(word.encode("utf-8"))
        result = self.lib.espeak_TextToPhonemes(ctypes.byref(text), _CHARS_UTF8, _PHONEMES_SPACE_SEPARATED)
        return (result or b"").decode("utf-8", "replace")


_engine: _Espeak | None = None
_engine_lock = threading.Lock()


def _espeak() -> _Espeak:
    global _engine
    with _engine_lock:
        if _engine is None:
            _engine = _Espeak()
        return _engine


def preload() -> None:
    """Load eSpeak NG and warm each language's voice once (its dictionary loads on first use)."""
    for language in LANGUAGE_VOICES:
        synthesize("ok", language=language, voice_name=DEFAULT_VOICE)


def voice_for(language: str, voice_name: str) -> tuple[str, VoiceProfile]:
    """eSpeak's base voice for the language (English for languages without one) and the voice profile
    (the default voice for unknown names)."""
    base = LANGUAGE_VOICES.get(language) or FALLBACK_LANGUAGE_VOICE
    return base, VOICE_PROFILES.get(voice_name) or VOICE_PROFILES[DEFAULT_VOICE]


def synthesize(text: str, *, language: str, voice_name: str) -> bytes:
    """Speech for `text` as PCM16 LE mono 24 kHz (empty for text with nothing to say)."""
    text = _speakable(text)
    if not text:
        return b""
    base, profile = voice_for(language, voice_name)
    engine = _espeak()
    with engine.lock:
        raw = engine.synthesize(text, base, profile)
    samples = np.frombuffer(raw, dtype="<i2")
    if samples.size == 0:
        return b""
    resampled = soxr.resample(samples, engine.sample_rate, OUT_RATE, quality="HQ")
    audio: bytes = np.clip(resampled, -32768, 32767).astype("<i2").tobytes()
    return audio


def phonemes(words: Iterable[str], base_voice: str = "en-us") -> dict[str, str]:
    """How eSpeak NG would say each word, as its ASCII phoneme names ("paella" -> "p aI 'eI @")."""
    engine = _espeak()
    spoken = {}
    for word in words:
        with engine.lock:  # per word: speech synthesis for a live call waits for one word at most
            spoken[word] = engine.phonemes(word, base_voice)
    return spoken


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_SENTENCE_END = re.compile(r"(?<=[.!?…。])[\"')\]]*\s+|\n+")
_CLAUSE_BREAK = re.compile(r"(?<=[,;:])\s+")
LONG_SENTENCE_CHARS = 180


def _speakable(text: str) -> str:
    return _CONTROL.sub(" ", text).strip()


def split_sentences(text: str) -> list[str]:
    """Sentences to speak one by one. A very long sentence is also cut at clause breaks so that its
    first words play without waiting for the whole of it."""
    sentences: list[str] = []
    for sentence in _SENTENCE_END.split(_speakable(text)):
        sentence = sentence.strip()
        if not sentence:
            continue
        if len(sentence) <= LONG_SENTENCE_CHARS:
            sentences.append(sentence)
            continue
        part = ""
        for clause in _CLAUSE_BREAK.split(sentence):
            part = f"{part} {clause}".strip()
            if len(part) >= LONG_SENTENCE_CHARS // 2:
                sentences.append(part)
                part = ""
        if part:
            sentences.append(part)
    return sentences
