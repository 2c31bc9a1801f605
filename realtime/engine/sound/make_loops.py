"""Generate the mixer's loops into loops/: `office1.wav`, `office2.wav` and `keyboard.wav`.

Run: .venv/bin/python -m realtime.engine.sound.make_loops  (deterministic: seeded NumPy, no inputs)

Every sound is made procedurally and is seamless by construction, not by a crossfade: noise is
synthesized in the frequency domain (random complex spectrum shaped by a filter curve, inverse FFT),
which makes it exactly periodic over the loop; filtering and room reverb are circular (FFT)
convolutions; tones have a whole number of cycles per loop; and short events are added modulo the
loop length, so that one crossing the end continues at the start.

- office1 (6 s): a calm office. Air-conditioning airflow (pink noise, 30 Hz-1.8 kHz), a low duct
  rumble, a faint 60 Hz mains hum with harmonics, and distant murmur: three "talkers", each
  band-limited noise (180 Hz-1.4 kHz) gated by a random 2-6 Hz syllable envelope and a slow phrase
  envelope, so that the voices come and go without words.
- office2 (6 s): a busier, brighter office. A wider noise floor (40 Hz-3.5 kHz), six nearer talkers,
  and occasional desk and chair sounds (mug and desk knocks, chair-castor and pen clicks) in a small
  room reverb. There is deliberately no phone ring: in a 6 s loop it would ring every 6 s, which a
  listener notices at once as a loop.
- keyboard (4 s): typing. Words of 2-7 key presses at irregular intervals (gamma-distributed, about
  140 ms apart) with pauses between words; each key is a bright tick (band-passed noise, 1 ms decay)
  over a plastic "thock" (a damped 280-420 Hz resonance), followed 50-90 ms later by a softer release
  tick; the space bar is lower and louder. Every key varies in level, pitch and decay.

The office loops are stored at AMBIENT_RMS: the mixer plays them at `ambientSoundVolume` x that
level, about -43 dBFS at the default 0.25 and -31 dBFS at 1.0, while eSpeak NG speech runs at about
-21 dBFS RMS. The keyboard loop is stored peak-normalized and the mixer sets its level.
"""

from __future__ import annotations

import wave
from collections.abc import Callable
from pathlib import Path

import numpy as np

from realtime.engine.audio import OUT_RATE as RATE  # the mixer plays the loops as they are

LOOPS_DIR = Path(__file__).parent / "loops"
SEED = 5
AMBIENT_RMS = 900.0  # int16 units, about -31 dBFS
KEYBOARD_PEAK = 16000.0  # about -6 dBFS

Shape = Callable[[np.ndarray], np.ndarray]  # frequencies in Hz -> magnitude


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x))))


def _freqs(n: int) -> np.ndarray:
    return np.fft.rfftfreq(n, 1 / RATE)


def _band(low: float, high: float, order: int = 2) -> Shape:
    """A Butterworth-like band-pass magnitude (zero phase)."""

    def shape(f: np.ndarray) -> np.ndarray:
        f = np.maximum(f, 1e-3)
        return 1 / np.sqrt((1 + (low / f) ** (2 * order)) * (1 + (f / high) ** (2 * order)))

    return shape


def _pink(band: Shape) -> Shape:
    return lambda f: band(f) / np.sqrt(np.maximum(f, 1.0))


def _noise(rng: np.random.Generator, n: int, shape: Shape) -> np.ndarray:
    """Gaussian noise of unit RMS with the given spectrum, exactly periodic over n samples."""
    f = _freqs(n)
    spectrum = (rng.standard_normal(f.size) + 1j * rng.standard_normal(f.size)) * shape(f)
    spectrum[0] = 0
    x = np.fft.irfft(spectrum, n)
    return x / _rms(x)


def _filtered(x: np.ndarray, shape: Shape) -> np.ndarray:
    """Circular (loop-preserving) filtering."""
    return np.fft.irfft(np.fft.rfft(x) * shape(_freqs(x.size)), x.size)


def _room(rng: np.random.Generator, x: np.ndarray, *, decay: float, wet: float) -> np.ndarray:
    """A small room: the dry sound plus a circular convolution with an exponentially decaying,
    darkened noise tail (decay: seconds to fall by 60 dB)."""
    t = np.arange(int(decay * RATE)) / RATE
    tail = rng.standard_normal(t.size) * np.exp(-6.9 * t / decay)
    response = np.zeros(x.size)
    response[: tail.size] = tail / np.sqrt(np.sum(tail**2))
    reverb = np.fft.irfft(np.fft.rfft(x) * np.fft.rfft(response) * _band(80, 4000)(_freqs(x.size)), x.size)
    return x + wet * reverb


def _place(loop: np.ndarray, event: np.ndarray, start: int) -> None:
    """Add a short sound at `start`, continuing at the loop's beginning if it runs past the end."""
    loop[(start + np.arange(event.size)) % loop.size] += event


def _talker(rng: np.random.Generator, n: int) -> np.ndarray:
    """Wordless distant speech: voice-band noise gated by syllable- and phrase-rate envelopes."""
    low = rng.uniform(150, 220)
    voice = _noise(rng, n, _pink(_band(low, rng.uniform(1200, 1600))))
    syllables = _noise(rng, n, _band(2.0, 6.0, order=3))
    phrases = _noise(rng, n, _band(0.15, 0.6, order=2))
    envelope = np.clip(syllables + 0.4, 0, None) ** 1.5 / (1 + np.exp(-3 * (phrases + 0.2)))
    talk: np.ndarray = voice * envelope
    return talk


def _babble(rng: np.random.Generator, n: int, talkers: int) -> np.ndarray:
    mix = sum(_talker(rng, n) * rng.uniform(0.6, 1.0) for _ in range(talkers))
    assert isinstance(mix, np.ndarray)  # talkers >= 1: not sum()'s start, 0
    return mix / _rms(mix)


def _hum(n: int, partials: tuple[tuple[float, float], ...]) -> np.ndarray:
    t = np.arange(n) / RATE
    for frequency, _ in partials:
        assert (frequency * n / RATE).is_integer(), "a hum partial must have whole cycles per loop"
    hum = sum(level * np.sin(2 * np.pi * frequency * t + i) for i, (frequency, level) in enumerate(partials))
    assert isinstance(hum, np.ndarray)  # partials is not empty: not sum()'s start, 0
    return hum


def _decaying(rng: np.random.Generator, seconds: float, tau: float, band: Shape | None = None) -> np.ndarray:
    """A noise burst (band-passed first, so that its onset stays sharp) under an exponential decay."""
    n = int(seconds * RATE)
    burst = rng.standard_normal(n)
    if band is not None:
        burst = _filtered(burst, band)
    decayed: np.ndarray = burst / np.max(np.abs(burst)) * np.exp(-np.arange(n) / RATE / tau)
    return decayed


def _resonance(frequency: float, seconds: float, tau: float) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return np.sin(2 * np.pi * frequency * t) * np.exp(-t / tau)


def _normalized(x: np.ndarray, *, rms: float | None = None, peak: float | None = None) -> np.ndarray:
    return x * (rms / _rms(x) if rms is not None else peak / np.max(np.abs(x)))


def office1(rng: np.random.Generator, seconds: float = 6.0) -> np.ndarray:
    n = int(seconds * RATE)
    air = _noise(rng, n, _pink(_band(30, 1800)))
    rumble = _noise(rng, n, _band(20, 110))
    hum = _hum(n, ((60.0, 0.3), (120.0, 1.0), (180.0, 0.25), (240.0, 0.1)))
    mix = air + 0.35 * rumble + 0.06 * hum / _rms(hum) + 0.5 * _babble(rng, n, 3)
    return _normalized(mix, rms=AMBIENT_RMS)


def _desk_sound(rng: np.random.Generator) -> np.ndarray:
    kind = rng.integers(3)
    if kind == 0:  # a mug or knuckle on a desk
        return _resonance(rng.uniform(180, 320), 0.25, 0.03) + 0.4 * _resonance(rng.uniform(700, 1100), 0.25, 0.01)
    if kind == 1:  # a pen click or a drawer latch
        return _decaying(rng, 0.05, 0.002, _band(1500, 6000))
    # a chair castor: a short train of soft clicks
    sound = np.zeros(int(0.3 * RATE))
    for _ in range(rng.integers(4, 8)):
        _place(sound, 0.4 * _decaying(rng, 0.03, 0.003, _band(800, 3500)), int(rng.uniform(0, 0.25) * RATE))
    return sound


def office2(rng: np.random.Generator, seconds: float = 6.0) -> np.ndarray:
    n = int(seconds * RATE)
    floor = _noise(rng, n, _pink(_band(40, 3500)))
    events = np.zeros(n)
    starts = np.sort(rng.choice(np.arange(0, n, RATE // 4), size=5, replace=False))
    for start in starts:
        sound = _desk_sound(rng)
        _place(events, sound / np.max(np.abs(sound)) * rng.uniform(3.0, 4.5), int(start))
    events = _room(rng, events, decay=0.35, wet=0.5)
    mix = 0.7 * floor + 0.9 * _babble(rng, n, 6) + events
    return _normalized(mix, rms=AMBIENT_RMS)


def _key(rng: np.random.Generator, *, space: bool) -> np.ndarray:
    sound = np.zeros(int(0.16 * RATE))
    tick = _decaying(rng, 0.02, rng.uniform(0.0007, 0.0014), _band(2000, 9000))
    if space:
        body = _resonance(rng.uniform(150, 220), 0.08, rng.uniform(0.010, 0.016))
    else:
        body = _resonance(rng.uniform(280, 420), 0.05, rng.uniform(0.004, 0.008))
    sound[: tick.size] += tick
    sound[: body.size] += rng.uniform(0.4, 0.7) * body
    release = _decaying(rng, 0.015, rng.uniform(0.0005, 0.001), _band(2500, 9000))
    _place(sound, rng.uniform(0.25, 0.45) * release, int(rng.uniform(0.05, 0.09) * RATE))
    return sound * rng.uniform(0.65, 1.0) * (1.3 if space else 1.0)


def keyboard(rng: np.random.Generator, seconds: float = 4.0) -> np.ndarray:
    n = int(seconds * RATE)
    loop = np.zeros(n)
    t = 0.05
    # Typing until shortly before the end, so that the pause across the wrap is a plausible one.
    while t < seconds - 0.35:
        for _ in range(rng.integers(2, 8)):
            _place(loop, _key(rng, space=False), int(t * RATE))
            t += rng.gamma(4.0, 0.035)
            if t >= seconds - 0.35:
                break
        else:
            _place(loop, _key(rng, space=True), int(t * RATE))
            t += rng.uniform(0.2, 0.5)
    return _normalized(_room(rng, loop, decay=0.12, wet=0.15), peak=KEYBOARD_PEAK)


def write_wav(path: Path, samples: np.ndarray) -> None:
    pcm = np.clip(np.rint(samples), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(RATE)
        out.writeframes(pcm.tobytes())


def main() -> None:
    LOOPS_DIR.mkdir(exist_ok=True)
    makers = {"office1": office1, "office2": office2, "keyboard": keyboard}
    for number, (name, make) in enumerate(makers.items()):
        samples = make(np.random.default_rng(SEED + number))
        path = LOOPS_DIR / f"{name}.wav"
        write_wav(path, samples)
        level = 20 * np.log10(_rms(samples) / 32768)
        print(f"{path}: {samples.size / RATE:.1f} s, {path.stat().st_size // 1024} KB, {level:.1f} dBFS RMS")


if __name__ == "__main__":
    main()
