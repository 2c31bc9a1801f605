"""End to end with VOICE_ENGINE=speech-to-speech: the project's ASGI application in the test's process
(testing/inprocess.py) whose voice engine is a scripted
speech-to-speech provider on loopback (testing/speech_to_speech_provider.py, in a thread), a browser socket,
a webhook tool on loopback, down to the call record and the agent log."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from calls.logging import flush_agent_logs
from calls.models import AgentLog
from realtime import tokens
from realtime.engine.tools import end_call
from testing.agents import DISCLOSURE, GREETING, ORDER_NUMBER, olive
from testing.clients import VoiceClient, is_type
from testing.inprocess import InProcessServer, serving
from testing.speech_to_speech_provider import CallTool, ProviderServer, Say, eventually
from testing.voice import rms
from testing.waiting import polled
from testing.webhooks import LoopbackReceiver, Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

MODEL = "gpt-realtime-e2e"
API_KEY = "sk-s2s-e2e-key-Wv3"
SHIPPED = "Order 3561 shipped yesterday and arrives on Friday."
LONG = (
    "Let me tell you everything about your order, from the moment it was packed in our warehouse to the "
    "moment it left with the courier this morning, and what happens next."
)


@pytest.fixture(scope="module")
def provider() -> Iterator[ProviderServer]:
    with ProviderServer(speech=True) as server:
        yield server


@pytest.fixture
def server(settings: Any, provider: ProviderServer) -> Iterator[InProcessServer]:
    values = {
        "OUTBOUND_ALLOWED_NETWORKS": ["127.0.0.0/8"],
        "VOICE_ENGINE": "speech-to-speech",
        "REALTIME_PROVIDER_URL": provider.url,
        "REALTIME_PROVIDER_MODEL": MODEL,
        "REALTIME_PROVIDER_API_KEY": API_KEY,
    }
    with serving(settings, values) as started:
        yield started


@pytest.fixture
def hook() -> Iterator[LoopbackReceiver]:
    with LoopbackReceiver(Reply(json={"message": SHIPPED})) as receiver:
        yield receiver


@pytest.fixture
def failing_hook() -> Iterator[LoopbackReceiver]:
    with LoopbackReceiver(Reply(status=500, json={"detail": "database down"})) as receiver:
        yield receiver


def socket_url(server: InProcessServer, agent: Any) -> str:
    token = tokens.issue_token(agent_id=agent.pk, organization_id=agent.organization_id)[0]
    return f"{server.ws_url}/ws/agents/{agent.pk}/realtime?token={token}"


def silence(ms: int) -> bytes:
    return b"\x00\x00" * (16 * ms)


def audio_seconds(client: VoiceClient, start: int) -> float:
    """Seconds of the agent's audio in the client's messages from `start` on."""
    rates = {m.message["sampleRate"] for m in client.messages[start:] if m.message.get("type") == "output_audio"}
    return len(client.audio(start)) / (2 * (rates.pop() if len(rates) == 1 else 24000))


async def logged(agent: Any, message: str, severity: str | None = None, timeout: float = 15.0) -> list[Any]:
    """The agent-log lines of `agent` once one starting with `message` is written (each look writes
    the lines buffered so far: the tests' settings run no log writer thread)."""
    seen: list[Any] = []

    async def found() -> list[Any] | None:
        await sync_to_async(flush_agent_logs)()
        rows = await sync_to_async(list)(AgentLog.objects.filter(agent_id=agent.pk).values_list("severity", "content"))
        seen[:] = rows
        if any(row[1].get("message", "").startswith(message) and severity in (None, row[0]) for row in rows):
            return rows
        return None

    try:
        return await polled(found, what=f"the log line {message!r}", timeout=timeout, every=0.2)
    except AssertionError:
        raise TimeoutError(f"no log line {message!r}: {[row[1].get('message') for row in seen]}") from None


async def test_a_conversation_through_the_speech_to_speech_provider(
    server, provider, owner, make_agent, realtime_settings, hook
):
    agent = await sync_to_async(olive)(owner, make_agent, hook)
    async with VoiceClient(socket_url(server, agent)) as client:
        first = await client.wait_for(is_type("session.started"), timeout=60)
        call_id = client.messages[first].message["callId"]
        done = asyncio.Event()
        mic = asyncio.create_task(client.stream(silence(60_000), stop_when=done.is_set))
        try:
            # The provider was configured by the service, then asked to say the opening word for word.
            connection = provider.last
            await eventually(lambda: connection.events("response.create"), what="the session configuration")
            session = connection.session
            assert connection.query == {"model": MODEL}
            assert connection.headers["authorization"] == f"Bearer {API_KEY}"
            assert DISCLOSURE in session["instructions"] and GREETING in session["instructions"]
            assert session["audio"]["output"]["voice"] == "cedar"  # rex
            assert session["tools"] == [
                {
                    "type": "function",
                    "name": "check_order_status",
                    "description": "Look up the delivery status of an order by its order number",
                    "parameters": ORDER_NUMBER,
                },
                {
                    "type": "function",
                    "name": "end_call",
                    "description": end_call.DESCRIPTION,
                    "parameters": end_call.PARAMETERS,
                },
            ]
            greeting = await client.wait_for(is_type("transcript", role="assistant"), timeout=30)
            assert client.messages[greeting].message["text"] == f"{DISCLOSURE} {GREETING}"
            greeting_audio = client.audio(0, greeting)
            assert rms(greeting_audio) > 300 and 1.5 < len(greeting_audio) / 48000 < 8
            # The caller's microphone reaches the provider at 24 kHz.
            await eventually(lambda: connection.appended_bytes > 48_000, what="caller audio at the provider")

            # A turn with a function call: the webhook tool answers, the result goes back, the answer is spoken.
            provider.script(Say(SHIPPED, speech=True))
            before = len(client.messages)
            call = CallTool("check_order_status", {"order_number": "3561"}, call_id="call_e2e_1")
            await provider.run(lambda: connection.caller_turn("What is the status of order 3561?", call))
            user = await client.wait_for(is_type("transcript", role="user"), after=before, timeout=30)
            assert client.messages[user].message["text"] == "What is the status of order 3561?"
            answer = await client.wait_for(is_type("transcript", role="assistant"), after=before, timeout=30)
            assert client.messages[answer].message["text"] == SHIPPED
            (request,) = hook.requests
            assert request.json()["message"]["toolCall"]["arguments"] == {"order_number": "3561"}
            (output,) = [event["item"] for event in connection.events("conversation.item.create")]
            assert (output["type"], output["call_id"]) == ("function_call_output", "call_e2e_1")
            assert json.loads(output["output"]) == {"message": SHIPPED}
            kinds = [m.message["type"] for m in client.messages[before:answer]]
            assert "tool.started" in kinds and "output_audio" in kinds

            # Barge-in: the caller speaks over a long answer still being generated.
            before = len(client.messages)
            long = Say(LONG, delta_ms=100, pace=0.05)
            await provider.run(lambda: connection.caller_turn("Tell me everything.", long))
            audio = await client.wait_for(is_type("output_audio"), after=before, timeout=30)
            # The caller hears about a second of it (a second of its audio has arrived).
            await client.wait_for(lambda _: audio_seconds(client, audio) >= 1.0, after=audio, timeout=30)
            await provider.run(connection.speech_started)
            clear = await client.wait_for(is_type("clear"), after=audio, timeout=10)
            cut = await client.wait_for(is_type("transcript", role="assistant"), after=before, timeout=10)
            assert cut > clear
            cut_text = client.messages[cut].message["text"]
            assert LONG.startswith(cut_text) and 0 < len(cut_text.split()) < len(LONG.split()) // 2
            await eventually(lambda: connection.events("conversation.item.truncate"), what="the truncation")
            truncate = connection.events("conversation.item.truncate")[-1]
            assert 600 <= truncate["audio_end_ms"] <= 1600
            assert connection.events("response.cancel")
        finally:
            done.set()
            await mic
        await client.send({"type": "stop"})
        assert await client.wait_closed() == 1000

    response = await sync_to_async(owner.client.get)(f"/public/v1/calls/{call_id}")
    assert response.status_code == 200
    detail = response.json()
    assert detail["status"] == "completed"
    assert [(m["role"], m["content"]) for m in detail["messages"]] == [
        ("assistant", f"{DISCLOSURE} {GREETING}"),
        ("user", "What is the status of order 3561?"),
        ("assistant", SHIPPED),
        ("user", "Tell me everything."),
        ("assistant", cut_text),
    ]
    (invocation,) = detail["toolInvocationsLog"]
    assert invocation["toolName"] == "check_order_status" and invocation["status"] == "success"
    usage = detail["llmUsage"]
    assert len(usage) == 4  # greeting, the call, the answer, the cut answer
    assert {(u["provider"], u["model"]) for u in usage} == {("realtime", MODEL)}
    assert sum(u["inputTokens"] for u in usage) == 120 + 100 + 120 + 120
    assert usage[0]["outputAudioSeconds"] > 1.5 and sum(u["inputAudioSeconds"] for u in usage) > 1.0
    # The provider's text and audio tokens apart (its usage's input/output_token_details), and in the ledger.
    for u in usage:
        assert u["product"] == "speech_to_speech"
        assert u["inputAudioTokens"] == u["inputTokens"] - u["inputTokens"] // 2
        assert u["outputAudioTokens"] == u["outputTokens"] - u["outputTokens"] // 4
    ledger = {line["unit"]: line["quantity"] for line in detail["costs"] if line["product"] == "speech_to_speech"}
    assert ledger == {
        "input_token": sum(u["inputTokens"] - u["inputAudioTokens"] for u in usage),
        "output_token": sum(u["outputTokens"] - u["outputAudioTokens"] for u in usage),
        "audio_input_token": sum(u["inputAudioTokens"] for u in usage),
        "audio_output_token": sum(u["outputAudioTokens"] for u in usage),
    }
    rows = await logged(agent, "session ended")
    messages = [content["message"] for _, content in rows]
    assert "barge-in" in messages and "provider answer truncated" in messages
    assert not any(API_KEY in str(content) for _, content in rows)


async def test_the_agent_s_words_and_a_failed_tool_reach_the_client_as_they_happen(
    server, provider, owner, make_agent, realtime_settings, failing_hook
):
    agent = await sync_to_async(olive)(owner, make_agent, failing_hook)
    sorry = "Sorry, I cannot look that order up right now. Please try again later."
    async with VoiceClient(socket_url(server, agent)) as client:
        await client.wait_for(is_type("session.started"), timeout=60)
        done = asyncio.Event()
        mic = asyncio.create_task(client.stream(silence(60_000), stop_when=done.is_set))
        try:
            greeting = await client.wait_for(is_type("transcript", role="assistant"), timeout=30)
            messages = [m.message for m in client.messages[: greeting + 1]]
            kinds = [m["type"] for m in messages]
            captions = [index for index, kind in enumerate(kinds) if kind == "agent_speech"]
            # The provider's transcript, sentence by sentence as each one's first word plays, before the
            # transcript of the whole turn and while its audio still arrives.
            assert [messages[index]["text"] for index in captions] == [DISCLOSURE, GREETING]
            ended = kinds.index("agent_speech.ended")
            assert messages[ended] == {"type": "agent_speech.ended", "interrupted": False} and ended == greeting - 1
            for start, end in zip(captions, [*captions[1:], ended], strict=True):
                assert len(client.audio(start, end)) / 48000 > 0.5, messages[start]

            # The tool fails (its server answers 500): the client learns why, then hears the apology.
            provider.script(Say(sorry, speech=True))
            connection = provider.last
            before = len(client.messages)
            call = CallTool("check_order_status", {"order_number": "3561"}, call_id="call_e2e_fail")
            await provider.run(lambda: connection.caller_turn("Where is order 3561?", call))
            finished = await client.wait_for(is_type("tool.finished"), after=before, timeout=30)
            assert client.messages[finished].message == {
                "type": "tool.finished",
                "name": "check_order_status",
                "status": "error",
                "error": "The tool answered HTTP 500",
            }
            answer = await client.wait_for(is_type("transcript", role="assistant"), after=finished, timeout=30)
            assert client.messages[answer].message["text"] == sorry
            spoken = [
                m.message["text"] for m in client.messages[finished:answer] if m.message["type"] == "agent_speech"
            ]
            assert spoken == ["Sorry, I cannot look that order up right now.", "Please try again later."]
        finally:
            done.set()
            await mic
        await client.send({"type": "stop"})
        assert await client.wait_closed() == 1000
    rows = await logged(agent, "tool call", "warn")
    (line,) = [content for _, content in rows if content.get("message") == "tool call"]
    assert line["reason"] == "The tool answered HTTP 500"  # the agent log says the same


async def test_a_provider_disconnect_ends_the_call_as_failed(
    server, provider, owner, make_agent, realtime_settings, hook
):
    agent = await sync_to_async(olive)(owner, make_agent, hook)
    async with VoiceClient(socket_url(server, agent)) as client:
        first = await client.wait_for(is_type("session.started"), timeout=60)
        call_id = client.messages[first].message["callId"]
        await client.send_audio(silence(200))
        await client.wait_for(is_type("transcript", role="assistant"), timeout=30)
        await provider.run(provider.last.hang_up)
        error = await client.wait_for(is_type("error"), timeout=10)
        assert client.messages[error].message == {
            "type": "error",
            "code": "engine_error",
            "message": "The conversation engine failed",
        }
        assert await client.wait_closed() == 4500
    response = await sync_to_async(owner.client.get)(f"/public/v1/calls/{call_id}")
    assert response.json()["status"] == "failed"
    assert response.json()["endedReason"] == "provider-error"
    await logged(agent, "engine error: ProviderError: The speech-to-speech provider closed the connection", "error")
