"""Phone audio conversions: mu-law and A-law bit-exact with the stdlib's audioop, whole 20 ms frames, the
anti-aliasing of 24 -> 8 kHz, and filter state carried across chunks."""

from __future__ import annotations

import warnings

import numpy as np

from telephony import audio
from testing.twilio_stream import from_phone, to_phone

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import audioop


def tone(hz: float, seconds: float, rate: int, level: float = 10000.0) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (level * np.sin(2 * np.pi * hz * t)).astype("<i2")


def level(samples: np.ndarray) -> float:
    return float(np.sqrt(np.mean(samples.astype(np.float64) ** 2)))


def test_mu_law_matches_audioop_on_every_input() -> None:
    every_byte = bytes(range(256))
    assert audio.ulaw_decode(every_byte).tobytes() == audioop.ulaw2lin(every_byte, 2)
    every_sample = np.arange(-32768, 32768, dtype="<i2")
    assert audio.ulaw_encode(every_sample) == audioop.lin2ulaw(every_sample.tobytes(), 2)
    assert audio.ulaw_encode(np.zeros(1, dtype="<i2"))[0] == audio.SILENCE_BYTE


def test_a_law_matches_audioop_on_every_input() -> None:
    every_byte = bytes(range(256))
    assert audio.alaw_decode(every_byte).tobytes() == audioop.alaw2lin(every_byte, 2)
    every_sample = np.arange(-32768, 32768, dtype="<i2")
    assert audio.alaw_encode(every_sample) == audioop.lin2alaw(every_sample.tobytes(), 2)


def test_agent_audio_becomes_whole_20_ms_frames() -> None:
    encoder = audio.PhoneEncoder()
    speech = tone(440, 1.0, 24000).tobytes()
    frames = [
        frame for offset in range(0, len(speech), 2880) for frame in encoder.encode(speech[offset : offset + 2880])
    ]
    assert len(frames) == 50 and {len(frame) for frame in frames} == {audio.FRAME_BYTES}


def test_downsampling_removes_what_would_alias() -> None:
    for hz, expected in ((1000, 1.0), (3000, 1.0), (5000, 0.0), (7000, 0.0), (10000, 0.0)):
        down = audio.Downsampler()
        source = tone(hz, 0.5, 24000).tobytes()
        out = np.concatenate([down.process(source[i : i + 960]) for i in range(0, len(source), 960)])
        ratio = level(out[200:]) / level(tone(hz, 0.5, 24000))
        assert abs(ratio - expected) < 0.02, (hz, ratio)


def test_filters_keep_their_state_across_chunks() -> None:
    source = tone(1000, 0.3, 24000).tobytes()
    whole = audio.Downsampler().process(source)
    down = audio.Downsampler()
    chunked = np.concatenate([down.process(source[i : i + 1000]) for i in range(0, len(source), 1000)])
    assert np.array_equal(whole, chunked)
    caller = audio.ulaw_encode(tone(500, 0.3, 8000))
    up = audio.Upsampler()
    pieces = b"".join(audio.phone_to_engine(caller[i : i + 160], up) for i in range(0, len(caller), 160))
    assert pieces == audio.phone_to_engine(caller, audio.Upsampler())
    assert len(pieces) == len(caller) * 4  # 16 kHz PCM16: two samples of two bytes per mu-law byte


def test_a_tone_keeps_its_level_through_the_phone_line() -> None:
    original = tone(440, 1.0, 16000, level=8000).tobytes()
    back = np.frombuffer(from_phone(to_phone(original)), dtype="<i2")
    assert abs(level(back[1600:-1600]) / level(np.frombuffer(original, dtype="<i2")[1600:-1600]) - 1) < 0.05
