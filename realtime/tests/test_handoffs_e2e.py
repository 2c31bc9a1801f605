"""End to end through the project's ASGI application in the test's process (testing/inprocess.py): a call
handed from one agent to another (issue 39, docs/guides/handoffs.md).

The reception agent's `handoffs` are set through the public API; a typed session over the browser socket
asks for what the billing agent does, the reception agent hands the call off (its announcement, then a
`handoff` message), and the billing agent answers from its own knowledge, in the same call record, whose
detail lists the handoff and who said what. With the OpenAI-compatible brain (a scripted server on
loopback), each target is a tool the model is offered, and `context: none` leaves the earlier turns out of
what the next agent's model receives.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from calls.logging import flush_agent_logs
from realtime.engine.phrases import phrase
from testing.chat_server import Call as ScriptedCall
from testing.chat_server import ChatServer, Text, Tools
from testing.clients import VoiceClient, is_type
from testing.conversations import Caller, agent_for, issue, session_token, socket_url
from testing.inprocess import InProcessServer, serving
from testing.voice import heard, pitch_hz, record_voice
from testing.waiting import polled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

BILLING_PAGE = """# Billing at Acme Energy

## Invoices

Invoices are sent by email on the first day of each month.

## Payment

Payment is due within fourteen days of the invoice date, by card or by bank transfer.
"""
BILL_QUESTION = "I have a question about my bill"
WHEN_DUE = "When is the payment due?"
# Heard by the offline recognizer as "can i twenty about a payment": "payment" names the payments agent.
PAYMENT_SPOKEN = "I have a question about a payment."


@pytest.fixture(scope="module")
def voice(tmp_path_factory: Any) -> dict[str, bytes]:
    return record_voice((PAYMENT_SPOKEN,), tmp_path_factory.mktemp("voice"))


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    with ChatServer() as scripted:
        yield scripted


@pytest.fixture
def openai_server(settings: Any, chat: ChatServer) -> Iterator[InProcessServer]:
    values = {"LLM_PROVIDER": "openai", "LLM_BASE_URL": chat.base_url, "LLM_MODEL": "scripted", "LLM_API_KEY": "sk-x"}
    with serving(settings, values) as started:
        yield started


def team(
    owner: Any, make_agent: Any, *, context: str = "all", voice: str = "ara", name: str = "Billing Desk"
) -> tuple[Any, Any]:
    """A reception agent (voice eve) whose one handoff, set through the API, is the billing agent (`voice`)."""
    billing = agent_for(
        owner,
        make_agent,
        name=name,
        instructions="You answer questions about invoices and payments of Acme Energy.",
        voice_name=voice,
    )
    reception = agent_for(
        owner,
        make_agent,
        name="Rita",
        instructions="You greet the callers of Acme Energy and pass them to the right colleague.",
        voice_name="eve",
    )
    response = owner.client.get(f"/public/v1/agents/{reception.pk}")
    entry = {"agentId": str(billing.pk), "description": "Questions about a bill, an invoice or a payment."}
    if context != "all":
        entry["context"] = context
    response = owner.client.patch(
        f"/public/v1/agents/{reception.pk}",
        {"expectedUpdatedAt": response.json()["updatedAt"], "handoffs": [entry]},
        format="json",
    )
    assert response.status_code == 200, response.content
    return reception, billing


async def typed(client: VoiceClient, text: str) -> int:
    """Type `text`; the index of the caller's transcript of it."""
    before = len(client.messages)
    await client.send_text(text)
    return await client.wait_for(is_type("transcript", role="user"), after=before, timeout=30)


async def agent_says(client: VoiceClient, after: int) -> tuple[int, str]:
    index = await client.wait_for(is_type("transcript", role="assistant"), after=after, timeout=30)
    return index, client.messages[index].message["text"]


async def call_detail(owner: Any, call_id: str) -> dict[str, Any]:
    async def handed() -> dict[str, Any] | None:
        response = await sync_to_async(owner.client.get)(f"/public/v1/calls/{call_id}")
        assert response.status_code == 200, response.content
        detail: dict[str, Any] = response.json()
        return detail if detail["status"] != "active" and detail["handoffs"] else None

    return await polled(handed, what="the call's handoff in its detail", timeout=20, every=0.1)


async def test_the_reception_agent_hands_a_bill_question_to_the_billing_agent_who_answers_from_its_knowledge(
    loopback_server, owner, make_agent, realtime_settings
):
    reception, billing = await sync_to_async(team)(owner, make_agent)
    upload = await sync_to_async(owner.client.post)(
        f"/public/v1/agents/{billing.pk}/knowledge", {"content": BILLING_PAGE}, format="json"
    )
    assert upload.status_code == 200, upload.content
    token = await session_token(owner, reception, {"modality": "text"})

    async with VoiceClient(socket_url(loopback_server, reception, token)) as client:
        started = await client.wait_for(is_type("session.started"), timeout=60)
        call_id = client.messages[started].message["callId"]
        _, greeting = await agent_says(client, started)
        assert greeting == "Hi, I'm Rita, an AI agent."

        said = await typed(client, BILL_QUESTION)
        announced, announcement = await agent_says(client, said)
        assert announcement == phrase("handoff", "en-US")
        handoff = await client.wait_for(is_type("handoff"), after=announced)
        assert client.messages[handoff].message == {
            "type": "handoff",
            "agentId": str(billing.pk),
            "agentName": "Billing Desk",
        }
        _, hello = await agent_says(client, handoff)
        # The billing agent's own short line; no second AI-identity disclosure.
        assert hello == phrase("taken_over", "en-US", name="Billing Desk")

        said = await typed(client, WHEN_DUE)
        _, due = await agent_says(client, said)
        assert "fourteen days" in due, due
        await client.send({"type": "stop"})
        assert await client.wait_closed() == 1000

    detail = await call_detail(owner, call_id)
    assert detail["agentId"] == str(reception.pk)  # one call, counted for the agent that answered it
    assert [(h["fromAgentId"], h["toAgentId"]) for h in detail["handoffs"]] == [(str(reception.pk), str(billing.pk))]
    spoken = [(m["role"], m["content"], m["agentId"]) for m in detail["messages"] if m["role"] != "system"]
    assert spoken == [
        ("assistant", greeting, str(reception.pk)),
        ("user", BILL_QUESTION, None),
        ("assistant", announcement, str(reception.pk)),
        ("assistant", hello, str(billing.pk)),
        ("user", WHEN_DUE, None),
        ("assistant", due, str(billing.pk)),
    ]
    assert [(t["toolName"], t["status"]) for t in detail["toolInvocationsLog"]] == [
        ("handoff_to_billing_desk", "success"),
        ("search_knowledge", "success"),
    ]
    await sync_to_async(flush_agent_logs)()  # the agent log as the writer thread would have written it by now
    logs = await sync_to_async(owner.client.get)(f"/public/v1/agents/{reception.pk}/logs?limit=100")
    assert logs.status_code == 200, logs.content
    (line,) = [entry["content"] for entry in logs.json()["logs"] if entry["content"]["message"] == "call handed off"]
    assert (line["toAgentId"], line["voiceName"]) == (str(billing.pk), "ara")


async def test_context_none_leaves_the_earlier_turns_out_of_what_the_next_agents_model_receives(
    openai_server, chat, owner, make_agent, realtime_settings
):
    reception, billing = await sync_to_async(team)(owner, make_agent, context="none")
    first = len(chat.requests)
    chat.script(
        Tools(ScriptedCall("handoff_to_billing_desk", {"reason": "a question about a bill"}, id="call_handoff_1")),
        Text("Payment is due within fourteen days."),
    )
    token = await session_token(owner, reception, {"modality": "text"})

    async with VoiceClient(socket_url(openai_server, reception, token)) as client:
        started = await client.wait_for(is_type("session.started"), timeout=60)
        call_id = client.messages[started].message["callId"]
        said = await typed(client, BILL_QUESTION)
        handoff = await client.wait_for(is_type("handoff"), after=said, timeout=30)
        await agent_says(client, handoff)
        said = await typed(client, WHEN_DUE)
        _, due = await agent_says(client, said)
        assert due == "Payment is due within fourteen days."
        await client.send({"type": "stop"})
        assert await client.wait_closed() == 1000

    asked_reception, asked_billing = chat.requests[first:]
    offered = {tool["function"]["name"]: tool["function"] for tool in asked_reception.tools}
    assert "Questions about a bill" in offered["handoff_to_billing_desk"]["description"]
    assert BILL_QUESTION in [m.get("content") for m in asked_reception.messages]
    contents = " ".join(str(m.get("content") or "") for m in asked_billing.messages)
    assert "invoices and payments" in contents  # the billing agent's own prompt
    assert "pass them to the right colleague" not in contents
    assert BILL_QUESTION not in contents  # context none: the earlier turns stay behind
    assert not any(m.get("tool_calls") for m in asked_billing.messages)
    assert [m["content"] for m in asked_billing.messages if m["role"] == "user"] == [WHEN_DUE]
    assert "handoff_to_billing_desk" not in {tool["function"]["name"] for tool in asked_billing.tools}

    detail = await call_detail(owner, call_id)
    (record,) = detail["handoffs"]
    assert (record["fromAgentId"], record["toAgentId"], record["reason"]) == (
        str(reception.pk),
        str(billing.pk),
        "a question about a bill",
    )


async def test_a_handoff_mid_call_changes_the_voice_without_a_long_gap(
    loopback_server, voice, owner, make_agent, realtime_settings
):
    reception, _ = await sync_to_async(team)(owner, make_agent, voice="rex", name="Payments")
    async with VoiceClient(socket_url(loopback_server, reception, issue(reception))) as client:
        caller = await Caller(client, voice).answered()
        exchange = await caller.say(PAYMENT_SPOKEN)
        assert exchange.said == phrase("handoff", "en-US"), exchange
        said = await client.wait_for(is_type("transcript", role="user"))
        handoff = await client.wait_for(is_type("handoff"), after=said, timeout=30)
        hello = await client.wait_for(is_type("transcript", role="assistant"), after=handoff, timeout=30)
        await caller.hang_up()

    def chunks(start: int, end: int) -> list[tuple[float, bytes]]:
        return [
            (item.at, base64.b64decode(item.message["audio"]))
            for item in client.messages[start:end]
            if item.message["type"] == "output_audio"
        ]

    announcement, next_agent = chunks(said, handoff), chunks(handoff, hello)
    # eve is a woman's voice, rex a man's: the billing agent's line is spoken a good deal lower.
    eve = pitch_hz(b"".join(pcm for _, pcm in announcement))
    rex = pitch_hz(b"".join(pcm for _, pcm in next_agent))
    assert eve > rex * 1.25, (eve, rex)
    # What the caller hears: the announcement's last word, then the new voice within 1.5 s.
    stretches = heard(announcement + next_agent)
    last_announced = max(end for start, end in stretches if start < next_agent[0][0])
    first_new = min(start for start, end in stretches if start >= last_announced)
    assert 0 < first_new - last_announced <= 1.5, (last_announced, first_new)
