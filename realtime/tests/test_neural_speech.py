"""Offline neural speech (ASR_PROVIDER=whisper, TTS_PROVIDER=piper) with real models: Whisper base
converted for CTranslate2 and the Piper en_US-joe-medium voice, both from dev-only PyPI packages
(requirements-dev.txt; docs/guides/neural-speech.md has what they hold and where they come from). Whisper hears
Piper and eSpeak NG; pinned sha256 values are enforced; missing files are named by the system check; a
failing model gets the offline apology; and one conversation goes through the project's ASGI
application (in the test's process, testing/inprocess.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from calls.models import Call
from kit.providers import ProviderError
from realtime.engine.audio import OUT_RATE
from realtime.engine.cascade import kit as voice
from realtime.engine.phrases import phrase
from realtime.engine.speech import piper, whisper
from realtime.engine.speech.espeak import synthesize
from realtime.engine.speech.piper import PiperSpeech
from realtime.engine.speech.whisper import WhisperRecognition, token_cap
from testing.fakes import silence, speech
from testing.pipeline import provider_harness, spoken_offline
from testing.speech_models import packaged_piper_joe, packaged_whisper_base, word_errors, words
from testing.voice import to_16k

# sha256 of the packaged model files, recorded when the packages were inspected (docs/guides/neural-speech.md).
# The Piper voice is byte-identical to rhasspy/piper-voices' en_US-joe-medium.onnx; the Whisper model.bin
# is a conversion of openai/whisper-base that is not byte-identical to Systran/faster-whisper-base's.
WHISPER_BASE_SHA256 = "905e5bf8336bcc625ba4e33498d675a4b935504118c594d868c36e91a60c1a57"
JOE_MEDIUM_SHA256 = "58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06"
AVA = SimpleNamespace(name="Ava", language="en-US")


def hear(pcm16_16k: bytes, agent: Any = AVA, vocabulary: list[str] | None = None) -> str:
    recognizer = WhisperRecognition().recognizer(agent, vocabulary or [])
    recognizer.start()
    for start in range(0, len(pcm16_16k), 640):
        recognizer.feed(pcm16_16k[start : start + 640])
    return recognizer.finish()


@pytest.fixture(scope="session")
def whisper_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return packaged_whisper_base(tmp_path_factory.mktemp("whisper-base"))


@pytest.fixture
def neural(settings: Any, whisper_dir: Path) -> Iterator[Any]:
    """Both neural providers configured with the packaged models, pinned by their sha256."""
    settings.ASR_PROVIDER, settings.TTS_PROVIDER = "whisper", "piper"
    settings.WHISPER_MODEL_PATH, settings.WHISPER_MODEL_SHA256 = str(whisper_dir), WHISPER_BASE_SHA256
    settings.WHISPER_CPU_THREADS, settings.WHISPER_BEAM_SIZE = 2, 5
    settings.PIPER_MODEL_PATH, settings.PIPER_MODEL_SHA256 = str(packaged_piper_joe()), JOE_MEDIUM_SHA256
    settings.PIPER_SPEAKER_MAP = ""
    settings.WHISPER_PROMPT_CHARS = 0
    yield settings


# --- the real models ---------------------------------------------------------------------------
@pytest.mark.slow
def test_whisper_hears_what_piper_says(neural):
    sentence = "Please book a table for two people on Friday evening."
    audio = PiperSpeech().synthesize(sentence, "en-US", "eve")
    seconds = len(audio) / 2 / OUT_RATE
    assert 1.5 < seconds < 6 and np.abs(np.frombuffer(audio, dtype="<i2")).max() > 3000
    heard = hear(to_16k(audio), vocabulary=["book_table"])  # no prompt by default (WHISPER_PROMPT_CHARS)
    assert word_errors(sentence, heard) <= 1, heard
    assert {"book", "table", "people", "friday", "evening"} <= set(words(heard))


@pytest.mark.slow
def test_whisper_hears_espeak_ng_speech(neural):
    for sentence, voice_name in (
        ("I would like to cancel my reservation.", "rex"),
        ("What time do you open on Sunday?", "ara"),
    ):
        caller = to_16k(synthesize(sentence, language="en-US", voice_name=voice_name))
        heard = hear(caller)
        assert word_errors(sentence, heard) <= 1, heard
    # A turn without audio, or shorter than a syllable, is not decoded at all.
    recognizer = WhisperRecognition().recognizer(AVA, [])
    assert recognizer.finish() == ""
    recognizer.feed(silence(60))
    assert recognizer.finish() == ""


def test_word_errors_count_substitutions_omissions_and_additions():
    assert word_errors("a table for four", "A table for four.") == 0
    assert word_errors("a table for four", "a table for for") == 1
    assert word_errors("a table for four", "table for four people") == 2


def test_the_token_cap_follows_the_audio_length():
    assert token_cap(1.0) == 16 and token_cap(10.0) == 70
    assert token_cap(30.0) == token_cap(120.0) == 190  # per 30 s window
    assert token_cap(30.0) <= whisper.MAX_WINDOW_TOKENS


@pytest.mark.slow
def test_piper_speaks_only_its_own_language_and_maps_speakers(neural):
    with pytest.raises(ProviderError) as caught:
        PiperSpeech().synthesize("Hola, ¿en qué puedo ayudarle?", "es-US", "eve")
    assert caught.value.permanent
    assert caught.value.message == "The Piper voice at PIPER_MODEL_PATH speaks en, not the agent's language es-US"
    assert PiperSpeech().synthesize(" \x00 ", "en-US", "eve") == b""
    # Speaker maps: a single-speaker voice ignores them; a multi-speaker one resolves names and numbers.
    single = {"num_speakers": 1}
    many = {"num_speakers": 3, "speaker_id_map": {"p225": 0, "p226": 1, "p227": 2}}
    assert piper.speaker_ids(single, "eve=p225") == {}
    assert piper.speaker_ids(many, "eve=p226,*=2") == {"eve": 1, "ara": 2, "rex": 2, "sal": 2, "leo": 2}
    for bad in ("eve=p999", "eve=7", "bob=1", "eve"):
        with pytest.raises(ValueError):
            piper.speaker_ids(many, bad)


# --- pinned files and the system check ----------------------------------------------------------
@pytest.mark.slow
def test_a_model_that_does_not_match_its_pinned_sha256_is_refused(neural, monkeypatch):
    whisper.reset()
    piper.reset()
    neural.WHISPER_MODEL_SHA256 = "0" * 64
    neural.PIPER_MODEL_SHA256 = "A" * 64
    with pytest.raises(ProviderError) as caught:
        WhisperRecognition()
    assert caught.value.permanent
    assert caught.value.message == (
        f"{neural.WHISPER_MODEL_PATH}/model.bin does not match WHISPER_MODEL_SHA256: its sha256 is "
        f"{WHISPER_BASE_SHA256}, WHISPER_MODEL_SHA256 is {'0' * 64}"
    )
    with pytest.raises(ProviderError) as caught:
        whisper.model()  # what a session loads (preload) is refused with the same words
    assert "does not match WHISPER_MODEL_SHA256" in caught.value.message
    with pytest.raises(ProviderError) as caught:
        piper.loaded_voice()
    assert caught.value.permanent and "does not match PIPER_MODEL_SHA256: its sha256 is" in caught.value.message
    neural.PIPER_MODEL_SHA256 = "not-a-hash"
    assert piper.configuration_problems() == ["PIPER_MODEL_SHA256 must be a sha256: 64 hexadecimal digits"]
    voice.reset_kits()
    with pytest.raises(ProviderError) as caught:
        voice.voice_kit()  # a session with these settings fails at its start with the same words
    assert caught.value.permanent and "WHISPER_MODEL_SHA256" in caught.value.message


@pytest.mark.django_db
def test_manage_py_check_names_missing_model_files(settings, tmp_path):
    settings.VOICE_ENGINE = "cascade"
    settings.LLM_PROVIDER = "embedded"
    settings.ASR_PROVIDER, settings.TTS_PROVIDER = "whisper", "piper"
    settings.WHISPER_MODEL_PATH, settings.WHISPER_MODEL_SHA256 = "", ""
    settings.PIPER_MODEL_PATH, settings.PIPER_MODEL_SHA256 = str(tmp_path / "voice.onnx"), ""
    settings.WHISPER_BEAM_SIZE, settings.PIPER_SPEAKER_MAP = 0, ""
    with pytest.raises(SystemCheckError) as caught:
        call_command("check")
    report = str(caught.value)
    assert "WHISPER_MODEL_PATH is not set (the directory of a CTranslate2 Whisper model" in report
    assert "WHISPER_BEAM_SIZE must be 1 (greedy decoding) or more" in report
    assert f"PIPER_MODEL_PATH {tmp_path / 'voice.onnx'} is not a file" in report
    # A directory without the model's files, and a voice without its configuration.
    (tmp_path / "voice.onnx").write_bytes(b"onnx")
    (tmp_path / "whisper").mkdir()
    (tmp_path / "whisper" / "config.json").write_text("{}")
    settings.WHISPER_MODEL_PATH, settings.WHISPER_BEAM_SIZE = str(tmp_path / "whisper"), 1
    with pytest.raises(SystemCheckError) as caught:
        call_command("check")
    report = str(caught.value)
    assert f"WHISPER_MODEL_PATH {tmp_path / 'whisper'} has no model.bin, tokenizer.json" in report
    assert "has no voice.onnx.json beside it" in report


# --- failures in a conversation -------------------------------------------------------------------
async def feed_silence_until(conversation: Any, done: Any, *, at_most_ms: int) -> None:
    """Silence from the caller until `done()` holds (or `at_most_ms` of it): testing/pipeline.py."""
    await conversation.feed_silence_until(done, at_most_ms=at_most_ms)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_db_threads")
async def test_a_failing_model_gets_the_offline_apology_and_the_call_goes_on(neural, active_agent, monkeypatch):

    active_agent.greeting_type = "static"
    active_agent.static_greeting = "Welcome to Acme."
    await sync_to_async(active_agent.save)()
    voice.reset_kits()
    loaded = await sync_to_async(whisper.model)()

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("out of memory")

    monkeypatch.setattr(loaded.whisper, "transcribe", broken)
    conversation = provider_harness(active_agent)
    await conversation.start()
    await feed_silence_until(conversation, lambda: bool(conversation.transport.transcripts()), at_most_ms=9000)
    greeting = conversation.audio_after(0)
    assert greeting[greeting != 0].size > OUT_RATE  # Piper greets
    turn_at = conversation.clock.now()
    await conversation.feed(speech(800) + silence(300))
    apology = ("assistant", phrase("apology", "en-US"))
    await feed_silence_until(conversation, lambda: conversation.transport.transcripts()[-1] == apology, at_most_ms=9000)
    await conversation.feed(silence(1000))
    assert conversation.transport.transcripts()[-1] == apology
    assert spoken_offline(conversation.audio_after(turn_at))
    logs = await conversation.logs()
    failed = [entry for entry in logs if entry["message"] == "speech recognition failed"]
    assert failed and failed[0]["reason"] == "Whisper failed on this turn (RuntimeError)"
    assert failed[0]["permanent"] is False
    call = await conversation.stop()
    assert call.status == "completed"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_db_threads")
async def test_an_agent_in_another_language_is_spoken_by_the_offline_voice(neural, active_agent, monkeypatch):

    neural.ASR_PROVIDER = "embedded"  # PocketSphinx hears Spanish; the Piper voice is English
    active_agent.language = "es-US"
    active_agent.greeting_type = "static"
    active_agent.static_greeting = "Bienvenido a Acme."
    await sync_to_async(active_agent.save)()
    voice.reset_kits()
    conversation = provider_harness(active_agent)
    await conversation.start()
    await feed_silence_until(conversation, lambda: bool(conversation.transport.transcripts()), at_most_ms=12000)
    assert conversation.transport.transcripts()[0][1].endswith("Bienvenido a Acme.")
    assert spoken_offline(conversation.audio_after(0))
    logs = await conversation.logs()
    failed = [entry for entry in logs if entry["message"].startswith("speech synthesis failed")]
    assert [entry["message"] for entry in failed] == ["speech synthesis failed; the offline voice speaks from now on"]
    assert failed[0]["reason"] == "The Piper voice at PIPER_MODEL_PATH speaks en, not the agent's language es-US"
    await conversation.stop()


# --- end to end: a browser socket on the application (in-process) --------------------------------
SENTENCE = "I would like to book a table for four people tomorrow evening."


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_db_threads")
async def test_a_spoken_conversation_with_whisper_and_piper_through_the_application(
    whisper_dir, owner, make_agent, realtime_settings, settings, caplog
):
    from calls.logging import flush_agent_logs
    from calls.models import AgentLog
    from realtime import tokens
    from testing.clients import VoiceClient, is_type
    from testing.inprocess import serving

    agent = await sync_to_async(make_agent)(
        owner.organization,
        name="Ava",
        status="active",
        instructions="You take table reservations for the Acme restaurant.",
        greeting_type="static",
        static_greeting="Hello, this is Ava from Acme. How can I help you today?",
    )
    values = {
        "ASR_PROVIDER": "whisper",
        "WHISPER_MODEL_PATH": str(whisper_dir),
        "WHISPER_MODEL_SHA256": WHISPER_BASE_SHA256,
        "TTS_PROVIDER": "piper",
        "PIPER_MODEL_PATH": str(packaged_piper_joe()),
        "PIPER_MODEL_SHA256": JOE_MEDIUM_SHA256,
    }
    caller = to_16k(synthesize(SENTENCE, language="en-US", voice_name="rex"))
    with serving(settings, values) as server:
        token = tokens.issue_token(agent_id=agent.pk, organization_id=agent.organization_id)[0]
        async with VoiceClient(f"{server.ws_url}/ws/agents/{agent.pk}/realtime?token={token}") as client:
            try:
                await client.wait_for(is_type("session.started"), timeout=60)
            except ConnectionError:
                raise AssertionError(f"the session did not start: {client.messages}") from None
            greeting = await client.wait_for(is_type("transcript", role="assistant"), timeout=60)
            assert np.abs(np.frombuffer(client.audio(0, greeting), dtype="<i2")).max() > 3000
            before = len(client.messages)
            await client.stream(silence(500) + caller + silence(1500))
            user = await client.wait_for(is_type("transcript", role="user"), after=before, timeout=30)
            heard = client.messages[user].message["text"]
            assert word_errors(SENTENCE, heard) <= 1, heard
            assert {"book", "table", "people", "tomorrow", "evening"} <= set(words(heard))
            answer = await client.wait_for(is_type("transcript", role="assistant"), after=user, timeout=30)
            assert client.messages[answer].message["text"]
            answer_audio = np.frombuffer(client.audio(user, answer), dtype="<i2")
            assert answer_audio.size > OUT_RATE // 2 and np.abs(answer_audio).max() > 3000
            await client.send({"type": "stop"})
            assert await client.wait_closed() == 1000
    # What the server's log held (this process's log records), and the agent's log.
    assert "speech synthesis failed" not in caplog.text and "speech recognition failed" not in caplog.text
    await sync_to_async(flush_agent_logs)()
    messages = await sync_to_async(lambda: [str(c) for c in AgentLog.objects.values_list("content", flat=True)])()
    assert not [m for m in messages if "speech synthesis failed" in m or "speech recognition failed" in m], messages
    rows = await sync_to_async(
        lambda: list(
            Call.objects.get(agent=agent).messages.order_by("occurred_at", "sequence").values_list("role", "content")
        )
    )()
    assert [role for role, _ in rows] == ["assistant", "user", "assistant"] and rows[1][1] == heard


@pytest.fixture(autouse=True)
def _fresh_kits() -> Iterator[None]:
    """Kits are built once per process: these tests' settings get their own."""
    voice.reset_kits()
    yield
    voice.reset_kits()
