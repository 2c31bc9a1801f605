"""Caller speech for the socket tests and bench/: reproducible eSpeak NG recordings at the browser's
16 kHz, resampling from the engine's 24 kHz, and levels."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from testing.daphne import REPO

IN_RATE = 16000
OUT_RATE = 24000


def to_16k(pcm16_24k: bytes) -> bytes:
    import soxr

    samples = np.frombuffer(pcm16_24k, dtype="<i2")
    return soxr.resample(samples, OUT_RATE, IN_RATE).astype("<i2").tobytes()


_RECORD = """
import ctypes, pathlib, sys
import espeakng_loader
from realtime.engine.speech.tts import synthesize
sentence, path, voice = sys.argv[1:4]
espeak, libc = ctypes.CDLL(espeakng_loader.get_library_path()), ctypes.CDLL(None)
def seeded(text):  # the breath noise draws on eSpeak NG's own generator and on libc's rand()
    espeak.espeak_ng_SetRandSeed(ctypes.c_long(7))
    libc.srand(7)
    return synthesize(text, language="en-US", voice_name=voice)
synthesize("ok", language="en-US", voice_name=voice)  # loads the library (which seeds from the clock)
seeded("ok")
pathlib.Path(path).write_bytes(seeded(sentence))
"""


def record_voice(sentences: tuple[str, ...], folder: Path, voice_name: str = "eve") -> dict[str, bytes]:
    """A caller's sentences as PCM16 16 kHz, the same recordings in every run. eSpeak NG adds random
    breath noise to every sentence and carries state from one sentence to the next, and offline
    recognition is sensitive to both (a word heard right in one run is misheard in the next); each
    sentence synthesized in a fresh process from a fixed seed is always the same audio, whatever
    else is said."""
    processes = [
        subprocess.Popen([sys.executable, "-c", _RECORD, sentence, str(folder / f"{index}.pcm"), voice_name], cwd=REPO)
        for index, sentence in enumerate(sentences)
    ]
    for process in processes:
        if process.wait(timeout=60) != 0:
            raise RuntimeError(f"recording a sentence failed with {process.returncode}")
    return {sentence: to_16k((folder / f"{index}.pcm").read_bytes()) for index, sentence in enumerate(sentences)}


def rms(pcm16: bytes) -> float:
    samples = np.frombuffer(pcm16, dtype="<i2").astype(np.float64)
    return float(np.sqrt(np.mean(samples**2))) if samples.size else 0.0
