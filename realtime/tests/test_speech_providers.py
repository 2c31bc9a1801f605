"""Speech providers of the cascade (ASR_PROVIDER / TTS_PROVIDER = openai) against a scripted
OpenAI-compatible audio server on loopback: the recognizer and the voice on their own, the cascade
with the session shell (a recognized turn answered in the provider's voice; the offline voice when a
provider fails), the system check, and one conversation through the project's ASGI application (in the
test's process, testing/inprocess.py)."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from asgiref.sync import sync_to_async

from calls.models import Call
from kit.providers import ProviderError
from realtime.apps import check_voice_engine
from realtime.engine.cascade import kit as voice
from realtime.engine.contracts import TextPiece
from realtime.engine.phrases import phrase
from realtime.engine.speech import openai_audio
from realtime.engine.speech.openai_audio import OpenAISpeech, OpenAITranscription, parse_voice_map
from testing.audio_server import AudioServer, Failure, Speech, Transcript, level_for
from testing.fakes import (
    ScriptedBrain,
    silence,
    speech,
)
from testing.pipeline import provider_harness, spoken_offline

KEY = "sk-test-0123456789abcdefghijklmnopqrstuv"
APOLOGY = phrase("apology", "en-US")
PROVIDER_VOICE = level_for("alloy")  # the agents' default voice eve maps to alloy


@pytest.fixture
def audio_server() -> Iterator[AudioServer]:
    with AudioServer() as server:
        yield server


@pytest.fixture
def providers(settings: Any, audio_server: AudioServer) -> AudioServer:
    """Both speech providers pointed at the scripted server."""
    for kind, model in (("ASR", "whisper-test"), ("TTS", "tts-test")):
        setattr(settings, f"{kind}_PROVIDER", "openai")
        setattr(settings, f"{kind}_BASE_URL", audio_server.base_url)
        setattr(settings, f"{kind}_API_KEY", KEY)
        setattr(settings, f"{kind}_MODEL", model)
        setattr(settings, f"{kind}_TIMEOUT_SECONDS", 2.0)
    settings.TTS_SAMPLE_RATE = 24000
    settings.TTS_VOICE_MAP = ""
    settings.ASR_PROMPT_CHARS = 400
    return audio_server


def samples(pcm: bytes) -> np.ndarray:
    return np.frombuffer(pcm, dtype="<i2")


AVA = SimpleNamespace(name="Ava", language="en-US")


# --- the recognizer --------------------------------------------------------------------------
def test_the_recognizer_posts_the_turn_as_a_16_khz_wav_with_model_language_and_vocabulary(providers):
    providers.transcribe(Transcript("  I would like   a table for two. "))
    vocabulary = ["book_table", "Books a table for a number of people at the restaurant", "dinner", "Book Table"]
    recognizer = OpenAITranscription().recognizer(SimpleNamespace(name="Ava", language="es-US"), vocabulary)
    recognizer.start()
    turn = speech(300) + silence(200)
    for start in range(0, len(turn), 640):
        recognizer.feed(turn[start : start + 640])
    assert recognizer.finish() == "I would like a table for two."
    (request,) = providers.of("/audio/transcriptions")
    assert request.rate == 16000 and request.audio == turn
    assert request.fields == {
        "model": "whisper-test",
        "language": "es",
        "response_format": "json",
        "prompt": "Ava, book table, dinner",
    }
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    # The next turn starts empty; a turn without audio is not sent.
    recognizer.start()
    assert recognizer.finish() == ""
    assert len(providers.requests) == 1


def test_the_vocabulary_prompt_is_capped_and_can_be_turned_off(providers, settings):
    words = [f"term{index}" for index in range(200)]
    prompt = openai_audio.vocabulary_prompt(AVA, words, 60)
    assert len(prompt) <= 60 and prompt.startswith("Ava, term0, term1")
    assert openai_audio.vocabulary_prompt(AVA, words, 0) == ""
    settings.ASR_PROMPT_CHARS = 0
    providers.transcribe(Transcript("hello"))
    recognizer = OpenAITranscription().recognizer(AVA, words)
    recognizer.feed(speech(200))
    assert recognizer.finish() == "hello"
    assert "prompt" not in providers.requests[-1].fields


@pytest.mark.parametrize(
    ("reply", "message", "permanent"),
    [
        (Failure(401, f"Incorrect API key provided: {KEY}"), "HTTP 401 (check ASR_API_KEY)", True),
        (Failure(404, "The model does not exist"), "HTTP 404 (check ASR_BASE_URL and ASR_MODEL)", True),
        (Failure(400, "Audio file is too short"), "HTTP 400: Audio file is too short", False),
        (Failure(503, "Overloaded"), "HTTP 503: Overloaded", False),
        (Transcript("late", delay=5), "did not answer within 2 s", False),
    ],
)
def test_recognition_failures_are_provider_errors_that_never_show_the_key(
    providers, settings, reply, message, permanent
):
    # 2 s, not less: the same recognizer (and timeout) sends the next turn, which a loaded CI machine
    # once took more than 0.3 s to answer.
    settings.ASR_TIMEOUT_SECONDS = 2
    providers.transcribe(reply)
    recognizer = OpenAITranscription().recognizer(AVA, [])
    recognizer.feed(speech(200))
    with pytest.raises(ProviderError) as caught:
        recognizer.finish()
    assert message in caught.value.message and caught.value.permanent is permanent
    assert KEY not in caught.value.message
    # The failed turn's audio is gone: the next turn is sent on its own.
    providers.transcribe(Transcript("again"))
    recognizer.feed(speech(100))
    assert recognizer.finish() == "again"
    assert len(providers.requests[-1].audio) == 100 * 32


def test_an_unreachable_recognition_server_is_a_temporary_provider_error(providers, settings):
    settings.ASR_BASE_URL = "http://127.0.0.1:9/v1"
    recognizer = OpenAITranscription().recognizer(AVA, [])
    recognizer.feed(speech(100))
    with pytest.raises(ProviderError) as caught:
        recognizer.finish()
    assert caught.value.message.startswith("Cannot reach the speech recognition server (127.0.0.1:9)")
    assert not caught.value.permanent


# --- the voice ---------------------------------------------------------------------------------
def test_the_voice_streams_raw_pcm_at_24_khz_in_the_mapped_voice(providers):
    providers.speak(Speech(chunks=5))
    audio = OpenAISpeech().synthesize("Your table is booked.", "en-US", "ara")
    assert len(audio) == 4 * 100 * 48  # 100 ms per word at 24 kHz, every chunk put together
    assert set(samples(audio)) == {level_for("nova")}
    (request,) = providers.of("/audio/speech")
    assert request.fields == {
        "model": "tts-test",
        "input": "Your table is booked.",
        "voice": "nova",
        "response_format": "pcm",
    }
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    assert OpenAISpeech().synthesize(" \x00 ", "en-US", "eve") == b""  # nothing to say: no request
    assert len(providers.requests) == 1


@pytest.mark.parametrize("wav", [False, True])
def test_a_server_at_another_rate_is_resampled_to_24_khz(providers, settings, wav):
    settings.TTS_SAMPLE_RATE = 16000
    providers.speak(Speech(rate=16000, wav=wav))
    audio = samples(OpenAISpeech().synthesize("one two three four five", "en-US", "rex"))
    assert len(audio) == pytest.approx(24000 * 0.5, abs=2)
    middle = audio[len(audio) // 4 : -len(audio) // 4]
    assert np.all(np.abs(middle.astype(int) - level_for("onyx")) <= 2)


def test_the_voice_map_setting_overrides_the_openai_defaults():
    assert parse_voice_map("") == {"eve": "alloy", "ara": "nova", "rex": "onyx", "sal": "echo", "leo": "fable"}
    assert parse_voice_map("eve=af_bella, *=am_adam") == {
        "eve": "af_bella",
        "ara": "am_adam",
        "rex": "am_adam",
        "sal": "am_adam",
        "leo": "am_adam",
    }
    assert parse_voice_map("leo=bm_george")["leo"] == "bm_george"
    for bad in ("eve", "eve=", "bob=alloy"):
        with pytest.raises(ValueError):
            parse_voice_map(bad)


@pytest.mark.parametrize(
    ("reply", "message", "permanent"),
    [
        (Failure(403, "Forbidden"), "HTTP 403 (check TTS_API_KEY)", True),
        (Failure(500, "Boom"), "HTTP 500: Boom", False),
        (Speech(stall_after=1), "did not answer within 0.3 s", False),
        (Speech(delay=5), "did not answer within 0.3 s", False),
    ],
)
def test_synthesis_failures_are_provider_errors(providers, settings, reply, message, permanent):
    settings.TTS_TIMEOUT_SECONDS = 0.3
    providers.speak(reply)
    with pytest.raises(ProviderError) as caught:
        OpenAISpeech().synthesize("Hello there.", "en-US", "eve")
    assert message in caught.value.message and caught.value.permanent is permanent


# --- configuration -----------------------------------------------------------------------------
def test_the_system_check_names_the_missing_speech_settings(settings, monkeypatch):
    settings.VOICE_ENGINE = "cascade"
    settings.LLM_PROVIDER = "embedded"
    settings.ASR_PROVIDER = settings.TTS_PROVIDER = "embedded"
    assert check_voice_engine() == []
    settings.ASR_PROVIDER = settings.TTS_PROVIDER = "openai"
    settings.ASR_BASE_URL = settings.TTS_BASE_URL = "https://api.openai.com/v1"
    settings.ASR_API_KEY = settings.TTS_API_KEY = ""
    settings.ASR_MODEL = settings.TTS_MODEL = ""
    settings.TTS_VOICE_MAP = "bob=alloy"
    messages = [error.msg for error in check_voice_engine()]
    assert messages == [
        "ASR_MODEL is not set (the model name the server knows, e.g. whisper-1)",
        "ASR_API_KEY is not set (api.openai.com requires one)",
        "TTS_MODEL is not set (the model name the server knows, e.g. tts-1)",
        "TTS_API_KEY is not set (api.openai.com requires one)",
        "TTS_VOICE_MAP names 'bob', not one of the agent voices eve, ara, rex, sal, leo",
    ]
    assert {error.id for error in check_voice_engine()} == {"realtime.E001"}
    # A local server needs no key.
    settings.ASR_BASE_URL = settings.TTS_BASE_URL = "http://127.0.0.1:8000/v1"
    settings.ASR_MODEL = settings.TTS_MODEL = "local"
    settings.TTS_VOICE_MAP = "*=af_bella"
    assert check_voice_engine() == []
    settings.TTS_MODEL = ""
    voice.reset_kits()  # kits are built once per process; this one with these settings
    with pytest.raises(ProviderError) as caught:
        voice.voice_kit()  # a session with incomplete settings fails with the same words
    assert caught.value.permanent and "TTS_MODEL is not set" in caught.value.message


def test_the_kit_mixes_providers_and_keeps_the_offline_voice(providers, settings, monkeypatch):
    from realtime.engine.speech import espeak, pocketsphinx, silero_vad

    loaded: list[str] = []
    for module in (silero_vad, pocketsphinx, espeak):
        monkeypatch.setattr(module, "preload", lambda name=module.__name__: loaded.append(name.rsplit(".", 1)[1]))
    kit = voice.voice_kit()
    assert kit.offline_synthesize is not None and kit.synthesize != kit.offline_synthesize
    assert isinstance(kit.recognizer(AVA, []), openai_audio.ProviderRecognizer)
    kit.preload()
    assert loaded == ["silero_vad", "espeak"]  # no PocketSphinx workers for a provider's recognizer
    settings.TTS_PROVIDER = "embedded"
    mixed = voice.voice_kit()
    assert mixed.offline_synthesize is None and mixed.name == "asr=openai,tts=embedded"
    settings.ASR_PROVIDER = "embedded"
    assert voice.voice_kit().name == "embedded"


# --- the cascade with the session shell --------------------------------------------------------
async def inline(function: Any, *args: Any) -> Any:
    return function(*args)


def spoken_by_provider(audio: np.ndarray, level: int = PROVIDER_VOICE) -> bool:
    voiced = audio[audio != 0]
    return voiced.size > 0 and set(np.unique(voiced)) == {level}


@pytest.fixture
def ava(active_agent: Any) -> Any:
    active_agent.greeting_type = "static"
    active_agent.static_greeting = "Welcome to Acme."
    active_agent.save()
    return active_agent


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_db_threads")
async def test_a_turn_recognized_by_the_provider_is_answered_in_the_provider_voice(providers, ava):
    conversation = provider_harness(ava)
    await conversation.start()
    await conversation.feed(silence(3000))
    assert spoken_by_provider(conversation.audio_after(0))  # the disclosure and the greeting
    providers.transcribe(Transcript("I would like a table"))
    turn_at = conversation.clock.now()
    await conversation.feed(speech(800) + silence(300))
    await conversation.feed(silence(3000))
    assert conversation.transport.transcripts()[-2:] == [
        ("user", "I would like a table"),
        ("assistant", "You said: I would like a table."),
    ]
    assert spoken_by_provider(conversation.audio_after(turn_at))
    (upload,) = providers.of("/audio/transcriptions")
    # The whole utterance from its onset (the detector's pre-roll), and the agent's words as a prompt.
    assert len(upload.audio) >= 800 * 32
    assert upload.fields["language"] == "en" and upload.fields["prompt"] == "Ava, book table"
    spoken = [request.fields["input"] for request in providers.of("/audio/speech")]
    assert spoken[-1] == "You said: I would like a table."
    call = await conversation.stop()
    assert call.status == "completed"


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_db_threads")
@pytest.mark.parametrize("failure", [Failure(503, "Overloaded"), Transcript("too late", delay=5)])
async def test_a_recognition_failure_gets_the_apology_in_the_offline_voice_and_the_call_goes_on(
    providers, settings, ava, failure
):
    settings.ASR_TIMEOUT_SECONDS = 0.3
    conversation = provider_harness(ava)
    await conversation.start()
    await conversation.feed(silence(3000))
    providers.transcribe(failure)
    turn_at = conversation.clock.now()
    await conversation.feed(speech(800) + silence(300))
    await conversation.feed(silence(8000))
    assert conversation.transport.transcripts()[-1] == ("assistant", APOLOGY)
    assert not any(role == "user" for role, _ in conversation.transport.transcripts())
    assert spoken_offline(conversation.audio_after(turn_at))
    assert APOLOGY not in [request.fields.get("input") for request in providers.of("/audio/speech")]
    logs = await conversation.logs()
    failed = [entry for entry in logs if entry["message"] == "speech recognition failed"]
    assert failed and failed[0]["severity"] == "error" and failed[0]["permanent"] is False
    assert KEY not in str(logs)
    # The next turn is recognized by the provider again.
    providers.transcribe(Transcript("hello again"))
    again_at = conversation.clock.now()
    await conversation.feed(speech(600) + silence(300))
    await conversation.feed(silence(3000))
    assert conversation.transport.transcripts()[-1] == ("assistant", "You said: hello again.")
    assert spoken_by_provider(conversation.audio_after(again_at))
    call = await conversation.stop()
    assert call.status == "completed"


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_db_threads")
async def test_a_failed_sentence_and_the_rest_of_its_answer_are_spoken_offline(providers, ava):
    brain = ScriptedBrain([TextPiece("Your table is booked. See you tomorrow.")])
    conversation = provider_harness(ava, brain=brain)
    await conversation.start()
    await conversation.feed(silence(3000))
    providers.transcribe(Transcript("book it"), Transcript("thanks"))
    providers.speak(Failure(500, "Boom"))
    turn_at = conversation.clock.now()
    await conversation.feed(speech(600) + silence(300))
    await conversation.feed(silence(6000))
    assert conversation.transport.transcripts()[-1] == ("assistant", "Your table is booked. See you tomorrow.")
    assert spoken_offline(conversation.audio_after(turn_at))
    inputs = [request.fields["input"] for request in providers.of("/audio/speech")]
    assert inputs[-1] == "Your table is booked."  # the second sentence did not wait on the server again
    logs = await conversation.logs()
    assert any(
        entry["message"] == "speech synthesis failed; the offline voice speaks the rest of this answer"
        and entry["severity"] == "error"
        and "HTTP 500" in entry["reason"]
        for entry in logs
    )
    # The next answer is in the provider's voice again.
    next_at = conversation.clock.now()
    await conversation.feed(speech(600) + silence(300))
    await conversation.feed(silence(2000))
    assert conversation.transport.transcripts()[-1] == ("assistant", "Okay.")
    assert spoken_by_provider(conversation.audio_after(next_at))
    await conversation.stop()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_db_threads")
async def test_after_a_permanent_synthesis_failure_the_offline_voice_speaks_for_the_rest_of_the_call(providers, ava):
    providers.speak(Failure(401, f"Incorrect API key provided: {KEY}"))
    providers.transcribe(Transcript("hello"))
    conversation = provider_harness(ava)
    await conversation.start()
    await conversation.feed(silence(9000))
    transcripts = conversation.transport.transcripts()
    assert transcripts and transcripts[0][1].endswith("Welcome to Acme.")
    assert spoken_offline(conversation.audio_after(0))
    turn_at = conversation.clock.now()
    await conversation.feed(speech(600) + silence(300))
    await conversation.feed(silence(4000))
    assert conversation.transport.transcripts()[-1] == ("assistant", "You said: hello.")
    assert spoken_offline(conversation.audio_after(turn_at))
    assert len(providers.of("/audio/speech")) == 1
    logs = await conversation.logs()
    failed = [entry for entry in logs if entry["message"].startswith("speech synthesis failed")]
    assert [entry["message"] for entry in failed] == ["speech synthesis failed; the offline voice speaks from now on"]
    assert failed[0]["permanent"] is True and KEY not in str(logs)
    await conversation.stop()


# --- end to end: a browser socket on the application (in-process) --------------------------------
SENTENCE = "I would like to book a table for four people tomorrow evening."
HEARD = "I would like to book a table for four people tomorrow evening."


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_db_threads")
async def test_a_spoken_conversation_with_provider_speech_through_the_application(
    audio_server, owner, make_agent, realtime_settings, settings, caplog
):
    from calls.logging import flush_agent_logs
    from calls.models import AgentLog
    from realtime import tokens
    from realtime.engine.speech.espeak import synthesize
    from testing.clients import VoiceClient, is_type
    from testing.inprocess import serving
    from testing.voice import to_16k

    agent = await sync_to_async(make_agent)(
        owner.organization,
        name="Ava",
        status="active",
        instructions="You take table reservations for the Acme restaurant.",
        greeting_type="static",
        static_greeting="Hello, this is Ava from Acme. How can I help you today?",
    )
    audio_server.transcribe(Transcript(HEARD))
    values = {
        "ASR_PROVIDER": "openai",
        "ASR_BASE_URL": audio_server.base_url,
        "ASR_API_KEY": KEY,
        "ASR_MODEL": "whisper-test",
        "TTS_PROVIDER": "openai",
        "TTS_BASE_URL": audio_server.base_url,
        "TTS_API_KEY": KEY,
        "TTS_MODEL": "tts-test",
        "TTS_VOICE_MAP": "eve=echo",
    }
    caller = to_16k(synthesize(SENTENCE, language="en-US", voice_name="rex"))
    voice.reset_kits()  # kits are built once per process; this one with these settings
    with serving(settings, values) as server:
        token = tokens.issue_token(agent_id=agent.pk, organization_id=agent.organization_id)[0]
        async with VoiceClient(f"{server.ws_url}/ws/agents/{agent.pk}/realtime?token={token}") as client:
            await client.wait_for(is_type("session.started"), timeout=60)
            greeting = await client.wait_for(is_type("transcript", role="assistant"), timeout=60)
            assert spoken_by_provider(samples(client.audio(0, greeting)), level_for("echo"))
            before = len(client.messages)
            await client.stream(silence(500) + caller + silence(1500))
            user = await client.wait_for(is_type("transcript", role="user"), after=before)
            assert client.messages[user].message["text"] == HEARD
            answer = await client.wait_for(is_type("transcript", role="assistant"), after=user, timeout=30)
            answer_text = client.messages[answer].message["text"]
            assert answer_text
            assert spoken_by_provider(samples(client.audio(user, answer)), level_for("echo"))
            await client.send({"type": "stop"})
            assert await client.wait_closed() == 1000
    voice.reset_kits()
    (upload,) = audio_server.of("/audio/transcriptions")
    assert upload.rate == 16000 and len(upload.audio) >= len(caller) * 0.8
    assert upload.fields["model"] == "whisper-test" and upload.fields["language"] == "en"
    assert upload.headers["Authorization"] == f"Bearer {KEY}"
    inputs = [request.fields["input"] for request in audio_server.of("/audio/speech")]
    assert inputs[-1] in answer_text and {request.fields["voice"] for request in audio_server.of("/audio/speech")} == {
        "echo"
    }
    # Neither the server's log (this process's log records) nor the agent's log holds the key.
    assert KEY not in caplog.text
    await sync_to_async(flush_agent_logs)()
    assert KEY not in str(await sync_to_async(lambda: list(AgentLog.objects.values_list("content", flat=True)))())
    rows = await sync_to_async(
        lambda: list(
            Call.objects.get(agent=agent).messages.order_by("occurred_at", "sequence").values_list("role", "content")
        )
    )()
    assert [role for role, _ in rows] == ["assistant", "user", "assistant"] and rows[1][1] == HEARD


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_db_threads")
async def test_a_failed_recognition_of_speech_over_the_agent_that_did_not_interrupt_gets_no_apology(providers, ava):
    providers.transcribe(Failure(503, "Overloaded"))
    conversation = provider_harness(ava)
    await conversation.start()
    await conversation.feed(silence(200))
    await conversation.feed(speech(120) + silence(300))  # a backchannel during the disclosure
    await conversation.feed(silence(3000))
    assert [role for role, _ in conversation.transport.transcripts()] == ["assistant"]  # the greeting only
    assert len(providers.of("/audio/transcriptions")) == 1
    logs = await conversation.logs()
    assert [entry["severity"] for entry in logs if entry["message"] == "speech recognition failed"] == ["error"]
    await conversation.stop()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_db_threads")
async def test_provider_recognition_works_with_the_embedded_voice(providers, settings, ava):
    settings.TTS_PROVIDER = "embedded"
    providers.transcribe(Transcript("hello"))
    conversation = provider_harness(ava)
    await conversation.start()
    await conversation.feed(silence(9000))
    turn_at = conversation.clock.now()
    await conversation.feed(speech(600) + silence(300))
    await conversation.feed(silence(4000))
    assert conversation.transport.transcripts()[-1] == ("assistant", "You said: hello.")
    assert spoken_offline(conversation.audio_after(turn_at))
    assert providers.of("/audio/speech") == []
    await conversation.stop()
