"""End to end through the project's ASGI application in the test's process (testing/inprocess.py):
session tokens at the socket, the browser protocol, and a spoken conversation with the real offline
speech parts (eSpeak NG in, Silero VAD + PocketSphinx, eSpeak NG out), down to the call record in the
database. That a serving process loads those models without torch is checked in a process of its own
(`without_torch`)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from asgiref.sync import sync_to_async

from calls.models import Call
from realtime import tokens
from testing.agents import AVA_GREETING, ava_agent
from testing.clients import VoiceClient, is_type
from testing.inprocess import InProcessServer, serving
from testing.voice import record_voice, rms
from testing.waiting import polled

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    pytest.mark.usefixtures("close_db_threads"),
]

GREETING = AVA_GREETING
INSTRUCTIONS = (
    "You take table reservations for the Acme restaurant. Callers book a table for a number of people, "
    "for a date and a time, for lunch or dinner."
)
SENTENCE = "I would like to book a table for four people tomorrow evening."
# Ava has no tools and no knowledge: the embedded brain answers any request with what she does.
ANSWER = "I take table reservations for the Acme restaurant. What would you like to do?"
SECOND = "Please book it for dinner at seven."


@pytest.fixture
def server(settings: Any) -> Iterator[InProcessServer]:
    with serving(settings) as started:
        yield started


@pytest.fixture
def ava(owner: Any, make_agent: Any, realtime_settings: Any) -> Any:
    return ava_agent(owner, make_agent, instructions=INSTRUCTIONS)


def socket_url(server: InProcessServer, agent_id: Any, token: str) -> str:
    return f"{server.ws_url}/ws/agents/{agent_id}/realtime?token={token}"


def issue(agent: Any, **kwargs: Any) -> str:
    return tokens.issue_token(agent_id=agent.pk, organization_id=agent.organization_id, **kwargs)[0]


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z']+", text.lower()))


@pytest.fixture(scope="module")
def speech_16k(tmp_path_factory: Any) -> dict[str, bytes]:
    # A recording: freshly synthesized speech differs from run to run, and so does what is heard.
    return record_voice((SENTENCE, SECOND), tmp_path_factory.mktemp("voice"))


def silence(ms: int) -> bytes:
    return b"\x00\x00" * (16 * ms)


async def audio_received(client: VoiceClient, *, after: int, seconds: float) -> None:
    """Wait until the client has received `seconds` of agent audio from message `after` on."""
    while len(client.audio(after)) < seconds * 48000:
        await client.wait_for(is_type("output_audio"), after=len(client.messages))


async def refused(server: InProcessServer, agent_id: Any, token: str) -> tuple[int | None, dict[str, Any]]:
    async with VoiceClient(socket_url(server, agent_id, token)) as client:
        code = await client.wait_closed()
        assert not any(m.message["type"] == "output_audio" for m in client.messages)
        return code, client.messages[0].message


async def test_the_socket_refuses_bad_tokens_with_documented_close_codes(server, ava, owner, make_agent):
    other = await sync_to_async(make_agent)(owner.organization, name="Other", status="active")
    expired = issue(ava, now=time.time() - 61)
    assert await refused(server, ava.pk, expired) == (
        4401,
        {"type": "error", "code": "invalid_token", "message": "Session token expired"},
    )
    good = issue(ava)
    code, message = await refused(server, ava.pk, good[:-3] + ("xyz" if not good.endswith("xyz") else "abc"))
    assert (code, message["code"]) == (4401, "invalid_token")
    assert (await refused(server, ava.pk, ""))[0] == 4401
    code, message = await refused(server, other.pk, good)
    assert (code, message["code"]) == (4403, "wrong_agent")
    # A refused wrong-agent attempt does not spend the token; deactivating the agent does refuse it.
    ava.status = "inactive"
    await sync_to_async(ava.save)(update_fields=["status"])
    code, message = await refused(server, ava.pk, good)
    assert (code, message["code"]) == (4409, "conflict")
    assert not await sync_to_async(Call.objects.exists)()


async def test_a_token_opens_one_socket_only_also_through_a_second_application(server, ava):
    """The spent token is in the database (UsedSessionToken): another instance of the application,
    with nothing of the first's in memory, refuses it too."""
    second = InProcessServer().start()
    try:
        token = issue(ava)
        async with VoiceClient(socket_url(server, ava.pk, token)) as first:
            await first.wait_for(is_type("session.started"), timeout=60)
            code, message = await refused(second, ava.pk, token)
            assert (code, message["code"]) == (4409, "conflict")
            code, _ = await refused(server, ava.pk, token)
            assert code == 4409
            await first.send({"type": "stop"})
            assert await first.wait_closed() == 1000
    finally:
        second.stop()


async def test_bad_messages_get_an_error_and_the_session_goes_on(server, ava):
    async with VoiceClient(socket_url(server, ava.pk, issue(ava))) as client:
        await client.wait_for(is_type("session.started"), timeout=60)
        for raw, code in (
            ('{"type": "input_audio", "audio": "%%%not base64"}', "bad_audio"),
            ('{"type": "input_audio", "audio": "AAAA"}', "bad_audio"),  # 3 bytes: not whole samples
            ('{"type": "input_audio", "audio": 12}', "bad_audio"),
            ("not json", "bad_message"),
            ('{"type": "dance"}', "bad_message"),
            (b"\x00\x01", "bad_message"),
            ('{"type": "input_audio", "audio": "%s"}' % ("A" * 600_000), "bad_message"),  # 450 kB of audio
        ):
            before = len(client.messages)
            await client.send_raw(raw)
            index = await client.wait_for(is_type("error"), after=before)
            assert client.messages[index].message["code"] == code
        await client.send_audio(b"\x00\x00" * 7)  # any even size is fine
        await client.send({"type": "stop"})
        assert await client.wait_closed() == 1000
    call = await sync_to_async(Call.objects.get)(agent=ava)
    assert call.status == "completed"


async def test_a_spoken_conversation_end_to_end(server, ava, speech_16k):
    async with VoiceClient(socket_url(server, ava.pk, issue(ava))) as client:
        first = await client.wait_for(is_type("session.started"), timeout=60)
        call_id = client.messages[first].message["callId"]

        # The microphone is on from the start: silence streams until the greeting has played.
        greeted = asyncio.Event()
        mic = asyncio.create_task(client.stream(silence(30_000), stop_when=greeted.is_set))
        index = await client.wait_for(is_type("transcript", role="assistant"), timeout=60)
        greeting_text = client.messages[index].message["text"]
        assert greeting_text.startswith("Just so you know, you are speaking with an AI") and greeting_text.endswith(
            GREETING
        )
        audio_messages = [m.message for m in client.messages[:index] if m.message["type"] == "output_audio"]
        assert audio_messages and {(m["encoding"], m["sampleRate"]) for m in audio_messages} == {("pcm16", 24000)}
        greeting_audio = client.audio(0, index)
        assert len(greeting_audio) % 2 == 0 and rms(greeting_audio) > 300  # speech, not silence
        seconds = len(greeting_audio) / 48000
        assert 3 < seconds < 15
        # Let the greeting finish playing at the client before speaking (the server says it has played out).
        await client.wait_for(is_type("agent_speech.ended", interrupted=False), timeout=30)
        greeted.set()
        await mic

        # The caller speaks; the agent answers (with what it can do: it has no tools).
        before = len(client.messages)
        await client.stream(speech_16k[SENTENCE] + silence(1500))
        user_index = await client.wait_for(is_type("transcript", role="user"), after=before)
        heard = client.messages[user_index].message["text"]
        overlap = words(heard) & words(SENTENCE)
        assert len(overlap) >= len(words(SENTENCE)) // 2, heard
        answer_audio = await client.wait_for(is_type("output_audio"), after=user_index)
        # Once the caller has heard a second of the answer (earlier, speech would go on with the
        # caller's turn instead: see the turn-taking tests below) ...
        await audio_received(client, after=answer_audio, seconds=1.0)

        # ... the caller speaks again while the answer plays: the server clears and takes the turn.
        speaking = asyncio.create_task(client.stream(speech_16k[SECOND] + silence(1500)))
        clear_index = await client.wait_for(is_type("clear"), after=answer_audio)
        cut_index = await client.wait_for(is_type("transcript", role="assistant"), after=user_index)
        assert cut_index > clear_index  # the cut answer's transcript keeps only what was sent
        # The client was shown the answer as it was spoken, and told that it was cut.
        ended = await client.wait_for(is_type("agent_speech.ended"), after=user_index)
        assert client.messages[ended].message["interrupted"] is True and clear_index < ended < cut_index
        cut_text = client.messages[cut_index].message["text"]
        assert cut_text and ANSWER.startswith(cut_text) and cut_text != ANSWER
        await speaking
        second_user = await client.wait_for(is_type("transcript", role="user"), after=clear_index)
        assert words(client.messages[second_user].message["text"]) & words(SECOND)
        second_answer = await client.wait_for(is_type("transcript", role="assistant"), after=second_user, timeout=40)
        assert client.messages[second_answer].message["text"] == ANSWER

        await client.send({"type": "stop"})
        assert await client.wait_closed() == 1000

    call = await sync_to_async(Call.objects.get)(pk=call_id)
    assert call.status == "completed" and call.channel == "web" and call.ended_at is not None
    rows = await sync_to_async(
        lambda: list(call.messages.order_by("occurred_at", "sequence").values_list("role", "content"))
    )()
    assert [role for role, _ in rows] == ["assistant", "user", "assistant", "user", "assistant"]
    assert rows[0][1] == greeting_text and rows[1][1] == heard and rows[2][1] == cut_text
    samples = np.frombuffer(greeting_audio, dtype="<i2")
    assert samples.max() > 1000 and samples.min() < -1000
    # A serving process hears and speaks with these models on onnxruntime alone: torch (about 200 MB a
    # process, which the silero-vad package's own import would load) is not in its memory.
    assert await asyncio.to_thread(without_torch) == {"libtorch": False, "torch": False}


# What a serving process loads to hear and speak (the embedded kit's models, and one of each part a
# session makes), in a process of its own; then whether torch is in its memory.
LOAD_THE_SPEECH_MODELS = """
import json, sys, django
django.setup()
from pathlib import Path
from realtime.engine.cascade import kit
from realtime.engine.speech.espeak import synthesize
voice = kit.voice_kit()
kit.ensure_preloaded(voice)
detector = voice.detector()
audio = synthesize("Hello there.", language="en-US", voice_name="eve")
maps = Path("/proc/self/maps").read_text()
print(json.dumps({"libtorch": "libtorch" in maps, "torch": "torch" in sys.modules}))
"""


def without_torch() -> dict[str, bool]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "voiceagent.settings"}
    done = subprocess.run(
        [sys.executable, "-c", LOAD_THE_SPEECH_MODELS],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


async def test_the_agent_s_words_arrive_sentence_by_sentence_as_it_speaks_them(server, ava):
    async with VoiceClient(socket_url(server, ava.pk, issue(ava))) as client:
        await client.wait_for(is_type("session.started"), timeout=60)
        greeted = asyncio.Event()
        mic = asyncio.create_task(client.stream(silence(30_000), stop_when=greeted.is_set))
        final = await client.wait_for(is_type("transcript", role="assistant"), timeout=60)
        greeted.set()
        await mic
        messages = [m.message for m in client.messages[: final + 1]]
        kinds = [m["type"] for m in messages]
        captions = [index for index, kind in enumerate(kinds) if kind == "agent_speech"]
        texts = [messages[index]["text"] for index in captions]
        assert texts[0] == "Just so you know, you are speaking with an AI, not a person." and len(texts) >= 2
        assert " ".join(texts) == messages[final]["text"]
        # Each sentence arrives as its audio starts: none of the greeting's audio comes before the first,
        # and its sentence's audio keeps arriving after each (seconds of speech, not a tail).
        assert client.audio(0, captions[0]) == b""
        ended = kinds.index("agent_speech.ended")
        assert messages[ended] == {"type": "agent_speech.ended", "interrupted": False} and ended == final - 1
        for start, end in zip(captions, [*captions[1:], ended], strict=True):
            assert len(client.audio(start, end)) / 48000 > 0.5, messages[start]
        at = [client.messages[index].at for index in captions]
        print(
            f"captions at {', '.join(f'{t - at[0]:.2f}' for t in at)} s; the transcript of the "
            f"{len(client.audio(0, final)) / 48000:.1f} s greeting {client.messages[final].at - at[0]:.2f} s after the first"
        )
        await client.send({"type": "stop"})
        assert await client.wait_closed() == 1000


async def test_closing_the_socket_completes_the_call(server, ava):
    async with VoiceClient(socket_url(server, ava.pk, issue(ava))) as client:
        index = await client.wait_for(is_type("session.started"), timeout=60)
        call_id = client.messages[index].message["callId"]
        await client.send_audio(silence(200))

    # The server finishes the call when it sees the close; give it a moment (polling, no timing claim).
    async def ended() -> Call | None:
        call = await sync_to_async(Call.objects.get)(pk=call_id)
        return call if call.status != "active" else None

    call = await polled(ended, what=f"call {call_id} ended", timeout=10)
    assert call.status == "completed" and call.ended_at is not None


# --- turn-taking: the quick end of a turn, and a pause inside a sentence ---------------------------

QUESTION = "What time do you open on Saturday?"
FOLLOW_UP = "Is there parking near the restaurant?"
PAUSED = ("My number is", "four five six", "seven")


@pytest.fixture(scope="module")
def turn_speech(tmp_path_factory: Any) -> dict[str, bytes]:
    return record_voice((QUESTION, FOLLOW_UP, *PAUSED), tmp_path_factory.mktemp("turns"))


async def caller_turns(server: InProcessServer, agent: Any, pcm: bytes) -> list[str]:
    """After the greeting, the caller says `pcm` and listens for 3 s: the user turns heard."""
    async with VoiceClient(socket_url(server, agent.pk, issue(agent))) as client:
        await client.wait_for(is_type("session.started"), timeout=60)
        greeted = asyncio.Event()
        mic = asyncio.create_task(client.stream(silence(60_000), stop_when=greeted.is_set))
        await client.wait_for(is_type("transcript", role="assistant"), timeout=60)
        greeted.set()
        await mic
        before = len(client.messages)
        await client.stream(pcm + silence(3000))
        await client.send({"type": "stop"})
        await client.wait_closed()
    return [m.message["text"] for m in client.messages[before:] if is_type("transcript", role="user")(m.message)]


async def test_a_finished_sentence_ends_the_turn_before_the_full_silence_window(server, ava, turn_speech, settings):
    """A finished question, a 400 ms pause, another question: with the quick end of turn (default)
    the agent takes the turn in the pause (two caller turns); with VAD_QUICK_END_SILENCE_MS=0 every
    turn waits for the 500 ms window, so the pause does not end it (one turn)."""
    spoken = turn_speech[QUESTION] + silence(400) + turn_speech[FOLLOW_UP]
    quick = await caller_turns(server, ava, spoken)
    assert len(quick) == 2, quick
    assert words(quick[0]) & words(QUESTION) and words(quick[1]) & words(FOLLOW_UP)

    settings.VAD_QUICK_END_SILENCE_MS = 0  # what the second server's environment set
    assert len(await caller_turns(server, ava, spoken)) == 1


async def test_pauses_inside_a_number_do_not_split_the_turn(server, ava, turn_speech):
    """ "My number is ... four five six ... seven" with 600 ms pauses: longer than the quick end's
    300 ms and than the 500 ms window, but the words so far do not read as finished, so the turn
    waits (700 ms) and the caller is heard as one turn."""
    spoken = silence(600).join(turn_speech[part] for part in PAUSED)
    turns = await caller_turns(server, ava, spoken)
    assert len(turns) == 1, turns
    assert {"four", "five", "six", "seven"} & words(turns[0]), turns


# --- turn-taking: a caller who goes on before hearing the answer ------------------------------------

GARAGE = "Where is the visitor parking garage?"
PARK = "Where can I park my car?"
VISITOR_FAQ = """# Riverside Hospital: questions from visitors

## Where is the visitor parking garage?

The visitor parking garage is on Mill Street, behind the main entrance.

## Where can I park my car?

Visitors park their car in the visitor parking garage, free for the first two hours.

## When can I visit?

Visiting hours are from ten in the morning to eight in the evening, every day.
"""


@pytest.fixture(scope="module")
def visitor_speech(tmp_path_factory: Any) -> dict[str, bytes]:
    # In the voice "leo", both questions were checked offline through the server's listener with Hana's
    # language model (her prompt and this document): each is recognized word for word, and the first
    # ends its turn 300 ms into the pause after it (the quick end of turn: it reads finished).
    return record_voice((GARAGE, PARK), tmp_path_factory.mktemp("visitor"), voice_name="leo")


@pytest.fixture
def hana(owner: Any, make_agent: Any, realtime_settings: Any) -> Any:
    agent = make_agent(
        owner.organization,
        name="Hana",
        status="active",
        instructions="You answer the questions of visitors of the Riverside Hospital.",
        greeting_type="none",
    )
    upload = owner.client.post(f"/public/v1/agents/{agent.pk}/knowledge", {"content": VISITOR_FAQ}, format="json")
    assert upload.status_code == 200, upload.content
    return agent


async def test_a_caller_who_goes_on_before_hearing_the_answer_is_one_turn_answered_once(
    server, hana, owner, visitor_speech
):
    """Two questions with an 800 ms pause between them: the first reads finished, so its turn ends
    300 ms into the pause and its answer is prepared; the caller goes on before having heard that
    answer for REALTIME_CONTINUE_TURN_MS (500 ms). The answer is dropped, and both questions are
    one caller turn in the call record, answered once."""
    async with VoiceClient(socket_url(server, hana.pk, issue(hana))) as client:
        started = await client.wait_for(is_type("session.started"), timeout=60)
        call_id = client.messages[started].message["callId"]
        greeted = asyncio.Event()
        mic = asyncio.create_task(client.stream(silence(60_000), stop_when=greeted.is_set))
        await client.wait_for(is_type("transcript", role="assistant"), timeout=60)  # the disclosure
        greeted.set()
        await mic
        before = len(client.messages)
        await client.stream(visitor_speech[GARAGE] + silence(800) + visitor_speech[PARK] + silence(1000))
        answer = await client.wait_for(is_type("transcript", role="assistant"), after=before, timeout=45)
        await client.stream(silence(2000))  # no second answer comes
        await client.send({"type": "stop"})
        assert await client.wait_closed() == 1000

    # The client heard the caller's words as they came (the pause ended a turn), then one answer.
    transcripts = [m.message for m in client.messages[before:] if m.message["type"] == "transcript"]
    assert [t["role"] for t in transcripts] == ["user", "user", "assistant"], transcripts
    assert client.messages[answer].message == transcripts[-1]
    call = await sync_to_async(Call.objects.get)(pk=call_id)
    rows = await sync_to_async(
        lambda: list(call.messages.order_by("occurred_at", "sequence").values_list("role", "content"))
    )()
    assert [role for role, _ in rows] == ["assistant", "user", "assistant"], rows
    turn = words(rows[1][1])
    assert turn & (words(GARAGE) - words(PARK)) and turn & (words(PARK) - words(GARAGE)), rows[1]
    assert rows[2][1] == transcripts[-1]["text"]
    # The brain was asked about the whole turn: its last knowledge search has words of both questions.
    detail = (await sync_to_async(owner.client.get)(f"/public/v1/calls/{call_id}")).json()
    query = words(detail["toolInvocationsLog"][-1]["request"]["query"])
    assert query & (words(GARAGE) - words(PARK)) and query & (words(PARK) - words(GARAGE)), detail
