"""Caller speech for the socket tests and bench/: reproducible eSpeak NG recordings at the browser's
16 kHz, resampling from the engine's 24 kHz, and levels."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

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
from realtime.engine.speech.espeak import synthesize
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


def record_voice_24k(sentences: tuple[str, ...], folder: Path, voice_name: str = "eve") -> dict[str, bytes]:
    """A caller's sentences as eSpeak NG makes them (PCM16 24 kHz), the same recordings in every run.
    eSpeak NG adds random breath noise to every sentence and carries state from one sentence to the
    next, and offline recognition is sensitive to both (a word heard right in one run is misheard in
    the next); each sentence synthesized in a fresh process from a fixed seed is always the same audio,
    whatever else is said."""
    processes = [
        subprocess.Popen([sys.executable, "-c", _RECORD, sentence, str(folder / f"{index}.pcm"), voice_name], cwd=REPO)
        for index, sentence in enumerate(sentences)
    ]
    for process in processes:
        if process.wait(timeout=60) != 0:
            raise RuntimeError(f"recording a sentence failed with {process.returncode}")
    return {sentence: (folder / f"{index}.pcm").read_bytes() for index, sentence in enumerate(sentences)}


def record_voice(sentences: tuple[str, ...], folder: Path, voice_name: str = "eve") -> dict[str, bytes]:
    """`record_voice_24k` at the browser's 16 kHz."""
    return {sentence: to_16k(pcm) for sentence, pcm in record_voice_24k(sentences, folder, voice_name).items()}


def rms(pcm16: bytes) -> float:
    samples = np.frombuffer(pcm16, dtype="<i2").astype(np.float64)
    return float(np.sqrt(np.mean(samples**2))) if samples.size else 0.0


def speech_bounds(pcm16: bytes, *, threshold: float = 300.0, window_ms: int = 10) -> tuple[float, float]:
    """Where the speech of a recording (PCM16 16 kHz) begins and ends, in seconds from its start: the first
    and the last `window_ms` window louder than `threshold` (RMS). eSpeak NG leads and trails its words
    with a little silence; a test that times the caller's first or last word measures from these."""
    size = IN_RATE * window_ms // 1000
    samples = np.frombuffer(pcm16, dtype="<i2").astype(np.float64)
    windows = [samples[start : start + size] for start in range(0, samples.size, size)]
    loud = [index for index, window in enumerate(windows) if window.size and np.sqrt(np.mean(window**2)) > threshold]
    if not loud:
        raise ValueError("the recording holds no speech")
    return loud[0] * window_ms / 1000, (loud[-1] + 1) * window_ms / 1000


def pitch_hz(pcm16: bytes, rate: int = OUT_RATE) -> float:
    """The median fundamental frequency of the voiced parts of a recording (autocorrelation over 40 ms
    windows, 70 to 400 Hz): a man's voice is about 100-150 Hz, a woman's about 180-250 Hz."""
    samples = np.frombuffer(pcm16, dtype="<i2").astype(np.float64)
    size = rate * 40 // 1000
    shortest, longest = rate // 400, rate // 70
    found: list[float] = []
    for start in range(0, samples.size - size, size):
        window = samples[start : start + size] - samples[start : start + size].mean()
        if np.sqrt(np.mean(window**2)) < 500:
            continue
        correlation = np.correlate(window, window, mode="full")[size - 1 :]
        lag = shortest + int(np.argmax(correlation[shortest:longest]))
        if correlation[lag] > 0.3 * correlation[0]:
            found.append(rate / lag)
    if not found:
        raise ValueError("the recording holds no voiced speech")
    return float(np.median(found))


def heard(chunks: list[tuple[float, bytes]], rate: int = OUT_RATE) -> list[tuple[float, float]]:
    """What a listener hears of audio chunks that arrive at loop times, played in order as a browser's
    queue plays them (a chunk starts when it arrives or when the one before it ends, whichever is later):
    the stretches of speech, (start, end) in loop time, 10 ms windows louder than 300 RMS joined across
    silences shorter than 100 ms."""
    stretches: list[tuple[float, float]] = []
    window = rate // 100
    end = float("-inf")
    for at, pcm16 in chunks:
        start = max(at, end)
        samples = np.frombuffer(pcm16, dtype="<i2").astype(np.float64)
        for offset in range(0, samples.size, window):
            piece = samples[offset : offset + window]
            if piece.size and np.sqrt(np.mean(piece**2)) > 300:
                began = start + offset / rate
                if stretches and began - stretches[-1][1] < 0.1:
                    stretches[-1] = (stretches[-1][0], began + piece.size / rate)
                else:
                    stretches.append((began, began + piece.size / rate))
        end = start + samples.size / rate
    return stretches


def pink_noise(ms: int, level: float, seed: int = 7) -> bytes:
    """`ms` of pink noise (PCM16 16 kHz) at RMS `level` (a speech recording's, from `rms`), the same in every
    run. Silero VAD never takes it for speech (300 ms at a speech level: no speech start)."""
    count = IN_RATE * ms // 1000
    spectrum = np.fft.rfft(np.random.default_rng(seed).standard_normal(count))
    frequencies = np.arange(spectrum.size, dtype=np.float64)
    frequencies[0] = 1.0
    noise = np.fft.irfft(spectrum / np.sqrt(frequencies), count)
    return (noise / np.sqrt(np.mean(noise**2)) * level).astype("<i2").tobytes()


def mumble(pcm16: bytes, ms: int, *, from_ms: int = 0) -> bytes:
    """A wordless sound that voice activity detection takes for speech (a mumble, a cough into the phone):
    `ms` of a recording played backwards, `from_ms` after where its backwards speech begins. Silero VAD
    reports speech in 300 ms of such a sound; the offline recognizer mostly makes a word or two of it
    ("a", "the", "yes"), and nothing of some (which a test that needs "no words" must pick)."""
    backwards = np.frombuffer(pcm16, dtype="<i2")[::-1].copy()
    begins, _ = speech_bounds(backwards.tobytes())
    start = int(begins * IN_RATE) + IN_RATE * from_ms // 1000
    return backwards[start : start + IN_RATE * ms // 1000].tobytes()


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z']+", text.lower()))


def recognize(agent: Any, pcm16_16k: bytes) -> str:
    """What a recognizer with the agent's language model (its greeting's words) hears in the audio: what
    a caller heard, checked as words."""
    from realtime.engine.speech.pocketsphinx import recognizer_for_agent

    recognizer = recognizer_for_agent(agent, workers=0)
    assert recognizer is not None
    recognizer.start()
    for offset in range(0, len(pcm16_16k), 640):
        recognizer.feed(pcm16_16k[offset : offset + 640])
    return recognizer.finish()
