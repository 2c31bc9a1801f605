"""The session's recording with the cascade pipeline, small stand-in speech parts and a hand-driven clock
(the harness of test_pipeline.py): both sides on the call's clock, the agent cut where a barge-in stopped
the caller hearing it, stored once the call has ended; and the tracks' own rules (gaps, bursts, the cap)."""

from __future__ import annotations

import io
from typing import Any

import av
import numpy as np
import pytest
from asgiref.sync import sync_to_async

from calls.models import Call
from calls.recordings import recording_storage
from realtime.engine.contracts import TextPiece
from realtime.engine.session.recording import CallAudio, recordings_saved
from realtime.tests.test_pipeline import GREETING, Harness
from realtime.tests.test_s2s_pipeline import Harness as SpeechToSpeechHarness
from testing.fakes import ScriptedBrain, silence
from testing.speech_to_speech_provider import ProviderServer, Say, eventually

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_db_threads")]

IN_RATE, OUT_RATE = 16000, 24000


@pytest.fixture
def storage_dir(settings: Any, tmp_path: Any) -> Any:
    settings.STORAGES = {
        **settings.STORAGES,
        "recordings": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "recordings")},
        },
    }
    return tmp_path / "recordings"


@pytest.fixture
async def provider(settings):
    """The scripted speech-to-speech provider on loopback, as in test_s2s_pipeline.py."""
    async with ProviderServer() as server:
        settings.VOICE_ENGINE = "speech-to-speech"
        settings.REALTIME_PROVIDER_URL = server.url
        settings.REALTIME_PROVIDER_MODEL = "gpt-realtime-test"
        settings.REALTIME_PROVIDER_API_KEY = "sk-s2s-test-key-Zq8"
        yield server


@pytest.fixture
def agent(active_agent):
    active_agent.greeting_type = "static"
    active_agent.static_greeting = GREETING
    active_agent.recording_enabled = True
    active_agent.save()
    return active_agent


def samples(track: Any) -> np.ndarray:
    track.file.seek(0)
    return np.frombuffer(track.file.read(), dtype="<i2")


def voiced(pcm: np.ndarray, rate: int, start: float, end: float) -> float:
    """The share of non-silent samples between two times of the call (seconds)."""
    part = pcm[int(start * rate) : int(end * rate)]
    return float(np.count_nonzero(part)) / max(1, part.size)


async def test_both_sides_are_recorded_on_the_call_clock_and_the_agent_is_cut_at_barge_in(agent, storage_dir):
    brain = ScriptedBrain([TextPiece("One two three four five. Six seven eight nine ten. Eleven twelve.")])
    h = Harness(agent, texts=["question", "stop please"], brain=brain)
    await h.start()
    audio = h.conversation.audio
    assert audio is not None
    origin = audio.origin
    await h.feed(silence(2000))  # the disclosure and greeting play (2 s)
    spoke = h.clock.now()
    await h.talk(600, then_silence_ms=150)
    await h.feed(silence(500))  # about five words of the answer heard
    await h.talk(600, then_silence_ms=300)  # barge-in
    cleared = next(at for at, kind, _ in h.transport.events if kind == "clear")
    answer = [(at, pcm) for at, kind, pcm in h.transport.events if kind == "audio" and spoke < at < cleared]

    caller, agent_track = samples(audio.caller), samples(audio.agent)
    # The caller's speech where it was spoken (the 2 s of silence before it is silent).
    assert voiced(caller, IN_RATE, spoke - origin + 0.02, spoke - origin + 0.58) == 1.0
    assert voiced(caller, IN_RATE, 0, spoke - origin - 0.02) == 0.0
    # The greeting on the agent's side while the caller was silent, and nothing of the agent while they spoke.
    assert voiced(agent_track, OUT_RATE, 0.05, 1.95) == 1.0
    assert voiced(agent_track, OUT_RATE, spoke - origin + 0.02, spoke - origin + 0.58) == 0.0
    # The answer plays until the barge-in, and not a moment after: what the playout had already sent
    # ahead (up to 200 ms) was cleared from the listener and is not in the recording.
    sent_until = answer[0][0] + sum(len(pcm) for _, pcm in answer) / (OUT_RATE * 2)  # the stream's end
    assert sent_until > cleared + 0.1
    assert voiced(agent_track, OUT_RATE, cleared - origin - 0.3, cleared - origin - 0.01) == 1.0
    assert voiced(agent_track, OUT_RATE, cleared - origin + 0.01, cleared - origin + 0.15) == 0.0

    await h.feed(silence(2500))  # the answer to "stop please"
    call = await h.stop()
    assert call.status == "completed" and h.conversation.audio is None
    await recordings_saved()
    call = await sync_to_async(Call.objects.get)(pk=call.pk)
    assert call.recording_key and call.recording_saved_at is not None
    stored = await sync_to_async(lambda: recording_storage().open(call.recording_key).read())()
    with av.open(io.BytesIO(stored)) as container:
        rate = container.streams.audio[0].rate
        decoded = np.concatenate([frame.to_ndarray() for frame in container.decode(audio=0)], axis=1)
    assert decoded.shape[0] == 2
    assert abs(decoded.shape[1] / rate - (h.clock.now() - origin)) < 0.3
    assert [path.name for path in storage_dir.rglob("*.ogg")] == [f"{call.pk}.ogg"]


async def test_the_speech_to_speech_pipeline_is_recorded_through_the_same_shell(agent, provider, storage_dir):
    h = SpeechToSpeechHarness(agent)
    await h.start()
    audio = h.conversation.audio
    assert audio is not None
    await h.greeted()
    connection = provider.last
    long = "One two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen."
    before = len(h.transport.events)
    await provider.run(lambda: connection.caller_turn("tell me a story", Say(long)))
    await h.received(1.6)
    await h.clock.advance(0.8)
    await provider.run(connection.speech_started)  # the caller barges in
    await eventually(lambda: "clear" in h.transport.kinds())
    cleared = next(at for at, kind, _ in h.transport.events[before:] if kind == "clear")
    answer_start = next(at for at, kind, _ in h.transport.events[before:] if kind == "audio")
    agent_track = samples(audio.agent)
    origin = audio.origin
    # The provider speaks tones (a few samples at their zero crossings are 0).
    assert voiced(agent_track, OUT_RATE, 0.05, 1.95) > 0.95  # the disclosure and greeting
    assert voiced(agent_track, OUT_RATE, answer_start - origin + 0.05, cleared - origin - 0.05) > 0.95
    assert voiced(agent_track, OUT_RATE, cleared - origin + 0.01, cleared - origin + 0.15) == 0.0
    call = await h.stop()
    await recordings_saved()
    assert (await sync_to_async(Call.objects.get)(pk=call.pk)).recording_key


async def test_nothing_is_recorded_when_the_agent_has_recording_off(agent, storage_dir):
    agent.recording_enabled = False
    await sync_to_async(agent.save)()
    h = Harness(agent)
    await h.start()
    assert h.conversation.audio is None
    await h.feed(silence(2300))
    call = await h.stop()
    await recordings_saved()
    assert (await sync_to_async(Call.objects.get)(pk=call.pk)).recording_key == ""
    assert not storage_dir.exists() or not list(storage_dir.rglob("*"))


def test_caller_audio_keeps_its_gaps_and_lays_bursts_end_to_end():
    audio = CallAudio(100.0, max_seconds=10)
    chunk = (1000).to_bytes(2, "little", signed=True) * 320  # 20 ms
    audio.caller_audio(100.02, chunk)  # 0-20 ms
    audio.caller_audio(100.04, chunk)  # 20-40 ms
    audio.caller_audio(101.02, chunk)  # a gap: 1.0-1.02 s
    for _ in range(5):
        audio.caller_audio(101.03, chunk)  # a burst of 100 ms arriving at once: after the last
    pcm = samples(audio.caller)
    assert voiced(pcm, IN_RATE, 0, 0.04) == 1.0
    assert voiced(pcm, IN_RATE, 0.04, 1.0) == 0.0
    assert voiced(pcm, IN_RATE, 1.0, 1.12) == 1.0
    assert pcm.size == int(1.12 * IN_RATE)
    audio.close()


def test_the_tracks_are_capped_at_the_maximum_length():
    audio = CallAudio(0.0, max_seconds=1)
    second = (500).to_bytes(2, "little", signed=True) * OUT_RATE
    audio.agent_audio(0.5, second)
    audio.agent_audio(2.0, second)  # beyond the cap: dropped
    assert audio.agent.size == OUT_RATE * 2  # one second
    audio.cut(0.75)
    assert audio.agent.size == int(0.75 * OUT_RATE) * 2
    audio.close()
