"""Hold audio: what a caller hears while a warm transfer calls the person (realtime/engine/session/shell.py)."""

from __future__ import annotations

from functools import cache

import numpy as np

from realtime.engine.audio import OUT_FRAME_BYTES, OUT_RATE

# Two soft notes (E5, then A5), each faded in and out, quiet beside speech.
NOTES_HZ = (659.25, 880.0)
NOTE_SECONDS = 0.18
LEVEL = 0.12


@cache
def hold_chime() -> bytes:
    """The chime as PCM16 LE at the output rate, in whole frames."""
    length = round(NOTE_SECONDS * OUT_RATE)
    t = np.arange(length) / OUT_RATE
    fade = np.sin(np.pi * np.arange(length) / length)  # rises and falls: no click
    notes = [np.sin(2 * np.pi * hz * t) * fade * LEVEL for hz in NOTES_HZ]
    audio: bytes = np.rint(np.concatenate(notes) * 32767).astype("<i2").tobytes()
    if len(audio) % OUT_FRAME_BYTES:
        audio += bytes(OUT_FRAME_BYTES - len(audio) % OUT_FRAME_BYTES)
    return audio
