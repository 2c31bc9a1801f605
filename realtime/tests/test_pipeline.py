"""The session shell with the cascade pipeline, small stand-in speech parts and a hand-driven clock:
frames in, messages out, and the call record in the database."""

from __future__ import annotations

import asyncio
import dataclasses
from functools import partial

import numpy as np
import pytest
from asgiref.sync import sync_to_async

from calls.logging import flush_agent_logs
from calls.models import AgentLog, Call
from realtime.engine.clock import ManualClock, settle
from realtime.engine.contracts import Ending, TextPiece, ToolCall, ToolOutcome, Turn
from realtime.engine.registry import EngineUnavailable, pipeline_class
from realtime.engine.session import shell as session_module
from realtime.engine.session.shell import Session, open_session
from testing.fakes import FakeDetector, RecordingTransport, ScriptedBrain, ScriptedTools, make_kit, silence, speech
from testing.pipeline import GREETING, Harness, lagging_recognizer, messages
from testing.recording import MemoryRecorder

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_db_threads")]

DISCLOSURE = "Just so you know, you are speaking with an AI, not a person."  # 13 words: 1.3 s


@pytest.fixture
def agent(greeting_agent):
    return greeting_agent


async def test_it_announces_the_session_then_speaks_the_disclosure_and_greeting(agent):
    h = Harness(agent, recorder=MemoryRecorder())
    await h.start()
    assert h.transport.kinds()[0] == "started"
    await h.feed(silence(2300))
    assert h.transport.transcripts() == [("assistant", f"{DISCLOSURE} {GREETING}")]
    assert h.transport.audio_ms() == pytest.approx(2000, abs=20)  # every synthesized sentence, once
    call = await h.stop()
    assert call.status == "completed"
    assert await messages(call) == [("assistant", f"{DISCLOSURE} {GREETING}")]


async def test_audio_is_paced_at_most_200_ms_ahead_of_real_time(agent):
    h = Harness(agent, recorder=MemoryRecorder())
    await h.start()
    await h.feed(silence(2300))
    audio = [(at, len(pcm) / 48) for at, kind, pcm in h.transport.events if kind == "audio"]
    first = audio[0][0]
    sent = 0.0
    for at, ms in audio:
        sent += ms
        assert sent - (at - first) * 1000 <= 200 + 1e-6
    assert len(audio) > 10  # many chunks, not one burst
    await h.stop()


async def test_greeting_none_speaks_only_the_disclosure_in_the_agent_language(agent):
    agent.greeting_type = "none"
    agent.language = "it-IT"
    agent.ai_identity_disclosure_template_id = "named_agent"
    await sync_to_async(agent.save)()
    h = Harness(agent, recorder=MemoryRecorder())
    await h.start()
    await h.feed(silence(2000))
    assert h.transport.transcripts() == [("assistant", "Salve, sono Ava, un agente di intelligenza artificiale.")]
    await h.stop()


async def test_a_user_turn_gets_a_transcript_an_answer_and_messages(agent):
    h = Harness(agent, texts=["i would like to book a table"])
    await h.start()
    await h.feed(silence(2000))
    await h.talk(800)
    answer = "You said: i would like to book a table."
    assert ("user", "i would like to book a table") in h.transport.transcripts()
    await h.feed(silence(1200))
    assert h.transport.transcripts()[-1] == ("assistant", answer)
    # The recognizer heard the utterance from its onset (pre-roll), not only after the detector's start.
    assert h.parts["recognizer"].heard_bytes[0] >= 800 * 32
    call = await h.stop()
    assert [role for role, _ in await messages(call)] == ["assistant", "user", "assistant"]
    assert (await messages(call))[-1] == ("assistant", answer)
    await sync_to_async(flush_agent_logs)()
    logs = await sync_to_async(list)(
        AgentLog.objects.filter(session_id=h.recorder.session_id).values_list("content", flat=True)
    )
    texts = [entry["message"] for entry in logs]
    assert {"session started", "user turn", "assistant turn", "session ended"} <= set(texts)
    assert not any("book a table" in str(entry) for entry in logs)  # no transcript in the log


async def test_barge_in_clears_stops_the_answer_and_keeps_only_what_was_heard(agent):
    brain = ScriptedBrain([TextPiece("One two three four five. Six seven eight nine ten. Eleven twelve.")])
    h = Harness(agent, recorder=MemoryRecorder(), texts=["question", "stop please"], brain=brain)
    await h.start()
    await h.feed(silence(2000))
    await h.talk(600, then_silence_ms=150)
    answer_started = h.clock.now()
    await h.feed(silence(500))  # about five words heard
    await h.talk(600, then_silence_ms=300)
    kinds = h.transport.kinds()
    assert "clear" in kinds
    cleared_at = next(at for at, kind, _ in h.transport.events if kind == "clear")
    # Once cleared, no more audio of the interrupted answer: only the answer to the new turn follows.
    transcripts = h.transport.transcripts()
    cut = [text for role, text in transcripts if role == "assistant"][1]
    assert cut.startswith("One two three") and "twelve" not in cut
    assert 4 <= len(cut.split()) <= 9
    assert ("user", "stop please") in transcripts
    await h.feed(silence(2500))
    assert h.transport.transcripts()[-1] == ("assistant", "Okay.")
    assert h.clock.now() > answer_started
    assert cleared_at > answer_started
    call = await h.stop()
    assert [text for role, text in await messages(call) if role == "assistant"][1] == cut


async def test_short_speech_over_the_agent_does_not_interrupt(agent):
    h = Harness(agent, recorder=MemoryRecorder(), texts=["question", "uh huh"])
    await h.start()
    await h.feed(silence(2000))
    await h.talk(600, then_silence_ms=150)
    await h.talk(120, then_silence_ms=2000)
    assert "clear" not in h.transport.kinds()
    assert h.transport.transcripts()[-1] == ("assistant", "You said: question.")
    assert ("user", "uh huh") not in h.transport.transcripts()
    await h.stop()


async def test_the_disclosure_cannot_be_interrupted_but_the_greeting_can(agent):
    h = Harness(agent, recorder=MemoryRecorder(), texts=["hello"])
    await h.start()
    await h.feed(silence(200))
    await h.feed(speech(900))  # inside the 1.3 s disclosure
    assert "clear" not in h.transport.kinds()
    await h.feed(speech(400))  # the greeting has begun: now the caller takes the turn (one word, heard twice)
    assert "clear" in h.transport.kinds()
    await h.feed(silence(300))
    transcripts = h.transport.transcripts()
    assert transcripts[0][0] == "assistant" and transcripts[0][1].startswith(DISCLOSURE)
    assert ("user", "hello") in transcripts
    await h.stop()


class ThinkingBrain:
    """An echo brain that takes `seconds` of the clock to answer (a language model's wait), and
    remembers the caller turns it was asked about."""

    def __init__(self, seconds: float = 0.8) -> None:
        self.seconds = seconds
        self.clock: ManualClock | None = None
        self.asked: list[list[str]] = []

    async def respond(self, context, history):
        users = [turn.text for turn in history if turn.role == "user"]
        self.asked.append(users)
        assert self.clock is not None
        await self.clock.sleep_until(self.clock.now() + self.seconds)
        yield TextPiece(f"You said: {users[-1]}.")


FIRST, SECOND = "where is the visitor parking garage", "where can i park my car"


async def greeted(h: Harness) -> None:
    await h.start()
    await h.feed(silence(2300))  # the disclosure and the greeting have played


async def test_a_caller_who_goes_on_while_the_answer_is_prepared_gets_one_turn_and_one_answer(agent):
    brain = ThinkingBrain(0.8)
    h = Harness(agent, recorder=MemoryRecorder(), texts=[FIRST, SECOND], brain=brain)
    brain.clock = h.clock
    await greeted(h)
    await h.talk(600, then_silence_ms=300)  # the turn ends after 100 ms of silence: the brain thinks
    assert h.transport.transcripts()[-1] == ("user", FIRST)
    await h.talk(600, then_silence_ms=2500)  # the caller goes on before any answer plays
    joined = f"{FIRST} {SECOND}"
    assert brain.asked == [[FIRST], [joined]]  # the first answer was dropped, the whole turn answered
    transcripts = h.transport.transcripts()
    assert transcripts[1:] == [("user", FIRST), ("user", SECOND), ("assistant", f"You said: {joined}.")]
    call = await h.stop()
    assert await messages(call) == [
        ("assistant", f"{DISCLOSURE} {GREETING}"),
        ("user", joined),
        ("assistant", f"You said: {joined}."),
    ]


@pytest.mark.parametrize("pause_ms", [150, 400])
async def test_a_caller_who_goes_on_as_the_answer_starts_playing_gets_it_dropped_and_one_answer(agent, pause_ms):
    h = Harness(agent, texts=[FIRST, SECOND])
    await greeted(h)
    await h.talk(600, then_silence_ms=150)  # the answer starts playing 100 ms into the pause
    started = h.clock.now() - 0.05
    await h.feed(silence(pause_ms - 150))
    await h.talk(600, then_silence_ms=2500)  # heard for less than REALTIME_CONTINUE_TURN_MS (500 ms)
    joined = f"{FIRST} {SECOND}"
    cleared_at = next(at for at, kind, _ in h.transport.events if kind == "clear")
    assert h.transport.audio_ms(since=started) > 0 and cleared_at > started  # it had begun: it was cut
    # Nothing of the dropped answer is in the transcript, and the answer is to all the caller said.
    assert h.transport.transcripts()[1:] == [("user", FIRST), ("user", SECOND), ("assistant", f"You said: {joined}.")]
    call = await h.stop()
    assert await messages(call) == [
        ("assistant", f"{DISCLOSURE} {GREETING}"),
        ("user", joined),
        ("assistant", f"You said: {joined}."),
    ]
    await sync_to_async(flush_agent_logs)()
    texts = await sync_to_async(list)(
        AgentLog.objects.filter(session_id=h.recorder.session_id).values_list("content__message", flat=True)
    )
    assert "caller went on before hearing the answer" in texts and "barge-in" not in texts


def voiced(ms: int, seed: int) -> bytes:
    """`ms` of caller audio that differs from sample to sample (where a piece of it was cut shows)."""
    samples = np.random.default_rng(seed).integers(300, 3000, size=16 * ms, dtype=np.int16)
    return samples.astype("<i2").tobytes()


@pytest.mark.parametrize("piece_ms", [250, 37, 1000])
async def test_the_recognizer_hears_the_same_audio_however_the_callers_audio_comes_in_pieces(agent, piece_ms):
    """The same caller audio streamed in 20 ms frames, in the larger pieces of a listener that takes waiting
    audio together on a loaded machine, or in odd pieces: the recognizer is given the same audio for each
    utterance (from the same pre-roll to the same last frame), so it makes the same words of the same sound."""
    caller = voiced(700, seed=1) + silence(3000) + voiced(400, seed=2) + silence(3000)
    heard = []
    for piece in (20, piece_ms):
        h = Harness(agent, texts=[FIRST, SECOND])
        await greeted(h)
        await h.feed(caller, piece_ms=piece)
        assert [text for role, text in h.transport.transcripts() if role == "user"] == [FIRST, SECOND]
        heard.append(h.parts["recognizer"].heard)
        await h.stop()
    framed, pieces = heard
    assert [len(audio) for audio in pieces] == [len(audio) for audio in framed]
    assert pieces == framed


def quick_end_harness(agent, texts: list[str], *, lagging: bool) -> tuple[Harness, asyncio.Event]:
    """A session whose detector reports pauses (the quick end of turn: 300 ms, turns whose words do not
    read finished end after 700 ms) and whose recognizer, when `lagging`, tells the words at a pause only
    once the returned event is set."""
    caught_up = asyncio.Event()
    if not lagging:
        caught_up.set()
    h = Harness(
        agent,
        recorder=MemoryRecorder(),
        texts=texts,
        detector=partial(FakeDetector, pause_ms=300, end_ms=700),
        run_blocking=lagging_recognizer(caught_up),
    )
    return h, caught_up


@pytest.mark.parametrize("lagging", [False, True], ids=["words-on-time", "words-after-the-caller-went-on"])
async def test_a_finished_sentence_ends_the_turn_in_its_pause_however_late_its_words_are_recognized(agent, lagging):
    """A finished sentence, a 400 ms pause, more words: the turn ends in the pause (300 ms of silence
    after words that read finished) whether the recognizer tells the words in the pause or only after
    the caller has spoken again. Either way the caller went on before hearing the answer: two caller
    turns, one answer to both, and each utterance's audio recognized on its own."""
    h, caught_up = quick_end_harness(agent, [FIRST, SECOND], lagging=lagging)
    await greeted(h)
    await h.feed(speech(600) + silence(400) + speech(300))
    assert (h.transport.transcripts()[-1] == ("user", FIRST)) is not lagging
    caught_up.set()
    await settle()
    assert h.transport.transcripts()[-1] == ("user", FIRST)
    await h.talk(300, then_silence_ms=2500)
    joined = f"{FIRST} {SECOND}"
    assert h.transport.transcripts()[1:] == [("user", FIRST), ("user", SECOND), ("assistant", f"You said: {joined}.")]
    first, second = h.parts["recognizer"].heard_bytes
    assert first <= (400 + 600 + 300 + 20) * 32  # the preroll, the sentence and the pause up to its end
    assert second >= (100 + 600) * 32  # the rest of the pause and what the caller said after it
    call = await h.stop()
    assert await messages(call) == [
        ("assistant", f"{DISCLOSURE} {GREETING}"),
        ("user", joined),
        ("assistant", f"You said: {joined}."),
    ]


@pytest.mark.parametrize("lagging", [False, True], ids=["words-on-time", "words-after-the-caller-went-on"])
async def test_words_that_announce_more_keep_the_turn_whole_however_late_they_are_recognized(agent, lagging):
    """ "My number is ... four five six" with a 400 ms pause: the words at the pause do not read finished,
    so the turn goes on, whether they are told in the pause or after the caller has spoken again."""
    h, caught_up = quick_end_harness(agent, ["my number is four five six"], lagging=lagging)
    await greeted(h)
    h.parts["recognizer"].peek = lambda: "my number is"  # the words at the pause
    await h.feed(speech(600) + silence(400) + speech(300))
    caught_up.set()
    await h.talk(300, then_silence_ms=2500)
    assert h.transport.transcripts()[1:] == [
        ("user", "my number is four five six"),
        ("assistant", "You said: my number is four five six."),
    ]
    assert len(h.parts["recognizer"].heard_bytes) == 1
    await h.stop()


async def test_speech_after_the_answer_has_been_heard_is_a_barge_in_and_a_turn_of_its_own(agent):
    brain = ScriptedBrain([TextPiece("One two three four five. Six seven eight nine ten. Eleven twelve thirteen.")])
    h = Harness(agent, recorder=MemoryRecorder(), texts=[FIRST, SECOND], brain=brain)
    await greeted(h)
    await h.talk(600, then_silence_ms=150)
    await h.feed(silence(650))  # the answer has played 700 ms when the caller speaks again
    await h.talk(600, then_silence_ms=1500)
    transcripts = h.transport.transcripts()
    cut = transcripts[2][1]
    assert transcripts[1:] == [("user", FIRST), ("assistant", cut), ("user", SECOND), ("assistant", "Okay.")]
    assert cut.startswith("One two three four five. Six") and "thirteen" not in cut
    assert [[turn.text for turn in seen if turn.role == "user"][-1] for seen in brain.seen] == [FIRST, SECOND]
    call = await h.stop()
    assert await messages(call) == [
        ("assistant", f"{DISCLOSURE} {GREETING}"),
        ("user", FIRST),
        ("assistant", cut),
        ("user", SECOND),
        ("assistant", "Okay."),
    ]


async def test_words_that_go_on_with_a_turn_drop_the_tool_calls_of_its_unheard_answer(agent):
    tools = ScriptedTools({"search_knowledge": ToolOutcome(result='{"passages": []}', status="success")}, wait=True)
    search = ToolCall(name="search_knowledge", arguments={"query": FIRST}, id="t1")
    brain = ScriptedBrain([search], [TextPiece("Behind the clinic.")])
    h = Harness(agent, recorder=MemoryRecorder(), texts=[FIRST, SECOND], brain=brain, tools=tools)
    await greeted(h)
    await h.talk(600, then_silence_ms=200)
    assert [call.name for call in tools.calls] == ["search_knowledge"]  # still searching
    await h.talk(600, then_silence_ms=1500)
    # The brain is asked once more, about the whole turn, without the dropped answer's tool round.
    assert brain.seen[-1][-1] == Turn(role="user", text=f"{FIRST} {SECOND}")
    assert [turn.role for turn in brain.seen[-1]].count("tool") == 0
    assert h.transport.transcripts()[-1] == ("assistant", "Behind the clinic.")
    call = await h.stop()
    assert [role for role, _ in await messages(call)] == ["assistant", "user", "assistant"]


async def test_a_sound_that_goes_on_with_a_turn_but_is_not_understood_gets_the_turn_answered_once(agent):
    h = Harness(agent, recorder=MemoryRecorder(), texts=[FIRST, ""])
    await greeted(h)
    await h.talk(600, then_silence_ms=150)
    await h.talk(600, then_silence_ms=2500)  # long enough to drop the answer, but not understood
    assert h.transport.transcripts()[1:] == [("user", FIRST), ("assistant", f"You said: {FIRST}.")]
    call = await h.stop()
    assert [text for role, text in await messages(call) if role != "assistant"] == [FIRST]


def waiting_tools() -> ScriptedTools:
    return ScriptedTools({"book_table": ToolOutcome(result='{"status": "booked"}', status="success")}, wait=True)


async def test_keyboard_plays_while_a_tool_runs_and_the_result_goes_back_to_the_brain(agent):
    agent.background_sound = "keyboard"
    await sync_to_async(agent.save)()
    tools = waiting_tools()
    brain = ScriptedBrain([ToolCall(name="book_table", arguments={"people": 2}, id="t1")])
    h = Harness(agent, texts=["book a table"], brain=brain, has_bed=True, tools=tools)
    await h.start()
    await h.feed(silence(2000))
    mixer = h.parts["mixer"]
    assert not any(keyboard for _, _, keyboard in mixer.calls)
    await h.talk(600)
    assert tools.calls and tools.calls[0].arguments == {"people": 2}
    before = len(mixer.calls)
    await h.feed(silence(400))
    assert mixer.calls[before:] and all(keyboard for _, _, keyboard in mixer.calls[before:])
    tools.release.set()
    await h.feed(silence(800))
    assert h.transport.transcripts()[-1] == ("assistant", "Done.")
    assert not mixer.calls[-1][2]
    # The brain sees its own call and the result, so that a language model can replay both exactly.
    assert brain.seen[-1][-2:] == [
        Turn(role="assistant", text="", tool_calls=(ToolCall(name="book_table", arguments={"people": 2}, id="t1"),)),
        Turn(role="tool", text='{"status": "booked"}', tool_call_id="t1", name="book_table"),
    ]
    await h.stop()


async def test_keyboard_is_heard_without_an_ambient_bed_and_stops_after_the_tool(agent):
    agent.background_sound = "keyboard"
    await sync_to_async(agent.save)()
    tools = waiting_tools()
    brain = ScriptedBrain([ToolCall(name="book_table", arguments={}, id="t1")])
    h = Harness(agent, recorder=MemoryRecorder(), texts=["book a table"], brain=brain, has_bed=False, tools=tools)
    await h.start()
    await h.feed(silence(2000))
    await h.talk(600)
    assert tools.calls
    mixer = h.parts["mixer"]
    frames_before, audio_before = len(mixer.calls), h.transport.audio_ms()
    await h.feed(silence(1000))
    # A second of tool time is a second of typing, streamed although nothing is said.
    typing = mixer.calls[frames_before:]
    assert len(typing) >= 45 and all(keyboard and not spoken for spoken, _, keyboard in typing)
    assert h.transport.audio_ms() - audio_before >= 900
    tools.release.set()
    await h.feed(silence(1500))
    assert h.transport.transcripts()[-1] == ("assistant", "Done.")
    # After the answer, only a short fade-out tail, then the stream stops again.
    idle_audio = h.transport.audio_ms()
    await h.feed(silence(1000))
    assert h.transport.audio_ms() == idle_audio
    assert not mixer.calls[-1][2]
    await h.stop()


async def test_with_an_ambient_bed_the_stream_is_continuous_and_ducking_knows_the_caller_speaks(agent):
    h = Harness(agent, recorder=MemoryRecorder(), texts=["hi"], has_bed=True)
    await h.start()
    await h.feed(silence(2500))
    await h.talk(600)
    # Continuous: 20 ms of audio for every 20 ms of time (plus the initial lead).
    elapsed = (h.clock.now() - h.transport.events[1][0]) * 1000
    assert h.transport.audio_ms() == pytest.approx(elapsed + 200, abs=80)
    assert any(user for _, user, _ in h.parts["mixer"].calls)
    await h.stop()


async def test_a_language_without_recognition_logs_a_warning_and_still_greets(agent):
    h = Harness(agent, recognizer=False)
    await h.start()
    await h.feed(silence(2000) + speech(600) + silence(300))
    assert [role for role, _ in h.transport.transcripts()] == ["assistant"]
    await h.stop()
    await sync_to_async(flush_agent_logs)()
    warn = await sync_to_async(AgentLog.objects.filter(session_id=h.recorder.session_id, severity="warn").first)()
    assert warn is not None and "recognition" in warn.content["message"]


class BrokenBrain:
    async def respond(self, context, history):
        raise RuntimeError("model crashed")
        yield  # pragma: no cover


async def test_an_engine_error_fails_the_call_and_closes_with_4500(agent):
    h = Harness(agent, texts=["hello"], brain=BrokenBrain())
    await h.start()
    await h.feed(silence(2000))
    await h.talk(600)
    await settle()
    await asyncio.wait_for(h.task, 10)
    assert h.transport.ended == (Ending.FAILED, "The conversation engine failed")
    call = await sync_to_async(Call.objects.get)(pk=h.conversation.call_id)
    assert call.status == "failed"
    assert call.ended_reason == "error"  # not a provider's failure: the service's own
    assert ("user", "hello") in [(m.role, m.content) for m in await sync_to_async(list)(call.messages.all())]


async def test_stop_keeps_the_heard_part_of_a_running_answer(agent):
    h = Harness(agent, recorder=MemoryRecorder())
    await h.start()
    await h.feed(silence(700))
    call = await h.stop()
    assert call.status == "completed"
    (role, text), *_ = await messages(call)
    assert role == "assistant" and DISCLOSURE.startswith(text) and 3 <= len(text.split()) <= 8


async def test_a_stage_that_ignores_cancellation_does_not_keep_the_call_open(agent, monkeypatch):
    monkeypatch.setattr(session_module, "STOP_GRACE_SECONDS", 0.2)
    released = asyncio.Event()

    async def stubborn_watchdog(self) -> None:
        while not released.is_set():
            try:
                await released.wait()
            except asyncio.CancelledError:
                continue  # the kind of bug that once left calls `active` after a hang-up

    monkeypatch.setattr(Session, "_watchdog", stubborn_watchdog)
    h = Harness(agent)
    await h.start()
    await h.feed(silence(100))
    stubborn = next(task for task in h.conversation.tasks if task.get_name().startswith("watchdog-"))
    try:
        call = await asyncio.wait_for(h.stop(), 10)
        assert call.status == "completed" and call.ended_at is not None
        await sync_to_async(flush_agent_logs)()
        logged = await sync_to_async(list)(
            AgentLog.objects.filter(session_id=h.recorder.session_id).values_list("content", flat=True)
        )
        entry = next(e for e in logged if e["message"] == "engine stages did not stop; the call was ended anyway")
        assert entry["stages"] == [stubborn.get_name()]
    finally:
        released.set()
        stubborn.cancel()
        await asyncio.wait({stubborn}, timeout=2)
    assert stubborn.done()


async def test_a_voice_engine_that_is_not_available_refuses_the_session(agent, settings):
    settings.VOICE_ENGINE = "speech-to-speech"
    with pytest.raises(EngineUnavailable, match="VOICE_ENGINE=speech-to-speech"):
        pipeline_class()
    clock = ManualClock()
    transport = RecordingTransport(clock)
    conversation = open_session(agent=agent, transport=transport, channel="web", tools=ScriptedTools())
    await asyncio.wait_for(conversation.run(), 10)
    assert transport.ended is not None and transport.ended[0] == Ending.FAILED
    assert "VOICE_ENGINE=speech-to-speech" in transport.ended[1]
    assert not await sync_to_async(Call.objects.exists)()


async def test_caller_audio_cannot_run_ahead_of_real_time(agent):
    h = Harness(agent, recorder=MemoryRecorder())
    await h.start()
    accepted = [h.conversation.push_audio(silence(500)) for _ in range(8)]
    assert accepted == [True] * 6 + [False] * 2  # a 3-second burst, then refused
    await h.clock.advance(1.0)
    assert h.conversation.push_audio(silence(500)) is True
    await h.stop()


async def test_a_caller_that_sends_no_audio_is_disconnected_and_the_call_completed(agent, settings):
    settings.REALTIME_INPUT_IDLE_SECONDS = 5
    h = Harness(agent)
    await h.start()
    await h.feed(silence(3000))
    await h.clock.advance(4.0)
    assert h.transport.ended is None  # audio stopped 4 s ago
    await h.clock.advance(1.5)
    await asyncio.wait_for(h.task, 10)
    assert h.transport.ended == (Ending.IDLE, "")
    call = await sync_to_async(Call.objects.get)(pk=h.conversation.call_id)
    assert call.status == "completed"


def test_server_start_preload_warms_the_voice_kit_and_the_knowledge_model(monkeypatch):
    from knowledge import embeddings
    from realtime.apps import preload_in_background
    from realtime.engine.cascade import pipeline as cascade
    from realtime.engine.cascade.kit import reset_kits

    loaded = []
    kit = dataclasses.replace(make_kit()[0], preload=lambda: loaded.append("voice"))
    monkeypatch.setattr(cascade, "voice_kit", lambda: kit)
    reset_kits()
    embeddings.reset_session()
    preload_in_background().join(timeout=120)
    assert loaded == ["voice"]
    assert embeddings.session_loaded()


async def test_a_caller_turn_given_as_text_is_answered_like_speech(agent):
    h = Harness(agent, recorder=MemoryRecorder())
    await h.start()
    await h.feed(silence(2300))
    await h.conversation.caller_text("pressed 1")
    await h.feed(silence(1000))
    assert h.transport.transcripts()[-2:] == [("user", "pressed 1"), ("assistant", "You said: pressed 1.")]
    call = await h.stop()
    assert ("user", "pressed 1") in await messages(call)


async def test_a_transfer_ends_the_call_and_every_stage_of_the_session(agent):
    # The handoff is performed by the playout once the handoff sentence has played: the playout stage
    # must not outlive the call it ended.
    destination = "+15550001111"
    transfer = ToolOutcome(result='{"status": "transferring"}', status="success", transfer_to=destination)
    brain = ScriptedBrain([ToolCall(name="transfer_call", arguments={}, id="t1")])
    h = Harness(agent, texts=["a person please"], brain=brain, tools=ScriptedTools({"transfer_call": transfer}))
    await h.start()
    await h.feed(silence(2300))
    await h.talk(600)
    await h.feed(silence(2000))
    await asyncio.wait_for(h.task, 10)
    await settle()
    assert h.transport.ended == (Ending.TRANSFERRED, "")
    assert h.transport.transferred_to == destination
    stages = [task.get_name() for task in asyncio.all_tasks() if task.get_name().endswith(h.recorder.session_id)]
    assert stages == []
    call = await sync_to_async(Call.objects.get)(pk=h.conversation.call_id)
    assert call.status == "completed"


async def test_each_sentence_is_sent_as_agent_speech_when_its_audio_starts_playing(agent):
    h = Harness(agent, recorder=MemoryRecorder())
    await h.start()
    await h.feed(silence(2300))
    # Each as its first audio plays at the listener: after 13 and 16 words of 100 ms; then ended, then the
    # transcript once the whole greeting has played.
    sentences = [DISCLOSURE, "Welcome to Acme.", "How can I help?"]
    h.transport.assert_captioned(sentences, [0.0, 1.3, 1.6], f"{DISCLOSURE} {GREETING}")
    # Audio keeps coming after each caption: "How can I help?" is 400 ms, at most the 200 ms lead of it
    # went out before its caption.
    last_caption = max(at for at, kind, _ in h.transport.messages() if kind == "agent_speech")
    assert h.transport.audio_ms(since=last_caption) >= 400 - 200
    await h.stop()


async def test_a_barge_in_ends_the_agent_speech_as_interrupted_before_the_cut_transcript(agent):
    sentences = ["One two three four five.", "Six seven eight nine ten.", "Eleven twelve."]
    brain = ScriptedBrain([TextPiece(" ".join(sentences))])
    h = Harness(agent, recorder=MemoryRecorder(), texts=["question", "stop please"], brain=brain)
    await h.start()
    await h.feed(silence(2000))
    before = len(h.transport.events)
    await h.talk(600, then_silence_ms=150)
    await h.feed(silence(500))
    await h.talk(600, then_silence_ms=300)
    events = h.transport.messages()[before:]
    kinds = [kind for _, kind, _ in events]
    clear = kinds.index("clear")
    captions = [value["text"] for _, kind, value in events[:clear] if kind == "agent_speech"]
    cut = next(value[1] for _, kind, value in events[clear:] if kind == "transcript" and value[0] == "assistant")
    # Captions went out sentence by sentence while the answer played, and covered every word that was heard.
    assert captions and captions == sentences[: len(captions)]
    assert " ".join(captions).startswith(cut)
    assert events[clear + 1][2] == {"type": "agent_speech.ended", "interrupted": True}
    assert kinds.index("transcript", clear) == clear + 2  # then the heard part of the answer
    # The answer to the next turn gets its own captions.
    await h.feed(silence(1500))
    later = [value["text"] for _, kind, value in h.transport.messages()[before:][clear:] if kind == "agent_speech"]
    assert later == ["Okay."]
    await h.stop()


async def test_a_finished_tool_call_says_how_it_went_and_why_a_failed_one_failed(agent):
    reason = "The tool answered HTTP 500"
    tools = ScriptedTools(
        {
            "book_table": ToolOutcome(result=f'{{"error": "{reason}"}}', status="error", reason=reason),
            "find_table": ToolOutcome(result='{"table": 4}', status="success"),
        }
    )
    brain = ScriptedBrain([ToolCall(name="find_table", arguments={}, id="t1")])
    h = Harness(agent, recorder=MemoryRecorder(), texts=["find a table", "book it"], brain=brain, tools=tools)
    brain.scripts.append([ToolCall(name="book_table", arguments={}, id="t2")])
    await h.start()
    await h.feed(silence(2000))
    await h.talk(600)
    await h.feed(silence(800))
    await h.talk(600)
    await h.feed(silence(800))
    finished = [value for _, kind, value in h.transport.messages() if kind == "tool.finished"]
    assert finished == [
        {"type": "tool.finished", "name": "find_table", "status": "success"},
        {"type": "tool.finished", "name": "book_table", "status": "error", "error": reason},
    ]
    await h.stop()
