"""Redaction end to end (an agent's redactPii, docs/guides/redaction.md), through the project's ASGI
application in the test's process (testing/inprocess.py).

A browser caller says an e-mail address, a phone number and a card number (the server hears them through
a scripted OpenAI-compatible recognizer, so the words are exactly those); the scripted Chat Completions
model calls a signed webhook tool with them and repeats them in its answer. The live conversation, the
model and the tool get the real values; what is stored (searched in a dump of every table) has
placeholders when redaction is on, and the real values when it is off. The call events go out as the
event worker sends them (`deliver_due`, run by the test: the tests' settings start no worker thread), and
the post-call analysis runs where the call ends (the tests' BACKGROUND_WORK=inline).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command

from agents.models import AgentTool
from calls.logging import flush_agent_logs
from calls.models import AgentLog
from calls.webhooks.events import deliver_due
from testing.audio_server import AudioServer, Transcript
from testing.chat_server import Call as ScriptedCall
from testing.chat_server import ChatServer, Text, Tools
from testing.conversations import Caller, Exchange, agent_for, conversation
from testing.inprocess import InProcessServer, serving
from testing.voice import record_voice
from testing.waiting import polled
from testing.webhooks import LoopbackReceiver, Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

SPOKEN = "Let me give you my details."  # what the caller's audio says (any speech: the recognizer is scripted)
HEARD = (
    "My email is john dot smith at example dot com, my phone number is 415 555 0100 "
    "and my card number is 4111 1111 1111 1111."
)
ARGUMENTS = {"email": "john.smith@example.com", "phone": "+1 415 555 0100", "card": "4111111111111111"}
TOOL_ANSWER = {"message": "Saved john.smith@example.com with card 4111 1111 1111 1111.", "phone": "(415) 555-0100"}
ANSWER = "Thanks! I saved john.smith@example.com and 415 555 0100 with your card 4111 1111 1111 1111."
# Every way the values appear above: none may be stored when redaction is on.
SECRETS = (
    "john.smith@example.com",
    "john dot smith at example dot com",
    "415 555 0100",
    "(415) 555-0100",
    "4111 1111 1111 1111",
    "4111111111111111",
)
CONTACT = {
    "type": "object",
    "properties": {
        "email": {"type": "string", "description": "The caller's e-mail address"},
        "phone": {"type": "string", "description": "The caller's phone number"},
        "card": {"type": "string", "description": "The caller's card number"},
    },
    "required": ["email", "phone", "card"],
}


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    with ChatServer() as scripted:
        yield scripted


@pytest.fixture(scope="module")
def recognizer() -> Iterator[AudioServer]:
    with AudioServer() as scripted:
        yield scripted


@pytest.fixture
def server(
    settings: Any, realtime_settings: Any, chat: ChatServer, recognizer: AudioServer
) -> Iterator[InProcessServer]:
    values = {
        "OUTBOUND_ALLOWED_NETWORKS": ["127.0.0.0/8"],
        "LLM_PROVIDER": "openai",
        "LLM_BASE_URL": chat.base_url,
        "LLM_MODEL": "scripted-model",
        "LLM_API_KEY": "sk-e2e-test-key",
        "ASR_PROVIDER": "openai",
        "ASR_BASE_URL": recognizer.base_url,
        "ASR_API_KEY": "sk-asr-test-key",
        "ASR_MODEL": "whisper-test",
    }
    with serving(settings, values) as started:
        yield started


@pytest.fixture(scope="module")
def voice(tmp_path_factory: Any) -> dict[str, bytes]:
    return record_voice((SPOKEN,), tmp_path_factory.mktemp("voice"))


@pytest.fixture
def hook() -> Iterator[LoopbackReceiver]:
    with LoopbackReceiver(Reply(json=TOOL_ANSWER)) as receiver:
        yield receiver


def contact_desk(owner: Any, make_agent: Any, hook: LoopbackReceiver, redact_pii: Any) -> Any:
    agent = agent_for(
        owner,
        make_agent,
        name="Dana",
        instructions="You take down the caller's contact details.",
        agent_type="webhook",
        server_url=hook.url("/hooks/voice"),
        server_secret="whsec-redaction-e2e",
        redact_pii=redact_pii,
    )
    AgentTool.objects.create(
        agent=agent, name="save_contact", description="Save the caller's contact details", parameter_schema=CONTACT
    )
    return agent


async def a_call(
    server: InProcessServer, chat: ChatServer, recognizer: AudioServer, agent: Any, voice: Any
) -> Exchange:
    recognizer.transcribe(Transcript(HEARD))
    chat.script(Tools(ScriptedCall("save_contact", ARGUMENTS, id="call_contact_1")), Text(ANSWER))

    async def talk(caller: Caller) -> Exchange:
        exchange = await caller.say(SPOKEN)
        await caller.hang_up()
        return exchange

    exchange: Exchange = await conversation(server, agent, voice, talk)
    # The log line written once the call is finished (each look writes the lines buffered so far, as the
    # server's writer thread does in batches).

    def ended() -> bool:
        flush_agent_logs()
        return AgentLog.objects.filter(agent=agent, content__message="session ended").exists()

    await polled(sync_to_async(ended), what="the call's end", timeout=20, every=0.1)
    return exchange


def of_type(hook: LoopbackReceiver, kind: str) -> list[Any]:
    return [request for request in hook.requests if request.json()["message"]["type"] == kind]


async def events_of(hook: LoopbackReceiver) -> list[bytes]:
    """The call events the agent's serverUrl received, once the last one (call.analyzed) is in. Each look
    sends what is due, as a round of the event worker does."""

    async def analyzed() -> list[Any]:
        await sync_to_async(deliver_due)()
        return of_type(hook, "call.analyzed")

    analyses: list[Any] = await polled(analyzed, what="call.analyzed", timeout=30, every=0.1)
    assert len(analyses) == 1, analyses
    return [request.body for request in hook.requests if request.json()["message"]["type"].startswith("call.")]


def database_dump() -> str:
    """Every row of every table, as `manage.py dumpdata` writes it."""
    out = io.StringIO()
    call_command("dumpdata", stdout=out)
    return out.getvalue()


async def call_detail(owner: Any, agent: Any) -> dict[str, Any]:
    listed = await sync_to_async(owner.client.get)(f"/public/v1/calls?agentId={agent.pk}")
    (item,) = listed.json()
    response = await sync_to_async(owner.client.get)(f"/public/v1/calls/{item['id']}")
    assert response.status_code == 200, response.content
    return response.json()


async def test_with_redaction_on_nothing_stored_holds_the_callers_email_phone_or_card(
    server, chat, recognizer, voice, hook, owner, make_agent, realtime_settings
):
    agent = await sync_to_async(contact_desk)(owner, make_agent, hook, ["email", "phone_number", "credit_card"])
    exchange = await a_call(server, chat, recognizer, agent, voice)

    # The live call, the model and the tool had the real values.
    assert exchange.heard == HEARD
    assert exchange.said == ANSWER
    (request,) = of_type(hook, "agent:tool-call")
    assert request.json()["message"]["toolCall"]["arguments"] == ARGUMENTS
    assert chat.requests[-2].messages[-1] == {"role": "user", "content": HEARD}

    dump = await sync_to_async(database_dump)()
    assert [secret for secret in SECRETS if secret in dump] == []
    # Nor any call event sent to the customer (started, ended with the transcript, analyzed).
    bodies = await events_of(hook)
    assert len(bodies) == 3
    assert [secret for secret in SECRETS if any(secret.encode() in body for body in bodies)] == []
    assert all(b"[EMAIL]" in body for body in bodies[1:])
    detail = await call_detail(owner, agent)
    transcript = [(m["role"], m["content"]) for m in detail["messages"]][1:]
    assert transcript == [
        ("user", "My email is [EMAIL], my phone number is [PHONE_NUMBER] and my card number is [CREDIT_CARD]."),
        ("assistant", "Thanks! I saved [EMAIL] and [PHONE_NUMBER] with your card [CREDIT_CARD]."),
    ]
    assert "[EMAIL]" in detail["summary"] and "[CREDIT_CARD]" in detail["summary"]
    (invocation,) = detail["toolInvocationsLog"]
    assert invocation["request"] == {"email": "[EMAIL]", "phone": "[PHONE_NUMBER]", "card": "[CREDIT_CARD]"}
    assert json.loads(invocation["response"]) == {
        "message": "Saved [EMAIL] with card [CREDIT_CARD].",
        "phone": "[PHONE_NUMBER]",
    }


async def test_with_redaction_off_the_values_are_stored_as_said(
    server, chat, recognizer, voice, hook, owner, make_agent, realtime_settings
):
    agent = await sync_to_async(contact_desk)(owner, make_agent, hook, "off")
    exchange = await a_call(server, chat, recognizer, agent, voice)
    assert exchange.heard == HEARD

    dump = await sync_to_async(database_dump)()
    assert [secret for secret in SECRETS if secret in dump] == list(SECRETS)
    bodies = await events_of(hook)
    assert all(b"john.smith@example.com" in body for body in bodies[1:])
    assert "[EMAIL]" not in dump and "[CREDIT_CARD]" not in dump
    detail = await call_detail(owner, agent)
    (invocation,) = detail["toolInvocationsLog"]
    assert invocation["request"] == ARGUMENTS
