"""The cost ledger end to end through the project's ASGI application in the test's process
(testing/inprocess.py), priced by a book set through PUT /public/v1/pricing (docs/costs.md).

- A typed conversation with the OpenAI-compatible brain (the scripted Chat Completions server, reporting
  usage with cached prompt tokens) and its post-call analysis: the call's `costs` carry one line per
  product, model and unit with the reported tokens, the book's unit prices and their amounts; a price
  change after the call leaves them as they were, and the next call is priced by the new book.
- A Twilio call (Twilio's side of the Media Stream played by a script): its seconds on the line, priced per
  minute, and the characters the embedded voice spoke.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from telephony import audio
from testing.calls import wait_call
from testing.chat_server import ChatServer, Text
from testing.clients import VoiceClient, is_type
from testing.conversations import agent_for, session_token, socket_url
from testing.inprocess import InProcessServer, serving
from testing.twilio_stream import phone_agent, phone_stream, quiet
from testing.waiting import polled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

MODEL = "scripted-model"
SILENCE = bytes([audio.SILENCE_BYTE]) * 8000 * 600  # the caller's line: ten minutes of silence at most
TTS_PRICE = {"product": "tts", "provider": "embedded", "unit": "character", "unitPrice": 0.00002}


def book(scale: int = 1) -> dict[str, Any]:
    """Prices per token of the scripted model (and its analysis), `scale` times the first book's."""
    return {
        "currency": "EUR",
        "items": [
            {"product": "llm", "provider": "openai", "model": MODEL, "unit": "input_token", "unitPrice": 0.002 * scale},
            {"product": "llm", "provider": "openai", "unit": "cached_input_token", "unitPrice": 0.001 * scale},
            {"product": "llm", "provider": "*", "unit": "output_token", "unitPrice": 0.008 * scale},
            {"product": "analysis", "provider": "openai", "unit": "input_token", "unitPrice": 0.0005 * scale},
            {"product": "analysis", "provider": "openai", "unit": "output_token", "unitPrice": 0.004 * scale},
            {"product": "telephony", "provider": "twilio", "unit": "minute", "unitPrice": 0.0085 * scale},
        ],
    }


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    with ChatServer() as scripted:
        yield scripted


@pytest.fixture
def server(settings: Any, chat: ChatServer) -> Iterator[InProcessServer]:
    values = {"LLM_PROVIDER": "openai", "LLM_BASE_URL": chat.base_url, "LLM_MODEL": MODEL, "LLM_API_KEY": "sk-x"}
    with serving(settings, values) as started:
        yield started


async def put_pricing(owner: Any, body: dict[str, Any]) -> dict[str, Any]:
    response = await sync_to_async(owner.client.put)("/public/v1/pricing", body, format="json")
    assert response.status_code == 200, response.content
    answer: dict[str, Any] = response.json()
    return answer


async def typed_call(
    server: InProcessServer, owner: Any, agent: Any, turns: list[str], variables: dict[str, str] | None = None
) -> str:
    """A typed session (with `variables`) saying `turns`, each answered, then stopped: its call id."""
    token = await session_token(owner, agent, {"modality": "text", **({"variables": variables} if variables else {})})
    async with VoiceClient(socket_url(server, agent, token)) as client:
        started = await client.wait_for(is_type("session.started"), timeout=60)
        call_id: str = client.messages[started].message["callId"]
        after = await client.wait_for(is_type("transcript", role="assistant"), after=started, timeout=30)
        for text in turns:
            await client.send_text(text)
            said = await client.wait_for(is_type("transcript", role="user"), after=after, timeout=30)
            after = await client.wait_for(is_type("transcript", role="assistant"), after=said, timeout=30)
        await client.send({"type": "stop"})
        assert await client.wait_closed() == 1000
    return call_id


async def analysed(owner: Any, call_id: str) -> dict[str, Any]:
    async def read() -> dict[str, Any] | None:
        response = await sync_to_async(owner.client.get)(f"/public/v1/calls/{call_id}")
        assert response.status_code == 200, response.content
        detail: dict[str, Any] = response.json()
        return detail if detail["analysis"] and detail["analysis"]["status"] != "pending" else None

    return await polled(read, what="the call analysed", timeout=30, every=0.1)


def lines(detail: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (c["product"], c["provider"], c["model"], c["unit"], c["quantity"], c["unitPrice"], c["amount"])
        for c in detail["costs"]
    ]


async def test_a_conversation_with_the_openai_brain_is_priced_by_the_tokens_it_reported_and_keeps_its_amounts(
    server, chat, owner, make_agent, realtime_settings
):
    agent = await sync_to_async(agent_for)(owner, make_agent, name="Lea", instructions="You take orders.")
    pricing = await put_pricing(owner, book())
    assert pricing["source"] == "organization" and pricing["currency"] == "EUR"

    # Two answers, the provider reporting (prompt, completion, cached prompt) tokens; then the analysis.
    chat.script(Text("Two pizzas, noted.", usage=(120, 30, 100)), Text("Ready at eight.", usage=(200, 40, 150)))
    chat.analysis(Text(json.dumps({"summary": "Two pizzas for eight."}), usage=(300, 20)))
    call_id = await typed_call(server, owner, agent, ["Two pizzas please.", "When are they ready?"])

    detail = await analysed(owner, call_id)
    assert lines(detail) == [
        ("llm", "openai", MODEL, "input_token", 70.0, 0.002, 0.14),  # 120 + 200 - 250 cached
        ("llm", "openai", MODEL, "cached_input_token", 250.0, 0.001, 0.25),
        ("llm", "openai", MODEL, "output_token", 70.0, 0.008, 0.56),
        ("analysis", "openai", MODEL, "input_token", 300.0, 0.0005, 0.15),
        ("analysis", "openai", MODEL, "output_token", 20.0, 0.004, 0.08),
    ]
    assert detail["cost"] == {"total": 1.18, "currency": "EUR"}
    usage = [(u["product"], u["inputTokens"], u["cachedInputTokens"], u["outputTokens"]) for u in detail["llmUsage"]]
    assert usage == [("llm", 120, 100, 30), ("llm", 200, 150, 40)]

    # The prices double: the call keeps the amounts of the book it started under ...
    await put_pricing(owner, book(scale=2))
    again = (await sync_to_async(owner.client.get)(f"/public/v1/calls/{call_id}")).json()
    assert (lines(again), again["cost"]) == (lines(detail), detail["cost"])
    # ... and the next call is priced by the new one.
    chat.script(Text("Noted.", usage=(50, 10)))
    chat.analysis(Text(json.dumps({"summary": "One pizza."}), usage=(100, 10)))
    second = await analysed(owner, await typed_call(server, owner, agent, ["One pizza."]))
    assert lines(second)[0] == ("llm", "openai", MODEL, "input_token", 50.0, 0.004, 0.2)
    assert second["cost"] == {"total": 0.54, "currency": "EUR"}  # 0.2 + 10 x 0.016 + 100 x 0.001 + 10 x 0.008


async def test_a_twilio_call_counts_its_seconds_on_the_line_and_the_characters_its_voice_spoke(
    server, owner, make_agent, realtime_settings
):
    agent = await sync_to_async(agent_for)(owner, make_agent, name="Kim", instructions="You answer the phone.")
    await sync_to_async(phone_agent)(owner, agent)
    await put_pricing(owner, {**book(), "items": [*book()["items"], TTS_PRICE]})
    call_sid = "CA" + "c0" * 16
    async with await phone_stream(server, agent, call_sid) as twilio:
        await twilio.start()
        line = asyncio.create_task(twilio.stream(SILENCE, stop_when=lambda: twilio.closed))
        await quiet(twilio)  # the greeting, heard whole
        await twilio.stop()
        line.cancel()
        await asyncio.gather(line, return_exceptions=True)
        assert await twilio.wait_closed() == 1000

    call = await wait_call(call_sid, status="completed")
    detail = (await sync_to_async(owner.client.get)(f"/public/v1/calls/{call.pk}")).json()
    minutes = detail["durationSeconds"] / 60
    spoken = sum(len(m["content"]) for m in detail["messages"] if m["role"] == "assistant")
    assert spoken > 0
    telephony, tts = detail["costs"]
    assert telephony == {
        "product": "telephony",
        "provider": "twilio",
        "model": "inbound",
        "quantity": pytest.approx(minutes, abs=1e-6),
        "unit": "minute",
        "unitPrice": 0.0085,
        "amount": pytest.approx(minutes * 0.0085, abs=1e-6),
    }
    assert tts == {
        "product": "tts",
        "provider": "embedded",
        "model": None,
        "quantity": float(spoken),
        "unit": "character",
        "unitPrice": 0.00002,
        "amount": pytest.approx(spoken * 0.00002, abs=1e-6),
    }
    assert detail["cost"]["total"] == pytest.approx(telephony["amount"] + tts["amount"], abs=1e-6)


async def test_costs_grouped_by_a_customer_variable_sum_each_customers_calls(
    server, chat, owner, make_agent, realtime_settings
):
    agent = await sync_to_async(agent_for)(owner, make_agent, name="Ola", instructions="You take orders.")
    await put_pricing(owner, book())
    chat.analysis_fallback = Text(json.dumps({"summary": "An order."}), usage=(0, 0))
    # Four calls of three customers, each answer reporting its own tokens (input 0.002, output 0.008 a token).
    calls = [("acme", (100, 10)), ("globex", (200, 20)), ("acme", (300, 30)), ("initech", (50, 5))]
    for customer, usage in calls:
        chat.script(Text("Noted.", usage=usage))
        await typed_call(server, owner, agent, ["An order, please."], {"customerId": customer})

    response = await sync_to_async(owner.client.get)("/public/v1/analytics/calls?groupBy=variable.customerId")
    assert response.status_code == 200, response.content
    answer = response.json()
    rows = {row["group"]: (row["calls"], row["cost"]) for row in answer["rows"]}
    assert rows == {
        "acme": (2, pytest.approx(400 * 0.002 + 40 * 0.008)),
        "globex": (1, pytest.approx(200 * 0.002 + 20 * 0.008)),
        "initech": (1, pytest.approx(50 * 0.002 + 5 * 0.008)),
    }
    assert (answer["currency"], answer["total"]["calls"]) == ("EUR", 4)
    assert answer["total"]["cost"] == pytest.approx(650 * 0.002 + 65 * 0.008)
