"""Keypad and phone menus end to end through the project's ASGI application in the test's process
(testing/inprocess.py): Twilio's side of the Media Stream
played by a script (testing/twilio_stream.py), the OpenAI-compatible brain answered by the scripted Chat
Completions server (testing/chat_server.py), and the call as GET /public/v1/calls/{id} returns it.

- send_digits: the agent's keys go out in-band as keypad tones in the stream's `media`, read back here
  with a Goertzel decoder (testing/dtmf.py); bad digits are an error result and nothing is played; the tool
  is offered on phone calls only.
- caller keys: gathered per the agent's keypad into one caller turn ("the caller entered 4 5 6 7"), ended
  early by the terminator, or one turn per key when the keypad is off.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from calls.logging import flush_agent_logs
from calls.models import AgentLog
from telephony import audio
from testing.calls import wait_call
from testing.chat_server import Call as ScriptedCall
from testing.chat_server import ChatServer, Text, Tools
from testing.clients import VoiceClient, is_type
from testing.conversations import agent_for, issue, socket_url
from testing.dtmf import dtmf_decode
from testing.inprocess import InProcessServer, serving
from testing.twilio_stream import TwilioStream, phone_agent, phone_stream, quiet
from testing.waiting import polled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

INSTRUCTIONS = "You call the pharmacy's phone menu for the caller. When the menu asks for keys, use send_digits."
REPLY = "Thank you."


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    with ChatServer(fallback=Text(REPLY)) as scripted:
        yield scripted


@pytest.fixture
def server(settings: Any, chat: ChatServer) -> Iterator[InProcessServer]:
    values = {
        "LLM_PROVIDER": "openai",
        "LLM_BASE_URL": chat.base_url,
        "LLM_MODEL": "scripted-model",
        "LLM_API_KEY": "x",
    }
    with serving(settings, values) as started:
        yield started


def keypad_agent(owner: Any, make_agent: Any, **fields: Any) -> Any:
    return phone_agent(owner, agent_for(owner, make_agent, name="Kim", instructions=INSTRUCTIONS, **fields))


class Line:
    """The phone line's caller audio: silence, 20 ms at a time, until the call ends."""

    def __init__(self, twilio: TwilioStream, seconds: float = 600) -> None:
        self.twilio = twilio
        silence = bytes([audio.SILENCE_BYTE]) * int(8000 * seconds)
        self.task = asyncio.create_task(twilio.stream(silence, stop_when=lambda: twilio.closed))

    async def close(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


async def requests_after(chat: ChatServer, first: int, count: int, timeout: float = 30) -> list[Any]:
    await chat.until(lambda: len(chat.requests) >= first + count, what=f"{count} model requests", timeout=timeout)
    return chat.requests[first:]


def decoded(twilio: TwilioStream, start: int = 0) -> str:
    """The keys in the agent's audio of messages[start:], read back from the mu-law."""
    return dtmf_decode(audio.ulaw_decode(twilio.audio(start)).tobytes())


async def detail(owner: Any, call_sid: str) -> dict[str, Any]:
    call = await wait_call(call_sid, status="completed")
    response = await sync_to_async(owner.client.get)(f"/public/v1/calls/{call.pk}")
    assert response.status_code == 200, response.content
    result: dict[str, Any] = response.json()
    return result


def tool_result(request: Any) -> dict[str, Any]:
    """The tool result the model was sent back in `request`."""
    (message,) = [m for m in request.messages if m["role"] == "tool"]
    result: dict[str, Any] = json.loads(message["content"])
    return result


async def session_tools(agent: Any) -> list[str]:
    """The tools the session offered, from its "session started" agent-log line (each look writes the
    lines buffered so far)."""

    def read() -> list[AgentLog]:
        flush_agent_logs()
        return list(AgentLog.objects.filter(agent=agent, content__message="session started"))

    entries = await polled(sync_to_async(read), what="the session started line", timeout=10)
    tools: list[str] = entries[0].content["tools"]
    return tools


# --- send_digits -----------------------------------------------------------------------------------


async def test_send_digits_plays_the_keys_as_tones_a_phone_menu_can_read(
    server, chat, owner, make_agent, realtime_settings
):
    agent = await sync_to_async(keypad_agent)(owner, make_agent)
    call_sid = "CA" + "d1" * 16
    first = len(chat.requests)
    chat.script(Tools(ScriptedCall("send_digits", {"digits": "12#"}, id="call_keys_1")), Text("I pressed them."))
    async with await phone_stream(server, agent, call_sid) as twilio:
        await twilio.start()
        line = Line(twilio)
        greeted = await quiet(twilio)
        assert decoded(twilio) == ""  # the disclosure: speech, no key
        # The menu's prompt reaches the agent as a caller turn (a key, gathered for 2 s).
        await twilio.dtmf("9")
        asked, answered = await requests_after(chat, first, 2)
        await quiet(twilio, after=greeted)
        await twilio.stop()
        await line.close()
        assert await twilio.wait_closed() == 1000

    assert "send_digits" in [tool["function"]["name"] for tool in asked.tools]
    assert asked.messages[-1] == {"role": "user", "content": "the caller entered 9"}
    assert tool_result(answered) == {"status": "sent", "digits": "12#"}
    # The tones went out in-band, as mu-law media, in order; the agent's words after them are no key.
    assert decoded(twilio, greeted) == "12#"
    call = await detail(owner, call_sid)
    (invocation,) = call["toolInvocationsLog"]
    assert (invocation["toolName"], invocation["status"]) == ("send_digits", "success")
    assert json.loads(invocation["response"]) == {"status": "sent", "digits": "12#"}
    assert ("assistant", "I pressed them.") in [(m["role"], m["content"]) for m in call["messages"]]


async def test_bad_digits_are_an_error_result_and_nothing_is_played(server, chat, owner, make_agent, realtime_settings):
    agent = await sync_to_async(keypad_agent)(owner, make_agent)
    call_sid = "CA" + "d2" * 16
    first = len(chat.requests)
    chat.script(Tools(ScriptedCall("send_digits", {"digits": "1a2x"}, id="call_keys_2")), Text("Sorry."))
    async with await phone_stream(server, agent, call_sid) as twilio:
        await twilio.start()
        line = Line(twilio)
        greeted = await quiet(twilio)
        await twilio.dtmf("9")
        _, answered = await requests_after(chat, first, 2)
        await quiet(twilio, after=greeted)
        await twilio.stop()
        await line.close()
        await twilio.wait_closed()

    error = tool_result(answered)["error"]
    assert "'a', 'x'" in error and "Nothing was sent" in error
    assert decoded(twilio) == ""
    call = await detail(owner, call_sid)
    (invocation,) = call["toolInvocationsLog"]
    assert (invocation["toolName"], invocation["status"]) == ("send_digits", "error")


async def test_send_digits_is_offered_on_phone_calls_only(server, owner, make_agent, realtime_settings):
    agent = await sync_to_async(agent_for)(owner, make_agent, name="Web", instructions=INSTRUCTIONS)
    async with VoiceClient(socket_url(server, agent, issue(agent))) as client:
        await client.wait_for(is_type("session.started"), timeout=60)
        tools = await session_tools(agent)
    assert "send_digits" not in tools and "end_call" in tools


# --- caller keys -------------------------------------------------------------------------------------


async def keys_call(server: InProcessServer, agent: Any, call_sid: str, presses: list[tuple[str, float]]) -> None:
    """A phone call in which the caller presses keys (each after its pause in seconds), then waits for
    the agent's answers and hangs up."""
    async with await phone_stream(server, agent, call_sid) as twilio:
        await twilio.start()
        line = Line(twilio)
        greeted = await quiet(twilio)
        await twilio.press(presses)
        await quiet(twilio, after=greeted)  # the answer, once the keypad's timeout has ended the turn
        await twilio.stop()
        await line.close()
        await twilio.wait_closed()


async def caller_turns(owner: Any, call_sid: str) -> list[str]:
    call = await detail(owner, call_sid)
    return [m["content"] for m in call["messages"] if m["role"] == "user"]


async def keys_logged(agent: Any, count: int) -> list[str]:
    """The keys in the agent log (each look writes the lines buffered so far: the tests' settings run no
    log writer thread)."""

    def read() -> list[str]:
        flush_agent_logs()
        entries = AgentLog.objects.filter(agent=agent, content__message="caller pressed a key")
        return [entry.content["digit"] for entry in entries.order_by("timestamp", "sequence")]

    async def enough() -> list[str] | None:
        keys = await sync_to_async(read)()
        return keys if len(keys) >= count else None

    return await polled(enough, what=f"{count} keys in the agent log", timeout=10)


async def test_consecutive_keys_are_one_caller_turn(server, owner, make_agent, realtime_settings):
    agent = await sync_to_async(keypad_agent)(owner, make_agent)
    call_sid = "CA" + "e1" * 16
    await keys_call(server, agent, call_sid, [("4", 0), ("5", 0.3), ("6", 0.3), ("7", 1.0)])
    assert await caller_turns(owner, call_sid) == ["the caller entered 4 5 6 7"]
    assert await keys_logged(agent, 4) == ["4", "5", "6", "7"]


async def test_the_terminator_ends_the_turn_early(server, chat, owner, make_agent, realtime_settings):
    agent = await sync_to_async(keypad_agent)(
        owner, make_agent, keypad={"enabled": True, "timeoutMs": 10000, "terminator": "#"}
    )
    call_sid = "CA" + "e2" * 16
    first = len(chat.requests)
    started = time.monotonic()
    async with await phone_stream(server, agent, call_sid) as twilio:
        await twilio.start()
        line = Line(twilio)
        greeted = await quiet(twilio)
        await twilio.press([("1", 0), ("2", 0.2), ("3", 0.2), ("#", 0.2)])
        pressed = time.monotonic()
        (asked,) = await requests_after(chat, first, 1)
        answered_in = time.monotonic() - pressed
        await quiet(twilio, after=greeted)
        await twilio.stop()
        await line.close()
        await twilio.wait_closed()
    assert asked.messages[-1] == {"role": "user", "content": "the caller entered 1 2 3"}
    assert answered_in < 5, f"the turn waited {answered_in:.1f}s (timeoutMs is 10 s)"
    assert time.monotonic() - started < 60
    assert await caller_turns(owner, call_sid) == ["the caller entered 1 2 3"]


async def test_a_disabled_keypad_makes_each_key_a_turn(server, owner, make_agent, realtime_settings):
    agent = await sync_to_async(keypad_agent)(
        owner, make_agent, keypad={"enabled": False, "timeoutMs": 2000, "terminator": "#"}
    )
    call_sid = "CA" + "e3" * 16
    await keys_call(server, agent, call_sid, [("4", 0), ("5", 2.0)])
    assert await caller_turns(owner, call_sid) == ["the caller pressed 4", "the caller pressed 5"]
