"""The embedded mixer as a listener hears it: 20 ms frames of speech over the ambient bed and the
keyboard loop, ducking, saturation, and the loop files themselves."""

from __future__ import annotations

import wave

import numpy as np
import pytest

from realtime.engine.sound import mixer

FRAME_BYTES = 960
SILENT_SPEECH = bytes(FRAME_BYTES)  # the agent "speaks" silence: what remains is the bed alone
TYPICAL_SPEECH_RMS = 2500  # eSpeak NG voices, measured on spoken sentences (about -22 dBFS)


def play(m: mixer.Mixer, count: int, speech: bytes | None = None, *, user: bool = False, keys: bool = False):
    """`count` frames as one array of samples."""
    frames = [m.next_frame(speech, user_speaking=user, keyboard=keys) for _ in range(count)]
    assert all(len(frame) == FRAME_BYTES for frame in frames)
    return np.frombuffer(b"".join(frames), dtype="<i2").astype(np.float64)


def rms(samples: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(samples))))


def read_loop(name: str) -> np.ndarray:
    with wave.open(str(mixer.LOOPS_DIR / f"{name}.wav"), "rb") as source:
        assert (source.getnchannels(), source.getsampwidth(), source.getframerate()) == (1, 2, 24000)
        return np.frombuffer(source.readframes(source.getnframes()), dtype="<i2").astype(np.float64)


def test_every_frame_is_20_ms_of_pcm16_24k_whatever_it_is_given() -> None:
    m = mixer.Mixer(ambient="office1", volume=0.25, ducking=True)
    for speech in (None, SILENT_SPEECH, b"\x10\x00" * 50, b"\x01\x02\x03", b""):
        for user in (False, True):
            for keys in (False, True):
                assert len(m.next_frame(speech, user_speaking=user, keyboard=keys)) == FRAME_BYTES


def test_it_is_silent_without_bed_speech_or_keyboard() -> None:
    m = mixer.Mixer(ambient=None, volume=0.25, ducking=True)
    assert not play(m, 10).any()
    assert not play(m, 10, user=True).any()


@pytest.mark.parametrize(("ambient", "volume"), [(None, 0.5), ("none", 0.5), ("office1", 0.0), ("office2", 0.0)])
def test_there_is_no_bed_without_an_ambient_sound_or_at_volume_zero(ambient, volume) -> None:
    m = mixer.Mixer(ambient=ambient, volume=volume, ducking=False)
    assert m.has_bed is False
    assert not play(m, 20).any()


@pytest.mark.parametrize("ambient", ["office1", "office2"])
def test_an_ambient_sound_plays_a_bed_under_the_whole_session(ambient) -> None:
    m = mixer.Mixer(ambient=ambient, volume=0.25, ducking=False)
    assert m.has_bed is True
    assert rms(play(m, 50)) > 100  # audible, about -43 dBFS at the default volume


def test_an_unknown_ambient_sound_is_refused() -> None:
    with pytest.raises(ValueError, match="office3"):
        mixer.Mixer(ambient="office3", volume=0.25, ducking=False)


def test_short_speech_is_padded_with_silence() -> None:
    m = mixer.Mixer(ambient=None, volume=0.25, ducking=True)
    speech = np.arange(1, 101, dtype="<i2") * 100
    out = play(m, 1, speech.tobytes())
    assert (out[:100] == speech).all()
    assert not out[100:].any()


def test_ambient_level_scales_with_volume_and_stays_below_speech() -> None:
    levels = {
        volume: rms(play(mixer.Mixer(ambient="office1", volume=volume, ducking=False), 100))
        for volume in (0.25, 0.5, 1.0)
    }
    assert levels[0.5] / levels[0.25] == pytest.approx(2, rel=0.02)
    assert levels[1.0] / levels[0.25] == pytest.approx(4, rel=0.02)
    assert levels[1.0] < TYPICAL_SPEECH_RMS / 2  # more than 6 dB below speech even at full volume


@pytest.mark.parametrize("who", ["agent", "user"])
def test_ducking_lowers_the_bed_to_35_percent_while_someone_speaks_and_restores_it(who) -> None:
    ducked = mixer.Mixer(ambient="office2", volume=0.5, ducking=True)
    steady = mixer.Mixer(ambient="office2", volume=0.5, ducking=False)
    speech = SILENT_SPEECH if who == "agent" else None
    user = who == "user"

    assert rms(play(ducked, 10)) == pytest.approx(rms(play(steady, 10)), rel=0.01)
    # It glides down over a few tens of milliseconds: no jump at the start of the speech.
    gliding, reference = play(ducked, 3, speech, user=user), play(steady, 3)
    assert rms(gliding[:48]) / rms(reference[:48]) > 0.9
    assert rms(gliding[-480:]) / rms(reference[-480:]) == pytest.approx(0.35, rel=0.03)
    assert rms(play(ducked, 50, speech, user=user)) / rms(play(steady, 50)) == pytest.approx(0.35, rel=0.02)
    # Back up after the speech, again smoothly.
    rising, reference = play(ducked, 3), play(steady, 3)
    assert rms(rising[:48]) / rms(reference[:48]) < 0.45
    assert rms(play(ducked, 50)) / rms(play(steady, 50)) == pytest.approx(1, rel=0.01)


def test_without_ducking_the_bed_keeps_its_level_under_speech() -> None:
    m = mixer.Mixer(ambient="office1", volume=0.25, ducking=False)
    quiet = rms(play(m, 150))
    assert rms(play(m, 150, SILENT_SPEECH, user=True)) == pytest.approx(quiet, rel=0.15)


def test_keyboard_plays_while_asked_also_without_a_bed_and_then_stops() -> None:
    m = mixer.Mixer(ambient=None, volume=0.25, ducking=True)
    typing = play(m, 100, keys=True)
    assert rms(typing) > 200
    assert np.abs(typing).max() < 16000  # moderate: well below full scale
    play(m, 5)  # the last click fades out
    assert not play(m, 10).any()


def test_keyboard_adds_to_the_bed() -> None:
    bed = play(mixer.Mixer(ambient="office1", volume=0.25, ducking=False), 100)
    both = play(mixer.Mixer(ambient="office1", volume=0.25, ducking=False), 100, keys=True)
    assert rms(both) > 1.5 * rms(bed)


@pytest.mark.parametrize("full_scale", [32767, -32768])
def test_loud_speech_over_the_bed_saturates_instead_of_wrapping(full_scale) -> None:
    m = mixer.Mixer(ambient="office2", volume=1.0, ducking=False)
    speech = np.full(480, full_scale, dtype="<i2").tobytes()
    out = play(m, 100, speech, keys=True)
    assert (np.sign(out) == np.sign(full_scale)).all()
    assert np.abs(out).max() == abs(full_scale)
    assert np.abs(out).min() > 16000  # the bed and the keys only pull it back from full scale a little


@pytest.mark.parametrize("name", ["office1", "office2", "keyboard"])
def test_the_loops_are_short_small_files(name) -> None:
    path = mixer.LOOPS_DIR / f"{name}.wav"
    assert path.stat().st_size < 500_000
    assert 2 <= read_loop(name).size / 24000 <= 10


@pytest.mark.parametrize("name", ["office1", "office2", "keyboard"])
def test_the_loops_are_seamless(name) -> None:
    samples = read_loop(name)
    steps = np.abs(np.diff(samples))
    assert abs(samples[0] - samples[-1]) <= np.percentile(steps, 99)


def test_the_bed_plays_round_and_round_without_a_gap() -> None:
    length = read_loop("office1").size
    out = play(mixer.Mixer(ambient="office1", volume=1.0, ducking=False), 2 * length // 480 + 1)
    assert (out[length : 2 * length] == out[:length]).all()
    wrap_step = abs(out[length] - out[length - 1])
    assert wrap_step <= np.percentile(np.abs(np.diff(out[:length])), 99)


def test_office2_is_busier_and_brighter_than_office1() -> None:
    def centroid(samples: np.ndarray) -> float:
        power = np.abs(np.fft.rfft(samples)) ** 2
        return float((power * np.fft.rfftfreq(samples.size, 1 / 24000)).sum() / power.sum())

    def fluctuation(samples: np.ndarray) -> float:
        levels = np.sqrt(np.mean(np.square(samples.reshape(-1, 480)), axis=1))
        return float(levels.std() / levels.mean())

    office1, office2 = read_loop("office1"), read_loop("office2")
    assert centroid(office2) > 1.3 * centroid(office1)
    assert fluctuation(office2) > 1.3 * fluctuation(office1)


def test_each_mixer_keeps_its_own_place_in_the_loops() -> None:
    first = mixer.Mixer(ambient="office1", volume=0.25, ducking=False)
    play(first, 25, keys=True)
    second = mixer.Mixer(ambient="office1", volume=0.25, ducking=False)
    fresh = mixer.Mixer(ambient="office1", volume=0.25, ducking=False)
    assert (play(second, 5, keys=True) == play(fresh, 5, keys=True)).all()
    assert not (play(first, 5, keys=True) == play(second, 5, keys=True)).all()
