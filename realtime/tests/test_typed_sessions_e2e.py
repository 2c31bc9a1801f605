"""End to end through the project's ASGI application in the test's process (testing/inprocess.py): typed sessions (issue 22, docs/guides/typed-sessions.md).

A session opened through the public API with `"modality": "text"` and `"events": ["tool"]` is typed to
over the browser socket (`input_text`): the agent answers from its knowledge, calls its signed webhook
tool (the socket shows `tool.call` / `tool.result`), hands the caller to a person, and never sends
audio; its call record says `modality: text`. An audio session takes typed turns too, and a typed turn
cuts the agent's greeting like a barge-in. The embedded brain answers; the webhook is a real server on
loopback.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from realtime.engine.phrases import phrase
from testing.agents import with_order_tool
from testing.clients import VoiceClient, is_type
from testing.conversations import agent_for, session_token, socket_url
from testing.webhooks import LoopbackReceiver, Reply, receivers_fixture  # noqa: F401 - the receivers fixture

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

HANDOFF = "+15557654321"
SHIPPED = "Order 3561 shipped yesterday and arrives on Friday."
CLINIC = """# Riverside Clinic

## Parking

Patients park for free in the car park behind the clinic, on Mill Street.

## Opening hours

The clinic is open from Monday to Friday, from eight in the morning to six in the evening.
"""
HOURS = "open from Monday to Friday, from eight in the morning to six in the evening"


def clinic_desk(owner: Any, make_agent: Any, hook: LoopbackReceiver) -> Any:
    """An agent with a webhook tool, the clinic's page as knowledge and a handoff number."""
    agent = agent_for(
        owner,
        make_agent,
        name="Olive",
        instructions="You answer questions about the Riverside Clinic and the status of orders.",
        agent_type="webhook",
        server_url=hook.url("/hooks/voice"),
        server_secret="whsec-typed-7Qk2",
        handoff_phone_number=HANDOFF,
    )
    return with_order_tool(agent)


async def answer(client: VoiceClient, text: str) -> tuple[str, list[dict[str, Any]]]:
    """Type `text`; the agent's answer and the messages between the caller's transcript and it."""
    before = len(client.messages)
    await client.send_text(text)
    said = await client.wait_for(is_type("transcript", role="user"), after=before, timeout=30)
    assert client.messages[said].message["text"] == text
    answered = await client.wait_for(is_type("transcript", role="assistant"), after=said, timeout=30)
    between = [item.message for item in client.messages[said + 1 : answered]]
    return client.messages[answered].message["text"], between


async def test_a_text_session_answers_from_knowledge_calls_a_webhook_tool_with_tool_events_and_transfers(
    loopback_server, owner, make_agent, realtime_settings, receivers
):
    hook = receivers(Reply(json={"message": SHIPPED}))
    agent = await sync_to_async(clinic_desk)(owner, make_agent, hook)
    upload = await sync_to_async(owner.client.post)(
        f"/public/v1/agents/{agent.pk}/knowledge", {"content": CLINIC}, format="json"
    )
    assert upload.status_code == 200, upload.content
    token = await session_token(owner, agent, {"modality": "text", "events": ["tool"]})

    async with VoiceClient(socket_url(loopback_server, agent, token)) as client:
        started = await client.wait_for(is_type("session.started"), timeout=60)
        call_id = client.messages[started].message["callId"]
        greeting = await client.wait_for(is_type("transcript", role="assistant"), after=started)
        assert client.messages[greeting].message["text"] == "Hi, I'm Olive, an AI agent."

        # Audio is refused in a text session; a typed turn must be 1..2000 characters.
        before = len(client.messages)
        await client.send_audio(b"\x00\x00" * 320)
        await client.send_text("")
        await client.send_text("x" * 2001)
        errors = [await client.wait_for(is_type("error"), after=before)]
        errors.append(await client.wait_for(is_type("error"), after=errors[0] + 1))
        errors.append(await client.wait_for(is_type("error"), after=errors[1] + 1))
        assert [client.messages[i].message["code"] for i in errors] == ["bad_message", "bad_text", "bad_text"]
        assert "input_text" in client.messages[errors[0]].message["message"]
        assert "2000" in client.messages[errors[2]].message["message"]

        hours, between = await answer(client, "When is the clinic open?")
        assert HOURS in hours, hours
        knowledge_call = next(m for m in between if m["type"] == "tool.call")
        assert knowledge_call["name"] == "search_knowledge"
        assert knowledge_call["arguments"] == {"query": "When is the clinic open?"}

        shipped, between = await answer(client, "What is the status of order 3561?")
        assert shipped == SHIPPED
        tool_messages = [m for m in between if m["type"].startswith("tool.")]
        assert [m["type"] for m in tool_messages] == ["tool.started", "tool.call", "tool.finished", "tool.result"]
        call, result = tool_messages[1], tool_messages[3]
        assert call == {
            "type": "tool.call",
            "id": call["id"],
            "name": "check_order_status",
            "arguments": {"order_number": "3561"},
        }
        assert isinstance(call["id"], str) and call["id"]
        assert result == {
            "type": "tool.result",
            "id": call["id"],
            "name": "check_order_status",
            "result": {"message": SHIPPED},
            "durationMs": result["durationMs"],
            "status": "success",
        }
        assert isinstance(result["durationMs"], int) and 0 <= result["durationMs"] < 10_000

        handoff, _ = await answer(client, "Can I speak to a real person please?")
        assert handoff == phrase("transfer", "en-US")
        transfer = await client.wait_for(is_type("transfer"))
        assert client.messages[transfer].message == {"type": "transfer", "phoneNumber": HANDOFF}
        assert await client.wait_closed() == 1000

    kinds = {item.message["type"] for item in client.messages}
    assert not kinds & {"output_audio", "clear", "agent_speech"}, kinds
    (request,) = hook.requests
    assert request.json()["message"]["toolCall"]["arguments"] == {"order_number": "3561"}

    detail = await sync_to_async(owner.client.get)(f"/public/v1/calls/{call_id}")
    assert detail.status_code == 200, detail.content
    body = detail.json()
    assert (body["modality"], body["channel"]) == ("text", "web")
    assert (body["status"], body["endedReason"]) == ("completed", "transferred")
    assert [(t["toolName"], t["status"]) for t in body["toolInvocationsLog"]] == [
        ("search_knowledge", "success"),
        ("check_order_status", "success"),
        ("transfer_call", "success"),
    ]
    assert [(m["role"], m["content"]) for m in body["messages"]] == [
        ("assistant", "Hi, I'm Olive, an AI agent."),
        ("user", "When is the clinic open?"),
        ("assistant", hours),
        ("user", "What is the status of order 3561?"),
        ("assistant", SHIPPED),
        ("user", "Can I speak to a real person please?"),
        ("assistant", handoff),
        ("system", f"Call transferred to {HANDOFF}"),
    ]
    listed = await sync_to_async(owner.client.get)(f"/public/v1/calls?agentId={agent.pk}")
    assert [item["modality"] for item in listed.json()] == ["text"]


async def test_an_audio_session_takes_a_typed_turn_that_cuts_the_greeting_like_a_barge_in(
    loopback_server, owner, make_agent, realtime_settings
):
    long_greeting = (
        "Welcome to the Riverside Clinic. We are glad you called today. "
        "Our team can help you with appointments, parking and opening hours. "
        "Please tell me what brings you here."
    )
    agent = await sync_to_async(agent_for)(
        owner,
        make_agent,
        name="Remy",
        instructions="You help callers of the Riverside Clinic.",
        greeting_type="static",
        static_greeting=long_greeting,
    )
    token = await session_token(owner, agent)  # audio, the default; no tool events asked for
    async with VoiceClient(socket_url(loopback_server, agent, token)) as client:
        started = await client.wait_for(is_type("session.started"), timeout=60)
        call_id = client.messages[started].message["callId"]
        # Once the greeting's second sentence plays, the caller has heard its first one whole.
        first = await client.wait_for(is_type("agent_speech"), after=started)
        await client.wait_for(is_type("agent_speech"), after=first + 1)
        before = len(client.messages)
        await client.send_text("What can you do?")
        cleared = await client.wait_for(is_type("clear"), after=before)
        said = await client.wait_for(is_type("transcript", role="user", text="What can you do?"), after=before)
        answered = await client.wait_for(is_type("transcript", role="assistant"), after=said)
        assert cleared < answered
        assert client.messages[answered].message["text"]
        # The answer is spoken: its audio comes before its transcript.
        assert any(item.message["type"] == "output_audio" for item in client.messages[said:answered])
        await client.send({"type": "stop"})
        assert await client.wait_closed() == 1000

    kinds = [item.message["type"] for item in client.messages]
    assert "tool.call" not in kinds and "tool.result" not in kinds
    detail = (await sync_to_async(owner.client.get)(f"/public/v1/calls/{call_id}")).json()
    assert detail["modality"] == "audio"
    roles = [(m["role"], m["content"]) for m in detail["messages"]]
    # Only what was heard of the greeting is kept (cut short), then the typed turn and its answer.
    assert roles[1] == ("user", "What can you do?") and roles[0][0] == "assistant", roles
    assert roles[0][1].startswith("Hi, I'm Remy, an AI agent.") and long_greeting not in roles[0][1], roles
