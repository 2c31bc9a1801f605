"""End to end through the project's ASGI application in the test's process (testing/inprocess.py): clean input and the typed-input budget on the browser socket
(issue 34, items 2 and 8; docs/reference/realtime-protocol.md, "Typed input budget").

A string that cannot be stored (a lone surrogate, NUL) in any socket message is a `bad_message` naming
the field, the session goes on, and the call record has no trace of it (it was answered and then missing
from the record). A typed flood is refused past the socket's budget and the call's cap, the record stays
small and the call ends normally; a client that keeps flooding is closed. The server's rate is so slow
(REALTIME_TEXT_PER_SECOND) that its bucket refills nothing while a test runs: the budget is counted in
messages, whatever the machine's speed.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from testing.clients import VoiceClient, is_type
from testing.conversations import agent_for, session_token, socket_url
from testing.inprocess import InProcessServer, serving

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

BURST = 3
MAX_BYTES = 6000  # three turns of 2,000 characters
FLOOD_CLOSE = 20
LIMITS = {
    "REALTIME_TEXT_PER_SECOND": 0.0001,  # one more turn every 3 hours: nothing refills during a test
    "REALTIME_TEXT_BURST": BURST,
    "REALTIME_TEXT_MAX_BYTES_PER_CALL": MAX_BYTES,
    "REALTIME_TEXT_FLOOD_CLOSE": FLOOD_CLOSE,
}


@pytest.fixture
def server(settings: Any) -> Iterator[InProcessServer]:
    with serving(settings, LIMITS) as started:
        yield started


@pytest.fixture
def typed(owner: Any, make_agent: Any, realtime_settings: Any) -> Any:
    return agent_for(owner, make_agent, name="Tess", instructions="You answer questions about the Riverside Clinic.")


@contextlib.asynccontextmanager
async def text_session(owner: Any, agent: Any, server: InProcessServer) -> AsyncIterator[tuple[VoiceClient, str]]:
    """A typed session's socket, once the agent has greeted; and its call's id."""
    token = await session_token(owner, agent, {"modality": "text"})
    async with VoiceClient(socket_url(server, agent, token)) as client:
        started = await client.wait_for(is_type("session.started"), timeout=60)
        await client.wait_for(is_type("transcript", role="assistant"), after=started)  # the greeting
        yield client, client.messages[started].message["callId"]


async def errors(client: VoiceClient, after: int, count: int) -> list[dict[str, Any]]:
    """The next `count` error messages from message `after` on."""
    found: list[dict[str, Any]] = []
    while len(found) < count:
        index = await client.wait_for(is_type("error"), after=after)
        found.append(client.messages[index].message)
        after = index + 1
    return found


async def answered(client: VoiceClient, text: str) -> str:
    before = len(client.messages)
    await client.send_text(text)
    said = await client.wait_for(is_type("transcript", role="user", text=text), after=before, timeout=30)
    answer = await client.wait_for(is_type("transcript", role="assistant"), after=said, timeout=30)
    return str(client.messages[answer].message["text"])


async def call_detail(owner: Any, call_id: str) -> dict[str, Any]:
    response = await sync_to_async(owner.client.get)(f"/public/v1/calls/{call_id}")
    assert response.status_code == 200, response.content
    return dict(response.json())


async def test_a_surrogate_or_nul_in_a_message_is_a_bad_message_naming_the_field_and_leaves_no_trace(
    server, owner, typed
):
    async with text_session(owner, typed, server) as (client, call_id):
        before = len(client.messages)
        for raw in (
            '{"type": "input_text", "text": "book me \\ud800 in"}',
            '{"type": "input_text", "text": "nul \\u0000 here"}',
            '{"type": "input_audio", "audio": "AAAA\\udfff"}',
            '{"type": "stop", "reason": ["fine", "\\u0000"]}',
            '{"type": "input_text", "text": "a key", "\\ud83d": 1}',
        ):
            await client.send_raw(raw)
        refused = await errors(client, before, 5)
        assert [error["code"] for error in refused] == ["bad_message"] * 5
        named = [error["message"].split(":")[0] for error in refused]
        assert named == ["input_text.text", "input_text.text", "input_audio.audio", "stop.reason.1", "message"]
        assert "surrogate" in refused[0]["message"] and "NUL" in refused[1]["message"]

        # The session goes on: a good turn is answered, and the bad ones were never taken.
        assert await answered(client, "When are you open?")
        await client.send({"type": "stop"})
        assert await client.wait_closed() == 1000
    users = [item.message["text"] for item in client.messages if is_type("transcript", role="user")(item.message)]
    assert users == ["When are you open?"]

    detail = await call_detail(owner, call_id)
    assert (detail["status"], detail["endedReason"]) == ("completed", "caller-hung-up")
    assert [m["content"] for m in detail["messages"] if m["role"] == "user"] == ["When are you open?"]
    listed = await sync_to_async(owner.client.get)(f"/public/v1/calls?agentId={typed.pk}")
    assert listed.status_code == 200 and len(listed.json()) == 1


async def test_a_typed_flood_is_refused_past_the_budget_and_the_call_record_stays_small(server, owner, typed):
    async with text_session(owner, typed, server) as (client, call_id):
        before = len(client.messages)
        flood = 15  # fewer refusals than FLOOD_CLOSE: refused, not closed
        for number in range(flood):
            await client.send_text(f"message {number} " + "x" * 1000)
        refused = await errors(client, before, flood - BURST)
        assert {error["code"] for error in refused} == {"text_too_fast"}
        assert "0.0001 messages a second (bursts of 3)" in refused[0]["message"]
        # The call goes on and ends normally.
        await client.send({"type": "stop"})
        assert await client.wait_closed() == 1000

    detail = await call_detail(owner, call_id)
    assert (detail["status"], detail["endedReason"]) == ("completed", "caller-hung-up")
    typed_turns = [m["content"] for m in detail["messages"] if m["role"] == "user"]
    assert 1 <= len(typed_turns) <= BURST, typed_turns
    assert all(turn.startswith(("message 0 ", "message 1 ", "message 2 ")) for turn in typed_turns), typed_turns
    assert sum(len(m["content"]) for m in detail["messages"]) < (BURST + 2) * 1100


async def test_the_call_takes_so_many_bytes_of_typed_text_and_refuses_the_rest(server, owner, typed):
    async with text_session(owner, typed, server) as (client, call_id):
        before = len(client.messages)
        await client.send_text("a" * 2000)
        await client.send_text("b" * 2000)
        await client.send_text("c" * 2001)  # one turn is at most 2,000 characters
        await client.send_text("d" * 2000)  # 6,000 bytes: the call's cap, reached exactly
        await client.send_text("e")
        refused = await errors(client, before, 2)
        assert [error["code"] for error in refused] == ["bad_text", "text_limit"]
        assert "2000 characters" in refused[0]["message"]
        assert f"{MAX_BYTES} bytes of text per call" in refused[1]["message"]
        await client.send({"type": "stop"})
        assert await client.wait_closed() == 1000

    detail = await call_detail(owner, call_id)
    assert detail["status"] == "completed"
    assert sum(len(m["content"]) for m in detail["messages"] if m["role"] == "user") <= MAX_BYTES
    assert not any(m["content"].startswith(("c", "e")) for m in detail["messages"] if m["role"] == "user")


async def test_a_client_that_keeps_flooding_is_closed_and_its_call_ends(server, owner, typed):
    async with text_session(owner, typed, server) as (client, call_id):
        for number in range(BURST + FLOOD_CLOSE + 10):
            if client.closed:
                break
            with contextlib.suppress(ConnectionError):  # the server may close while the flood is sent
                await client.send_text(f"flood {number}")
        assert await client.wait_closed() == 4429
    codes = [item.message["code"] for item in client.messages if item.message["type"] == "error"]
    assert codes == ["text_too_fast"] * FLOOD_CLOSE + ["text_flood"]

    detail = await call_detail(owner, call_id)
    assert (detail["status"], detail["endedReason"]) == ("completed", "caller-hung-up")
    assert len([m for m in detail["messages"] if m["role"] == "user"]) <= BURST
