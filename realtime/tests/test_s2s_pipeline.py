"""The session shell with the speech-to-speech pipeline (VOICE_ENGINE=speech-to-speech) against a scripted
provider on loopback: what the provider is told, audio both ways through the shell's playout, barge-in
truncation, tool calls through the shell's dispatcher, transcripts, usage and failures, with a
hand-driven clock for the playout (provider events arrive over a real socket: tests wait for them)."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from calls.logging import flush_agent_logs
from calls.models import AgentLog, Call, LlmUsage
from realtime.engine.clock import ManualClock
from realtime.engine.contracts import Ending, ToolOutcome
from realtime.engine.registry import EngineUnavailable, configuration_problems, pipeline_class
from realtime.engine.session.shell import open_session
from realtime.engine.speech_to_speech.pipeline import SpeechToSpeechPipeline
from realtime.engine.speech_to_speech.provider import provider_url
from testing.fakes import FakeMixer, RecordingTransport, ScriptedTools, silence
from testing.recording import MemoryRecorder, RecordedCall
from testing.speech_to_speech_provider import CallTool, ProviderServer, Say, eventually
from testing.waiting import polled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_db_threads")]

DISCLOSURE = "Just so you know, you are speaking with an AI, not a person."  # 13 words: 1.3 s of tone
GREETING = "Welcome to Acme. How can I help?"  # 7 words: 0.7 s
MODEL = "gpt-realtime-test"
API_KEY = "sk-s2s-test-key-Zq8"


async def inline(function: Any, *args: Any) -> Any:
    return function(*args)


@pytest.fixture
def agent(active_agent):
    active_agent.greeting_type = "static"
    active_agent.static_greeting = GREETING
    active_agent.identity = "Ava, the reservation assistant of Acme"
    active_agent.instructions = "You take table reservations."
    active_agent.save()
    return active_agent


@pytest.fixture
async def provider(settings):
    async with ProviderServer() as server:
        settings.VOICE_ENGINE = "speech-to-speech"
        settings.REALTIME_PROVIDER_URL = server.url
        settings.REALTIME_PROVIDER_MODEL = MODEL
        settings.REALTIME_PROVIDER_API_KEY = API_KEY
        yield server


class Harness:
    def __init__(
        self, agent: Any, *, tools: ScriptedTools | None = None, transport: Any = None, recorder: Any = None
    ) -> None:
        self.clock = ManualClock()
        self.transport = transport or RecordingTransport(self.clock)
        self.mixer = FakeMixer()
        self.tools = tools or ScriptedTools()
        self.conversation = open_session(
            agent=agent,
            transport=self.transport,
            channel="web",
            pipeline=SpeechToSpeechPipeline(),
            tools=self.tools,
            mixer=lambda ambient, volume, ducking: self.mixer,
            clock=self.clock,
            run_blocking=inline,
            recorder=recorder,
        )
        self.recorder = self.conversation.recorder
        self.task: asyncio.Task | None = None

    async def start(self) -> None:
        self.task = asyncio.create_task(self.conversation.run())
        await eventually(lambda: "started" in self.transport.kinds() or self.task.done(), what="the session start")

    def queued_seconds(self) -> float:
        response = self.conversation.response
        return sum(segment.duration for segment in response.segments) if response else 0.0

    async def received(self, seconds: float) -> None:
        """Wait until the running answer's audio (`seconds` of it) has reached the playout."""
        await eventually(
            lambda: self.conversation.agent_speaking() and self.queued_seconds() >= seconds - 1e-6,
            what=f"{seconds} s of provider audio",
        )

    async def stop(self) -> Call:
        await self.conversation.stop()
        assert self.task is not None
        await asyncio.wait_for(self.task, 10)
        if isinstance(self.recorder, MemoryRecorder):
            return self.recorder.call
        return await sync_to_async(Call.objects.get)(pk=self.conversation.call_id)

    async def greeted(self) -> None:
        await self.received(2.0)
        await self.clock.advance(2.3)
        assert self.transport.transcripts() == [("assistant", f"{DISCLOSURE} {GREETING}")]


async def messages(call: Call | RecordedCall) -> list[tuple[str, str]]:
    if isinstance(call, RecordedCall):
        return call.messages
    return await sync_to_async(
        lambda: list(call.messages.order_by("occurred_at", "sequence").values_list("role", "content"))
    )()


async def logs(h: Harness) -> list[dict[str, Any]]:
    await sync_to_async(flush_agent_logs)()
    return await sync_to_async(list)(
        AgentLog.objects.filter(session_id=h.recorder.session_id).values_list("content", flat=True)
    )


def booking_tools(**kwargs: Any) -> ScriptedTools:
    return ScriptedTools({"book_table": ToolOutcome(result='{"status": "booked"}', status="success")}, **kwargs)


async def test_it_configures_the_provider_session_and_speaks_the_disclosure_and_greeting_first(agent, provider):
    h = Harness(agent, tools=booking_tools())
    await h.start()
    connection = provider.last
    await eventually(lambda: connection.events("response.create"))
    assert connection.path == "/v1/realtime" and connection.query == {"model": MODEL}
    assert connection.headers["authorization"] == f"Bearer {API_KEY}"
    session = connection.session
    assert session["type"] == "realtime" and session["output_modalities"] == ["audio"]
    assert f"{DISCLOSURE} {GREETING}" in session["instructions"]
    assert "Ava, the reservation assistant of Acme" in session["instructions"]
    assert "You take table reservations." in session["instructions"]
    assert "American English" in session["instructions"]
    assert session["audio"]["input"]["format"] == {"type": "audio/pcm", "rate": 24000}
    assert session["audio"]["output"] == {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "marin"}
    detection = session["audio"]["input"]["turn_detection"]
    assert detection["type"] == "server_vad" and detection["interrupt_response"] is False
    assert session["audio"]["input"]["transcription"]["language"] == "en"
    assert session["tools"] == [
        {"type": "function", "name": "book_table", "description": "", "parameters": {"type": "object"}}
    ]
    # The opening is asked for word for word, after the session is configured.
    kinds = [event["type"] for event in connection.received]
    assert kinds.index("session.update") < kinds.index("response.create")
    opening = connection.events("response.create")[0]["response"]
    assert f'"{DISCLOSURE} {GREETING}"' in opening["instructions"] and opening["tool_choice"] == "none"

    await h.greeted()
    assert h.transport.audio_ms() == pytest.approx(2000, abs=20)  # every frame of the provider's audio, once
    assert h.transport.kinds()[0] == "started"
    call = await h.stop()
    assert call.status == "completed"
    assert await messages(call) == [("assistant", f"{DISCLOSURE} {GREETING}")]
    usage = await sync_to_async(list)(LlmUsage.objects.filter(call=call).values())
    assert len(usage) == 1
    assert (usage[0]["provider"], usage[0]["model"]) == ("realtime", MODEL)
    assert (usage[0]["input_tokens"], usage[0]["output_tokens"]) == (120, 60)
    assert usage[0]["output_audio_seconds"] == pytest.approx(2.0)
    entries = await logs(h)
    assert not any(API_KEY in str(entry) for entry in entries)
    assert any(
        entry["message"] == "session started" and entry["voiceEngine"] == "speech-to-speech" for entry in entries
    )


async def test_caller_audio_is_relayed_at_24_khz_and_counted_as_input_audio(agent, provider):
    h = Harness(agent)
    await h.start()
    await h.greeted()
    connection = provider.last
    before = len(connection.events("input_audio_buffer.append"))
    for _ in range(50):  # one second in 20 ms chunks
        assert h.conversation.push_audio(silence(20))
        await h.clock.advance(0.02)
    await h.clock.advance(0.1)  # the last append goes once its first audio is 100 ms old
    await eventually(lambda: connection.appended_bytes >= 46_500, what="the relayed audio")
    assert connection.appended_bytes <= 48_000
    # In appends of 100 ms (REALTIME_PROVIDER_APPEND_MS), not one per 20 ms chunk.
    appends = connection.events("input_audio_buffer.append")[before:]
    assert 9 <= len(appends) <= 11
    assert all(len(base64.b64decode(e["audio"])) <= 5_760 for e in appends)  # 100 ms, a chunk more at most
    await provider.run(lambda: connection.caller_turn("hello", Say("Hi there.")))
    await h.received(0.2)
    await h.clock.advance(0.5)
    call = await h.stop()
    usage = await sync_to_async(list)(LlmUsage.objects.filter(call=call).order_by("created_at", "sequence").values())
    assert sum(row["input_audio_seconds"] for row in usage) == pytest.approx(1.0, abs=0.03)


async def test_caller_audio_that_queued_up_goes_to_the_provider_in_few_appends_and_in_order(agent, provider):
    # A loop too busy to send each 20 ms chunk at once (many sessions in one process) must not fall
    # behind by one provider message per chunk: what queued up goes as one append (at most a second).
    h = Harness(agent, recorder=MemoryRecorder())
    await h.start()
    await h.greeted()
    connection = provider.last
    before = len([e for e in connection.received if e.get("type") == "input_audio_buffer.append"])
    for _ in range(100):  # two seconds of chunks arrive while the send loop cannot run
        assert h.conversation.push_audio(silence(20))
    await eventually(lambda: connection.appended_bytes >= 94_000, what="the relayed audio")
    appends = [e for e in connection.received if e.get("type") == "input_audio_buffer.append"][before:]
    assert 2 <= len(appends) <= 3  # not 100
    assert all(len(base64.b64decode(e["audio"])) <= 48_000 for e in appends)
    # The conversation goes on as usual.
    await provider.run(lambda: connection.caller_turn("hello", Say("Hi there.")))
    await h.received(0.2)
    await h.clock.advance(0.5)
    await h.stop()


async def test_a_late_caller_transcript_is_recorded_without_cutting_the_answer(agent, provider):
    h = Harness(agent, recorder=MemoryRecorder())
    await h.start()
    await h.greeted()
    connection = provider.last
    answer = "Sure, for how many people?"
    await provider.run(lambda: connection.caller_turn("i would like a table", Say(answer)))
    await eventually(lambda: ("user", "i would like a table") in h.transport.transcripts())
    await h.received(0.5)
    await h.clock.advance(0.8)
    assert "clear" not in h.transport.kinds()
    assert h.transport.transcripts()[-2:] == [("user", "i would like a table"), ("assistant", answer)]
    call = await h.stop()
    assert await messages(call) == [
        ("assistant", f"{DISCLOSURE} {GREETING}"),
        ("user", "i would like a table"),
        ("assistant", answer),
    ]


async def test_barge_in_clears_cancels_and_truncates_to_what_was_played(agent, provider):
    h = Harness(agent, recorder=MemoryRecorder())
    await h.start()
    await h.greeted()
    connection = provider.last
    long = "One two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen."
    before = len(h.transport.events)
    await provider.run(lambda: connection.caller_turn("tell me a story", Say(long)))
    await h.received(1.6)
    await h.clock.advance(0.8)  # about eight words played
    await provider.run(connection.speech_started)
    await eventually(lambda: "clear" in h.transport.kinds())
    # The client saw the sentence as it began, then the cut: ended (interrupted), then what was heard.
    events = h.transport.messages()[before:]
    kinds = [kind for _, kind, _ in events]
    clear = kinds.index("clear")
    assert [value["text"] for _, kind, value in events if kind == "agent_speech"] == [long]
    assert events[clear + 1][2] == {"type": "agent_speech.ended", "interrupted": True}
    assert kinds[clear + 2] == "transcript"
    await eventually(lambda: connection.events("conversation.item.truncate"))
    truncate = connection.events("conversation.item.truncate")[0]
    assert truncate["content_index"] == 0 and truncate["item_id"].startswith("item_")
    assert truncate["audio_end_ms"] == pytest.approx(800, abs=30)
    cut = h.transport.transcripts()[-1]
    assert cut[0] == "assistant" and long.startswith(cut[1]) and 7 <= len(cut[1].split()) <= 9
    # Nothing more of the cut answer is played or captioned.
    after = h.transport.audio_ms()
    await h.clock.advance(1.0)
    assert h.transport.audio_ms() == after
    assert [kind for _, kind, _ in h.transport.messages()[before:]].count("agent_speech") == 1
    call = await h.stop()
    assert (await messages(call))[-1] == cut


async def test_a_call_ended_during_an_answer_cancels_it_and_keeps_the_usage_the_provider_bills(agent, provider):
    h = Harness(agent)
    await h.start()
    await h.greeted()
    connection = provider.last
    story = Say("One two three four five six seven eight nine ten eleven twelve.", pace=0.05, usage=(90, 45))
    await provider.run(lambda: connection.caller_turn("tell me a story", story))
    await h.received(0.3)  # the answer is still arriving when the caller hangs up
    call = await h.stop()
    assert connection.events("response.cancel")
    usage = await sync_to_async(list)(
        LlmUsage.objects.filter(call=call)
        .order_by("created_at", "sequence")
        .values_list("input_tokens", "output_tokens")
    )
    assert usage == [(120, 60), (90, 45)]  # the greeting, and the cut answer


async def test_the_disclosure_cannot_be_interrupted_but_the_greeting_can(agent, provider):
    h = Harness(agent, recorder=MemoryRecorder())
    await h.start()
    await h.received(2.0)
    connection = provider.last
    await h.clock.advance(0.6)
    await provider.run(connection.speech_started)
    await eventually(lambda: len(connection.received) and h.conversation.user_speaking)
    await h.clock.advance(0.1)
    assert "clear" not in h.transport.kinds()
    await h.clock.advance(0.9)  # 1.6 s: the greeting is playing
    await provider.run(connection.speech_started)
    await eventually(lambda: "clear" in h.transport.kinds())
    (role, text), *_ = h.transport.transcripts()
    assert role == "assistant" and text.startswith(DISCLOSURE) and text != f"{DISCLOSURE} {GREETING}"
    await h.stop()


async def test_a_function_call_runs_through_the_shells_dispatcher_and_its_result_goes_back(agent, provider):
    tools = booking_tools(wait=True)
    h = Harness(agent, tools=tools)
    await h.start()
    await h.greeted()
    connection = provider.last
    provider.script(Say("Your table is booked."))
    call_tool = CallTool("book_table", {"people": 2}, call_id="call_7")
    await provider.run(lambda: connection.caller_turn("book a table for two", call_tool))
    await eventually(lambda: tools.calls)
    assert tools.calls[0].id == "call_7" and tools.calls[0].arguments == {"people": 2}
    assert ("event", {"type": "tool.started", "name": "book_table"}) in [(k, v) for _, k, v in h.transport.events]
    tools.release.set()
    await eventually(lambda: len(connection.events("response.create")) == 2)
    output = connection.events("conversation.item.create")[-1]["item"]
    assert output == {"type": "function_call_output", "call_id": "call_7", "output": '{"status": "booked"}'}
    kinds = [event["type"] for event in connection.received]
    assert kinds.index("conversation.item.create") < len(kinds) - 1 - kinds[::-1].index("response.create")
    await h.received(0.4)
    await h.clock.advance(0.7)
    assert h.transport.transcripts()[-1] == ("assistant", "Your table is booked.")
    call = await h.stop()
    usage = await sync_to_async(LlmUsage.objects.filter(call=call).count)()
    assert usage == 3  # greeting, the call, the answer


async def test_the_older_beta_event_names_are_understood(agent, settings):
    async with ProviderServer(beta=True) as server:
        settings.REALTIME_PROVIDER_URL = server.url
        settings.REALTIME_PROVIDER_MODEL = MODEL
        h = Harness(agent, recorder=MemoryRecorder())
        await h.start()
        await h.greeted()
        await h.stop()


async def test_a_provider_error_ends_the_call_as_failed_with_an_error_log(agent, provider):
    h = Harness(agent)
    await h.start()
    await h.greeted()
    connection = provider.last
    await provider.run(
        lambda: connection.send(
            {"type": "error", "error": {"type": "server_error", "code": "server_error", "message": "Overloaded"}}
        )
    )
    await asyncio.wait_for(h.task, 10)
    assert h.transport.ended == (Ending.FAILED, "The conversation engine failed")
    call = await sync_to_async(Call.objects.get)(pk=h.conversation.call_id)
    assert call.status == "failed"
    assert call.ended_reason == "provider-error"
    assert "A provider failed" in call.ended_message and "Overloaded" in call.ended_message  # the endedMessage
    await sync_to_async(flush_agent_logs)()
    errors = await sync_to_async(list)(
        AgentLog.objects.filter(session_id=h.recorder.session_id, severity="error").values_list("content", flat=True)
    )
    assert any("provider reported an error: server_error: Overloaded" in entry["message"] for entry in errors)


async def test_a_provider_disconnect_ends_the_call_as_failed(agent, provider):
    h = Harness(agent)
    await h.start()
    await h.greeted()
    await provider.run(provider.last.hang_up)
    await asyncio.wait_for(h.task, 10)
    assert h.transport.ended == (Ending.FAILED, "The conversation engine failed")
    call = await sync_to_async(Call.objects.get)(pk=h.conversation.call_id)
    assert call.status == "failed"
    assert call.ended_reason == "provider-error"
    assert any("closed the connection" in entry["message"] for entry in await logs(h))
    assert await messages(call) == [("assistant", f"{DISCLOSURE} {GREETING}")]


async def test_an_unreachable_provider_refuses_the_session_before_a_call_record(agent, settings):
    from testing.servers import free_port

    settings.REALTIME_PROVIDER_URL = f"ws://127.0.0.1:{free_port()}/v1/realtime"
    settings.REALTIME_PROVIDER_MODEL = MODEL
    h = Harness(agent)
    await asyncio.wait_for(h.conversation.run(), 20)
    assert h.transport.ended == (Ending.FAILED, "The conversation engine failed")
    assert not await sync_to_async(Call.objects.exists)()


def test_the_realtime_engine_needs_a_provider_url_and_model(settings):
    settings.VOICE_ENGINE = "speech-to-speech"
    settings.REALTIME_PROVIDER_URL = ""
    settings.REALTIME_PROVIDER_MODEL = ""
    with pytest.raises(EngineUnavailable, match="REALTIME_PROVIDER_URL and REALTIME_PROVIDER_MODEL"):
        pipeline_class()
    assert configuration_problems() == [
        "VOICE_ENGINE=speech-to-speech needs REALTIME_PROVIDER_URL and REALTIME_PROVIDER_MODEL to be set"
    ]
    settings.REALTIME_PROVIDER_URL = "https://api.openai.com/v1/realtime?api-version=1"
    settings.REALTIME_PROVIDER_MODEL = "gpt-realtime"
    settings.REALTIME_PROVIDER_API_KEY = ""
    assert pipeline_class() is SpeechToSpeechPipeline
    assert configuration_problems() == ["REALTIME_PROVIDER_API_KEY is not set (api.openai.com requires one)"]
    settings.REALTIME_PROVIDER_API_KEY = API_KEY
    assert configuration_problems() == []
    assert provider_url(settings.REALTIME_PROVIDER_URL, "gpt-realtime") == (
        "wss://api.openai.com/v1/realtime?api-version=1&model=gpt-realtime"
    )
    settings.REALTIME_PROVIDER_URL = "ftp://example.com/realtime"
    assert configuration_problems() == [
        "REALTIME_PROVIDER_URL must be a ws(s) URL such as wss://api.openai.com/v1/realtime"
    ]


async def test_the_xai_dialect_puts_voice_and_turn_detection_at_the_session_top_level(agent, provider, settings):
    settings.REALTIME_PROVIDER_DIALECT = "xai"
    settings.REALTIME_PROVIDER_VOICES = {"eve": "Ara"}
    h = Harness(agent, recorder=MemoryRecorder())
    await h.start()
    connection = provider.last
    await eventually(lambda: connection.events("session.update"))
    session = connection.session
    assert session["voice"] == "Ara" and session["turn_detection"]["type"] == "server_vad"
    assert "voice" not in session["audio"]["output"] and "turn_detection" not in session["audio"]["input"]
    assert "transcription" not in session["audio"]["input"]
    await h.stop()


async def test_a_caller_turn_given_as_text_goes_to_the_provider_as_a_user_message(agent, provider):
    h = Harness(agent, recorder=MemoryRecorder())
    await h.start()
    await h.greeted()
    connection = provider.last
    provider.script(Say("You pressed one."))
    await h.conversation.caller_text("pressed 1")
    await eventually(lambda: len(connection.events("response.create")) == 2)
    item = connection.events("conversation.item.create")[-1]["item"]
    assert item == {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "pressed 1"}]}
    await h.received(0.3)
    await h.clock.advance(0.6)
    assert h.transport.transcripts()[-2:] == [("user", "pressed 1"), ("assistant", "You pressed one.")]
    await h.stop()


async def test_a_transfer_tool_speaks_the_handoff_then_transfers(agent, provider):
    tools = ScriptedTools(
        {
            "transfer_call": ToolOutcome(
                result='{"status": "transferring"}', status="success", transfer_to="+15557654321"
            )
        }
    )
    h = Harness(agent, tools=tools)
    await h.start()
    await h.greeted()
    connection = provider.last
    await provider.run(lambda: connection.caller_turn("a person please", CallTool("transfer_call", {})))
    await eventually(lambda: len(connection.events("response.create")) == 2)
    handoff = connection.events("response.create")[-1]["response"]["instructions"]
    assert handoff.startswith("Say exactly")
    await h.received(0.3)
    await provider.run(connection.speech_started)  # the handoff is not cut
    await h.clock.advance(2.0)
    assert "clear" not in h.transport.kinds()
    assert h.transport.transferred_to == "+15557654321"
    await asyncio.wait_for(h.task, 10)
    assert h.transport.ended == (Ending.TRANSFERRED, "")


async def test_a_text_turn_during_an_answer_cancels_it_and_is_asked_for_once_the_provider_is_free(agent, provider):
    h = Harness(agent)
    await h.start()
    await h.greeted()
    connection = provider.last
    long = Say("One two three four five six seven eight nine ten eleven twelve.", pace=0.05)
    await provider.run(lambda: connection.caller_turn("tell me", long))
    await h.received(0.2)
    provider.script(Say("You pressed two."))
    await h.conversation.caller_text("pressed 2")
    await eventually(lambda: len(connection.events("response.create")) == 2)
    kinds = [event["type"] for event in connection.received if event["type"] != "input_audio_buffer.append"]
    assert kinds[-4:] == [
        "response.cancel",
        "conversation.item.truncate",
        "conversation.item.create",
        "response.create",
    ]
    await eventually(lambda: h.queued_seconds() >= 0.3 and h.conversation.response.sentences == ["You pressed two."])
    await h.clock.advance(0.6)
    assert h.transport.transcripts()[-1] == ("assistant", "You pressed two.")
    assert not [event for event in await logs(h) if event["message"].startswith("engine error")]
    await h.stop()


async def test_an_answer_begun_during_the_disclosure_does_not_make_the_disclosure_interruptible(agent, provider):
    h = Harness(agent, recorder=MemoryRecorder())
    await h.start()
    await h.received(2.0)
    connection = provider.last
    await h.clock.advance(0.3)
    # The caller speaks during the disclosure; the provider answers by itself (server VAD).
    await provider.run(lambda: connection.caller_turn("hello?", Say("Hi there.")))
    await eventually(lambda: h.conversation.response.sentences == ["Hi there."])
    await provider.run(connection.speech_started)
    await eventually(lambda: h.conversation.user_speaking)
    await h.clock.advance(0.3)
    assert "clear" not in h.transport.kinds()
    await h.clock.advance(2.0)
    assert h.transport.transcripts()[:2] == [("user", "hello?"), ("assistant", f"{DISCLOSURE} {GREETING}")]
    await h.stop()


async def test_a_refused_truncation_is_logged_and_the_call_goes_on(agent, provider):
    h = Harness(agent)
    await h.start()
    await h.greeted()
    connection = provider.last
    await provider.run(lambda: connection.caller_turn("tell me", Say("One two three four five six seven eight.")))
    await h.received(0.8)
    await h.clock.advance(0.3)
    await provider.run(connection.speech_started)
    await eventually(lambda: connection.events("conversation.item.truncate"))
    truncate = connection.events("conversation.item.truncate")[0]
    refusal = {"type": "invalid_request_error", "code": "invalid_value", "message": "audio_end_ms is too large"}
    await provider.run(
        lambda: connection.send({"type": "error", "error": {**refusal, "event_id": truncate["event_id"]}})
    )

    async def refusal_logged() -> bool:
        return any(entry["message"] == "provider refused a cancel or truncate" for entry in await logs(h))

    await polled(refusal_logged, what="the refusal logged", timeout=5, every=0.01)
    assert h.transport.ended is None and not h.task.done()
    call = await h.stop()
    assert call.status == "completed"


async def test_the_provider_transcript_is_sent_as_agent_speech_sentence_by_sentence_as_it_plays(agent, provider):
    h = Harness(agent, recorder=MemoryRecorder())
    await h.start()
    await h.greeted()
    # One provider item of 20 words (2 s of audio, 100 ms a word), cut at its sentence ends, each sent as
    # its first word starts playing.
    sentences = [DISCLOSURE, "Welcome to Acme.", "How can I help?"]
    h.transport.assert_captioned(sentences, [0.0, 1.3, 1.6], f"{DISCLOSURE} {GREETING}")
    await h.stop()


async def test_with_interruption_off_caller_speech_never_cuts_the_answer(agent, provider):
    agent.interruption = {**(getattr(agent, "interruption", None) or {}), "mode": "off"}
    h = Harness(agent, recorder=MemoryRecorder())
    await h.start()
    await h.greeted()
    connection = provider.last
    long = "One two three four five six seven eight nine ten eleven twelve."
    await provider.run(lambda: connection.caller_turn("tell me a story", Say(long)))
    await h.received(1.2)
    await provider.run(connection.speech_started)
    await h.clock.advance(1.0)
    assert "clear" not in h.transport.kinds()
    assert not connection.events("response.cancel")
    await h.clock.advance(1.0)
    assert h.transport.transcripts()[-1] == ("assistant", long)
    await h.stop()
