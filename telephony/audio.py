"""Phone audio: G.711 mu-law at 8 kHz on the wire, PCM16 at 16 kHz (caller) and 24 kHz (agent) in the
engine.

mu-law (and A-law, for SIP trunks): numpy lookup tables, bit-exact with the stdlib's deprecated `audioop`
(ulaw2lin/lin2ulaw, alaw2lin/lin2alaw; see ITU-T G.711): 256 entries to decode, 65 536 to encode.

Resampling: stateful FIR filters (Kaiser-windowed sinc, designed once) that keep the last samples of
each stream between chunks, so that a call's audio is filtered as one continuous signal. They are
used instead of `soxr.ResampleStream` because soxr's streaming API releases its output in blocks:
measured with 20 ms chunks, 8 -> 16 kHz gives nothing for the first 100 ms and then ~104 ms bursts
(HQ; 60 ms bursts with LQ), and 24 -> 8 kHz holds back a whole 60 ms chunk, both of which would add
to every turn's latency. These filters add their group delay only (about 2.7 ms down, 2.9 ms up):
- down (24 -> 8 kHz): a 127-tap low-pass (cut-off 3.5 kHz, about 80 dB stop band from 4 kHz) then
  every third sample: nothing above the 4 kHz Nyquist frequency of the phone line aliases back;
- up (8 -> 16 kHz): zeros stuffed between samples, then a 95-tap low-pass (cut-off 3.7 kHz) that
  removes the images above 4 kHz.
"""

from __future__ import annotations

import numpy as np

from realtime.engine.audio import IN_RATE, OUT_RATE
from realtime.engine.audio import PHONE_FRAME_BYTES as FRAME_BYTES  # the wire's frame: 20 ms of mu-law

SILENCE_BYTE = 0xFF  # mu-law of 0


def _decode_table() -> np.ndarray:
    u = ~np.arange(256, dtype=np.int32) & 0xFF
    exponent = (u >> 4) & 7
    mantissa = u & 0x0F
    magnitude = (((mantissa << 3) + 0x84) << exponent) - 0x84
    return np.where(u & 0x80, -magnitude, magnitude).astype(np.int16)


def _encode_table() -> np.ndarray:
    x = np.arange(-32768, 32768, dtype=np.int32) >> 2  # 14 bits, floor shift
    sign = np.where(x < 0, 0x80, 0)
    magnitude = np.minimum(np.abs(x), 8158) + 33
    exponent = np.floor(np.log2(magnitude)).astype(np.int32) - 5
    mantissa = (magnitude >> (exponent + 1)) & 0x0F
    codes = ~(sign | (exponent << 4) | mantissa) & 0xFF
    # Indexed by the int16 sample's bit pattern read as uint16: 0..32767 then -32768..-1.
    return np.concatenate([codes[32768:], codes[:32768]]).astype(np.uint8)


_DECODE = _decode_table()
_ENCODE = _encode_table()


def _alaw_decode_table() -> np.ndarray:
    a = np.arange(256, dtype=np.int32) ^ 0x55
    segment = (a & 0x70) >> 4
    t = ((a & 0x0F) << 4) + np.where(segment == 0, 8, 0x108)
    t = np.where(segment > 1, t << np.maximum(segment - 1, 0), t)
    return np.where(a & 0x80, t, -t).astype(np.int16)


def _alaw_encode_table() -> np.ndarray:
    x = np.arange(-32768, 32768, dtype=np.int32) >> 3  # 13 bits, floor shift
    mask = np.where(x >= 0, 0xD5, 0x55)
    magnitude = np.where(x >= 0, x, -x - 1)
    segment = np.searchsorted(np.array([0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF]), magnitude)
    quantized = np.where(segment < 2, magnitude >> 1, magnitude >> np.minimum(segment, 7)) & 0x0F
    codes = np.where(segment >= 8, 0x7F ^ mask, ((segment << 4) | quantized) ^ mask)
    # Indexed by the int16 sample's bit pattern read as uint16, as mu-law's.
    return np.concatenate([codes[32768:], codes[:32768]]).astype(np.uint8)


_ALAW_DECODE = _alaw_decode_table()
_ALAW_ENCODE = _alaw_encode_table()


def alaw_decode(data: bytes) -> np.ndarray:
    """A-law bytes -> int16 samples (G.711, as the stdlib's deprecated audioop.alaw2lin)."""
    return _ALAW_DECODE[np.frombuffer(data, dtype=np.uint8)]


def alaw_encode(samples: np.ndarray) -> bytes:
    """int16 samples -> A-law bytes (as audioop.lin2alaw)."""
    return _ALAW_ENCODE[np.asarray(samples, dtype="<i2").view(np.uint16)].tobytes()


def ulaw_decode(data: bytes) -> np.ndarray:
    """mu-law bytes -> int16 samples."""
    return _DECODE[np.frombuffer(data, dtype=np.uint8)]


def ulaw_encode(samples: np.ndarray) -> bytes:
    """int16 samples -> mu-law bytes."""
    return _ENCODE[np.asarray(samples, dtype="<i2").view(np.uint16)].tobytes()


def _lowpass(taps: int, cutoff_hz: float, rate: int, beta: float = 8.0) -> np.ndarray:
    n = np.arange(taps) - (taps - 1) / 2
    fc = cutoff_hz / rate
    kernel = 2 * fc * np.sinc(2 * fc * n) * np.kaiser(taps, beta)
    return kernel / kernel.sum()


_DOWN_FILTER = _lowpass(127, 3500.0, OUT_RATE)
# 24 -> 16 kHz (G.722 over SIP): zeros stuffed to 48 kHz (which halves the level), a low-pass below the
# 8 kHz Nyquist frequency of 16 kHz, every third sample.
_WIDE_FILTER = _lowpass(191, 7500.0, 2 * OUT_RATE) * 2
_UP_FILTER = _lowpass(95, 3700.0, IN_RATE) * 2  # zero stuffing halves the level


def _to_int16(samples: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(samples), -32768, 32767).astype("<i2")


class Downsampler:
    """PCM16 24 kHz -> PCM16 8 kHz (or 16 kHz: `wideband=True`), one call's agent audio; `reset()` after a
    barge-in (the audio queued at the caller was dropped, so the filter starts from silence again)."""

    def __init__(self, *, wideband: bool = False) -> None:
        self._up, self._filter = (2, _WIDE_FILTER) if wideband else (1, _DOWN_FILTER)
        self.reset()

    def reset(self) -> None:
        self._history = np.zeros(len(self._filter) - 1, dtype=np.float64)
        self._phase = 0  # offset of the next kept sample in the next chunk

    def process(self, pcm16_24k: bytes) -> np.ndarray:
        chunk = np.frombuffer(pcm16_24k, dtype="<i2").astype(np.float64)
        if not chunk.size:
            return np.zeros(0, dtype="<i2")
        if self._up > 1:
            stuffed = np.zeros(chunk.size * self._up, dtype=np.float64)
            stuffed[:: self._up] = chunk
            chunk = stuffed
        signal = np.concatenate([self._history, chunk])
        filtered = np.convolve(signal, self._filter, mode="valid")  # one value per sample of `chunk`
        kept = filtered[self._phase :: 3]
        self._phase = (self._phase - chunk.size) % 3
        self._history = signal[-(len(self._filter) - 1) :]
        return _to_int16(kept)


class Upsampler:
    """PCM16 8 kHz -> PCM16 16 kHz, one call's caller audio."""

    def __init__(self) -> None:
        self._history = np.zeros(len(_UP_FILTER) - 1, dtype=np.float64)

    def process(self, samples_8k: np.ndarray) -> np.ndarray:
        if not samples_8k.size:
            return np.zeros(0, dtype="<i2")
        stuffed = np.zeros(samples_8k.size * 2, dtype=np.float64)
        stuffed[::2] = samples_8k
        signal = np.concatenate([self._history, stuffed])
        filtered = np.convolve(signal, _UP_FILTER, mode="valid")
        self._history = signal[-(len(_UP_FILTER) - 1) :]
        return _to_int16(filtered)


def phone_to_engine(ulaw: bytes, upsampler: Upsampler) -> bytes:
    """A media payload (mu-law 8 kHz) -> PCM16 LE 16 kHz for the engine."""
    return upsampler.process(ulaw_decode(ulaw)).tobytes()


class PhoneEncoder:
    """Agent audio (PCM16 24 kHz) -> mu-law 8 kHz in whole 20 ms frames. The filter holds no samples
    back (its delay is in its history, not in buffered output), so the engine's whole 20 ms frames
    (480 samples) give exactly 160 bytes each and nothing waits for the next chunk; a chunk that is not
    whole frames leaves its remainder for the next one."""

    def __init__(self) -> None:
        self._down = Downsampler()
        self._pending = b""

    def reset(self) -> None:
        self._down.reset()
        self._pending = b""

    def encode(self, pcm16_24k: bytes) -> list[bytes]:
        data = self._pending + ulaw_encode(self._down.process(pcm16_24k))
        whole = len(data) - len(data) % FRAME_BYTES
        self._pending = data[whole:]
        return [data[offset : offset + FRAME_BYTES] for offset in range(0, whole, FRAME_BYTES)]
