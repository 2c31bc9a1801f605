"""The session's mixer (every voice engine): agent speech over the ambient bed and the keyboard loop, one frame
(realtime/engine/audio.py: 20 ms of PCM16 LE mono 24 kHz) per call, as the playout stage asks for it.

The loops are read once per process and shared read-only by every session; each Mixer keeps its own
position in them and its own gains. Gains glide sample by sample (a full 0-to-1 swing takes RAMP_MS),
so that ducking and the keyboard starting or stopping never click. The mix is summed in float32 and
saturated to int16: loud speech over the bed flattens at full scale instead of wrapping around.
"""

from __future__ import annotations

import threading
import wave
from pathlib import Path

import numpy as np

from realtime.engine.audio import OUT_FRAME_BYTES, OUT_FRAME_SAMPLES, OUT_RATE, SAMPLE_BYTES

LOOPS_DIR = Path(__file__).parent / "loops"
AMBIENT_SOUNDS = ("office1", "office2")
NO_AMBIENT = (None, "", "none")
KEYBOARD = "keyboard"

DUCKED = 0.35  # the bed's share of its volume while either side speaks (with ducking on)
KEYBOARD_GAIN = 0.5  # the keyboard loop is stored at -6 dBFS peak: this plays it at about -12 dBFS peak
RAMP_MS = 50  # a 0-to-1 gain swing; ducking (1 to 0.35) takes about 33 ms

_RAMP_SAMPLES = OUT_RATE * RAMP_MS // 1000
_RAMP = np.arange(1, OUT_FRAME_SAMPLES + 1, dtype=np.float32) / _RAMP_SAMPLES
_RAMP_PER_FRAME = OUT_FRAME_SAMPLES / _RAMP_SAMPLES
_SILENCE = bytes(OUT_FRAME_BYTES)


class LoopError(Exception):
    """A loop file is missing or not PCM16 mono 24 kHz (permanent: re-run make_loops)."""


_loops: dict[str, np.ndarray] = {}
_loops_lock = threading.Lock()


def _read(path: Path) -> np.ndarray:
    try:
        with wave.open(str(path), "rb") as source:
            if (source.getnchannels(), source.getsampwidth(), source.getframerate()) != (1, SAMPLE_BYTES, OUT_RATE):
                raise LoopError(f"{path} is not PCM16 mono {OUT_RATE} Hz")
            samples = np.frombuffer(source.readframes(source.getnframes()), dtype="<i2")
    except (OSError, EOFError, wave.Error) as exc:
        raise LoopError(f"cannot read the loop {path}: {exc}") from exc
    if samples.size < OUT_FRAME_SAMPLES:
        raise LoopError(f"{path} is shorter than one frame")
    # The first frame again at the end: every frame-long slice that starts inside the loop is then
    # one contiguous view, with no wrap-around work per frame.
    extended = np.concatenate([samples, samples[:OUT_FRAME_SAMPLES]]).astype(np.float32)
    extended.flags.writeable = False
    return extended


def loop(name: str) -> np.ndarray:
    """The named loop as read-only float32 samples followed by its first frame again (loaded once)."""
    with _loops_lock:
        samples = _loops.get(name)
        if samples is None:
            samples = _loops[name] = _read(LOOPS_DIR / f"{name}.wav")
        return samples


def preload() -> None:
    for name in (*AMBIENT_SOUNDS, KEYBOARD):
        loop(name)


class _Track:
    """One loop under the mix: its position, and a gain that glides toward its target."""

    __slots__ = ("gain", "length", "position", "samples", "scratch")

    def __init__(self, name: str, *, gain: float) -> None:
        self.samples = loop(name)
        self.length = self.samples.size - OUT_FRAME_SAMPLES
        self.position = 0
        self.gain = gain
        self.scratch = np.empty(OUT_FRAME_SAMPLES, dtype=np.float32)

    def add_to(self, mix: np.ndarray, *, target: float, level: float) -> None:
        """Add this frame of the loop at level x gain; a silent, stopped track does not advance."""
        if self.gain == target == 0.0:
            return
        piece = self.samples[self.position : self.position + OUT_FRAME_SAMPLES]
        if self.gain == target:
            np.multiply(piece, level * target, out=self.scratch)
        else:
            if target > self.gain:
                gains = np.minimum(self.gain + _RAMP, target)
                self.gain = min(self.gain + _RAMP_PER_FRAME, target)
            else:
                gains = np.maximum(self.gain - _RAMP, target)
                self.gain = max(self.gain - _RAMP_PER_FRAME, target)
            np.multiply(piece, gains, out=self.scratch)
            self.scratch *= level
        mix += self.scratch
        self.position = (self.position + OUT_FRAME_SAMPLES) % self.length


class Mixer:
    """One session's mix. `ambient` is None (or "none"), "office1" or "office2"; `volume` (0-1) is the
    bed's gain on the loop as stored; `ducking` lowers the bed to DUCKED x volume while either side
    speaks. Not thread-safe: one playout task drives it."""

    def __init__(self, *, ambient: str | None, volume: float, ducking: bool) -> None:
        if ambient not in NO_AMBIENT and ambient not in AMBIENT_SOUNDS:
            raise ValueError(f"unknown ambient sound {ambient!r}")
        volume = float(volume)
        self.volume = min(volume, 1.0) if volume > 0 else 0.0  # NaN counts as 0
        self.ducking = ducking
        self.has_bed = ambient in AMBIENT_SOUNDS and self.volume > 0
        self._bed = _Track(ambient, gain=1.0) if self.has_bed and ambient is not None else None
        self._keys = _Track(KEYBOARD, gain=0.0)
        self._mix = np.empty(OUT_FRAME_SAMPLES, dtype=np.float32)
        self._pcm = np.empty(OUT_FRAME_SAMPLES, dtype="<i2")

    def next_frame(self, speech: bytes | None, *, user_speaking: bool, keyboard: bool) -> bytes:
        """The next 20 ms of the stream: `speech` (up to a frame of the agent's PCM16, or None while
        it is silent; shorter is padded with silence) over the bed and, while `keyboard`, the typing."""
        if self._bed is None and not keyboard and self._keys.gain == 0.0:
            # Nothing to mix in: the frame is the speech itself (padded), without the float round trip.
            if speech is None:
                return _SILENCE
            if len(speech) >= OUT_FRAME_BYTES:
                return speech[:OUT_FRAME_BYTES] if len(speech) > OUT_FRAME_BYTES else speech
            return speech[: len(speech) & ~1] + _SILENCE[len(speech) & ~1 :]
        mix = self._mix
        if speech:
            count = min(len(speech) // SAMPLE_BYTES, OUT_FRAME_SAMPLES)
            mix[:count] = np.frombuffer(speech, dtype="<i2", count=count)
            mix[count:] = 0.0
        else:
            mix.fill(0.0)
        if self._bed is not None:
            ducked = self.ducking and (speech is not None or user_speaking)
            self._bed.add_to(mix, target=DUCKED if ducked else 1.0, level=self.volume)
        self._keys.add_to(mix, target=1.0 if keyboard else 0.0, level=KEYBOARD_GAIN)
        np.rint(mix, out=mix)
        np.clip(mix, -32768, 32767, out=mix)
        self._pcm[:] = mix
        return self._pcm.tobytes()
