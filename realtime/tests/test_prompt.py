"""The dynamic prompt: the signed assistant request to a real loopback receiver, a good reply, and
every way it can fail (each a ProviderError in plain words)."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from kit.providers import ProviderError
from realtime.engine.prompt import AssistantPrompt, fetch_assistant_prompt
from realtime.engine.tools.base import ToolTimeout
from testing.webhooks import (
    LoopbackReceiver,
    Reply,
    allow_loopback_fixture,  # noqa: F401 - fixture
    receiver_fixture,  # noqa: F401 - fixture
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_db_threads")]

SECRET = "whsec-Pv3Lm8Qz1Rn6"


@pytest.fixture
def dynamic_agent(owner: Any, make_agent: Any, receiver: LoopbackReceiver) -> Any:
    return make_agent(
        owner.organization,
        name="Ava",
        status="active",
        agent_type="webhook",
        prompt_type="dynamic",
        server_url=receiver.url("/assistant"),
        server_headers={"X-Tenant": "acme"},
        server_secret=SECRET,
    )


async def fetch(agent: Any, **overrides: Any) -> AssistantPrompt:
    arguments: dict[str, Any] = {
        "agent": agent,
        "call_id": "9b2f4c1e-0000-4000-8000-000000000001",
        "channel": "phone",
        "from_number": "+14155550111",
        "to_number": "+14155550142",
        "variables": {"firstName": "Ada"},
    }
    arguments.update(overrides)
    return await fetch_assistant_prompt(**arguments)


async def test_the_assistant_request_is_a_signed_event_and_a_good_reply_is_the_prompt(
    dynamic_agent, receiver, allow_loopback
):
    receiver.reply(
        Reply(
            json={
                "identity": "You are Ava, the Acme concierge.",
                "instructions": "Help the caller track orders.",
                "greeting": "Hi, this is Ava from Acme.",
                "extra": "ignored",
            }
        )
    )

    prompt = await fetch(dynamic_agent)

    assert prompt == AssistantPrompt(
        identity="You are Ava, the Acme concierge.",
        instructions="Help the caller track orders.",
        greeting="Hi, this is Ava from Acme.",
    )
    [request] = receiver.requests
    assert (request.method, request.path) == ("POST", "/assistant")
    assert request.json() == {
        "message": {
            "type": "agent:assistant-request",
            "call": {
                "id": "9b2f4c1e-0000-4000-8000-000000000001",
                "agentId": str(dynamic_agent.pk),
                "channel": "phone",
                "from": "+14155550111",
                "to": "+14155550142",
                "variables": {"firstName": "Ada"},
            },
        }
    }
    assert request.headers["content-type"] == "application/json"
    assert request.headers["x-tenant"] == "acme"
    expected = hmac.new(SECRET.encode(), request.body, hashlib.sha256).hexdigest()
    assert request.headers["x-service-signature"] == f"sha256={expected}"


async def test_identity_and_greeting_are_optional(dynamic_agent, receiver, allow_loopback):
    dynamic_agent.server_secret = None
    await sync_to_async(dynamic_agent.save)()
    receiver.reply(Reply(json={"instructions": "Be brief.", "greeting": "  "}))

    prompt = await fetch(dynamic_agent, channel="web", from_number=None, to_number=None)

    assert prompt == AssistantPrompt(identity=None, instructions="Be brief.", greeting=None)
    [request] = receiver.requests
    assert request.json()["message"]["call"]["channel"] == "web"
    assert request.json()["message"]["call"]["from"] is None and request.json()["message"]["call"]["to"] is None
    assert "x-service-signature" not in request.headers


async def test_a_server_that_does_not_answer_in_time_is_a_timeout(dynamic_agent, receiver, allow_loopback):
    receiver.reply(Reply(hold=True))
    with pytest.raises(ToolTimeout) as raised:
        await fetch(dynamic_agent, timeout_s=0.3)
    assert isinstance(raised.value, ProviderError) and not raised.value.permanent
    assert raised.value.message == "Assistant request failed: serverUrl did not answer within 0.3 seconds"


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply(status=500, json={"instructions": "x"}), "Assistant request failed: serverUrl answered HTTP 500"),
        (Reply(status=401, body="no"), "Assistant request failed: serverUrl answered HTTP 401"),
        (
            Reply(body="instructions: be nice", content_type="text/plain"),
            "Assistant request failed: serverUrl's reply is not valid JSON",
        ),
        (Reply(status=204), "Assistant request failed: serverUrl answered with an empty body"),
        (Reply(json=["Be brief."]), "Assistant request failed: the reply must be a JSON object"),
        (
            Reply(json={"identity": "Ava"}),
            "Assistant request failed: the reply has no 'instructions' (a non-empty string)",
        ),
        (
            Reply(json={"instructions": 42}),
            "Assistant request failed: the reply has no 'instructions' (a non-empty string)",
        ),
        (
            Reply(json={"instructions": "Be brief.", "greeting": ["Hi"]}),
            "Assistant request failed: 'greeting' in the reply must be a string",
        ),
    ],
)
async def test_each_bad_reply_is_a_provider_error_in_plain_words(
    dynamic_agent, receiver, allow_loopback, reply, message
):
    receiver.reply(reply)
    with pytest.raises(ProviderError) as raised:
        await fetch(dynamic_agent)
    assert raised.value.message == message


async def test_a_refused_destination_is_a_provider_error(dynamic_agent, receiver):
    # No allow_loopback: the egress guard refuses 127.0.0.1.
    with pytest.raises(ProviderError) as raised:
        await fetch(dynamic_agent)
    assert raised.value.permanent
    assert raised.value.message.startswith("Assistant request failed: serverUrl may not be contacted: Refused")
    assert "loopback" in raised.value.message and "/assistant" not in raised.value.message
    assert receiver.requests == []


async def test_an_agent_without_server_url_cannot_fetch_a_prompt(owner, make_agent):
    agent = await sync_to_async(make_agent)(owner.organization, server_url=None)
    with pytest.raises(ProviderError, match="the agent has no serverUrl"):
        await fetch(agent)
