"""A keypad-tone (DTMF) decoder for tests: reads keys back out of received audio with the Goertzel
algorithm, independently of the service's tone generator (realtime/engine/sound/dtmf.py).

    keys = dtmf_decode(pcm16_8k)   # "12#"

The audio is cut into blocks of BLOCK samples (205 at 8 kHz, the classic choice: bins close to the
eight frequencies) every STEP samples; a block holds a key when one row and one column frequency carry
most of its energy and the block is not near silence. A key is read once it holds for HOLD blocks in a
row, and read again only after at least GAP blocks without it.
"""

from __future__ import annotations

import math

import numpy as np

ROWS = (697.0, 770.0, 852.0, 941.0)
COLUMNS = (1209.0, 1336.0, 1477.0, 1633.0)
KEYS = ("123A", "456B", "789C", "*0#D")
BLOCK = 205
STEP = 80  # 10 ms at 8 kHz
HOLD = 2
GAP = 2
MIN_RMS = 200.0  # of PCM16: quieter blocks are silence
MIN_SHARE = 0.15  # of the block's energy, for each of the two frequencies
MIN_PAIR_SHARE = 0.6  # of the block's energy, for the two together


def goertzel_share(block: np.ndarray, frequency: float, rate: int) -> float:
    """The share of `block`'s energy at `frequency` (about 1.0 for a pure tone there)."""
    n = len(block)
    k = round(n * frequency / rate)
    coefficient = 2 * math.cos(2 * math.pi * k / n)
    s1 = s2 = 0.0
    for sample in block:
        s1, s2 = sample + coefficient * s1 - s2, s1
    power = s1 * s1 + s2 * s2 - coefficient * s1 * s2
    energy = float(np.dot(block, block))
    return 0.0 if energy == 0 else 2 * power / (n * energy)


def block_key(block: np.ndarray, rate: int = 8000) -> str | None:
    """The key one block holds, or None."""
    if math.sqrt(float(np.dot(block, block)) / len(block)) < MIN_RMS:
        return None
    rows = [goertzel_share(block, f, rate) for f in ROWS]
    columns = [goertzel_share(block, f, rate) for f in COLUMNS]
    row, column = int(np.argmax(rows)), int(np.argmax(columns))
    if rows[row] < MIN_SHARE or columns[column] < MIN_SHARE or rows[row] + columns[column] < MIN_PAIR_SHARE:
        return None
    return KEYS[row][column]


def dtmf_decode(pcm16: bytes | np.ndarray, rate: int = 8000) -> str:
    """The keys in `pcm16` (PCM16 LE mono, 8 kHz by default), in order."""
    samples = np.frombuffer(pcm16, dtype="<i2") if isinstance(pcm16, bytes) else pcm16
    samples = samples.astype(np.float64)
    block, step = round(BLOCK * rate / 8000), round(STEP * rate / 8000)
    keys: list[str] = []
    current: str | None = None
    run = 0
    quiet = GAP
    for start in range(0, len(samples) - block + 1, step):
        key = block_key(samples[start : start + block], rate)
        if key is not None and key == current:
            run += 1
        else:
            current, run = key, 1 if key is not None else 0
        if key is None:
            quiet += 1
            continue
        if run == HOLD and (quiet >= GAP or not keys or keys[-1] != key):
            keys.append(key)
        if run >= HOLD:
            quiet = 0
    return "".join(keys)
