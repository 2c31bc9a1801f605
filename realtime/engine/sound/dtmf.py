"""Keypad tones (DTMF, ITU-T Q.23): the audio the `send_digits` tool plays into a call, so that a phone
menu at the far end hears the keys in-band.

Each key is the sum of a row and a column frequency (rows 697/770/852/941 Hz, columns 1209/1336/1477/1633
Hz), played for TONE_SECONDS and followed by GAP_SECONDS of silence (Q.24 receivers take 40 ms and
more); `w` is a PAUSE_SECONDS pause. Each tone fades in and out over a few milliseconds so that it does not
click (a click's spread of frequencies could upset the receiver). The audio is PCM16 LE mono at the
engine's output rate, padded to whole playout frames.
"""

from __future__ import annotations

import numpy as np

from realtime.engine.audio import OUT_FRAME_BYTES, OUT_RATE, SAMPLE_BYTES

ROWS = (697, 770, 852, 941)
COLUMNS = (1209, 1336, 1477, 1633)
LAYOUT = ("123A", "456B", "789C", "*0#D")
FREQUENCIES: dict[str, tuple[int, int]] = {
    key: (ROWS[row], COLUMNS[column]) for row, keys in enumerate(LAYOUT) for column, key in enumerate(keys)
}
PAUSE = "w"
TONE_SECONDS = 0.07
GAP_SECONDS = 0.07
PAUSE_SECONDS = 0.5
FADE_SECONDS = 0.004
# Each frequency at about -9 dBFS: the pair peaks near -3 dBFS, clear of clipping after resampling.
LEVEL = 0.35


def _tone(key: str, rate: int) -> np.ndarray:
    low, high = FREQUENCIES[key]
    t = np.arange(round(TONE_SECONDS * rate)) / rate
    wave = LEVEL * (np.sin(2 * np.pi * low * t) + np.sin(2 * np.pi * high * t))
    fade = min(round(FADE_SECONDS * rate), len(t) // 2)
    if fade:
        ramp = 0.5 - 0.5 * np.cos(np.pi * np.arange(fade) / fade)
        wave[:fade] *= ramp
        wave[-fade:] *= ramp[::-1]
    result: np.ndarray = wave
    return result


def tones(keys: str, rate: int = OUT_RATE) -> bytes:
    """The tones of `keys` (0-9, *, #, A-D, and `w` for a pause) as PCM16 LE at `rate`, in whole frames
    at the engine's output rate. ValueError for any other character."""
    parts: list[np.ndarray] = []
    gap = np.zeros(round(GAP_SECONDS * rate))
    for key in keys:
        if key == PAUSE:
            parts.append(np.zeros(round(PAUSE_SECONDS * rate)))
        elif key in FREQUENCIES:
            parts += [_tone(key, rate), gap]
        else:
            raise ValueError(f"not a keypad key: {key!r}")
    if not parts:
        return b""
    samples = np.rint(np.concatenate(parts) * 32767).astype("<i2")
    audio: bytes = samples.tobytes()
    if rate == OUT_RATE and len(audio) % OUT_FRAME_BYTES:
        audio += bytes(OUT_FRAME_BYTES - len(audio) % OUT_FRAME_BYTES)
    assert len(audio) % SAMPLE_BYTES == 0
    return audio
