"""Agents more than one test module talks to, set up as rows (make_agent is the root conftest's)."""

from __future__ import annotations

from typing import Any

from testing.factories import AgentToolFactory
from testing.webhooks import LoopbackReceiver

# Olive: a webhook agent of the speech-to-speech tests, with a disclosure, a greeting and one tool.
DISCLOSURE = "Hi, I'm Olive, an AI agent."
GREETING = "Thanks for calling Acme orders."
ORDER_NUMBER = {
    "type": "object",
    "properties": {"order_number": {"type": "string", "description": "The order number"}},
    "required": ["order_number"],
}


def with_order_tool(agent: Any) -> Any:
    """`agent`, given Olive's one tool: check_order_status(order_number)."""
    AgentToolFactory(
        agent=agent,
        name="check_order_status",
        description="Look up the delivery status of an order by its order number",
        parameter_schema=ORDER_NUMBER,
    )
    return agent


def olive(owner: Any, make_agent: Any, hook: LoopbackReceiver) -> Any:
    agent = make_agent(
        owner.organization,
        name="Olive",
        status="active",
        identity="",
        instructions="You help callers with the status of their orders.",
        ai_identity_disclosure_template_id="named_agent",
        greeting_type="static",
        static_greeting=GREETING,
        voice_name="rex",
        agent_type="webhook",
        server_url=hook.url("/hooks/voice"),
        server_secret="whsec-s2s-e2e",
    )
    return with_order_tool(agent)


def olive_for_agent_tests(owner: Any, make_agent: Any) -> Any:
    """Olive as the agent tests know her: an active webhook agent with the same one tool, which the tests mock
    (her server is never reached)."""
    agent = make_agent(
        owner.organization,
        name="Olive",
        status="active",
        instructions="You help callers with their orders.",
        agent_type="webhook",
        server_url="https://hooks.example.com/agent",
    )
    return with_order_tool(agent)


AVA_GREETING = "Hello, this is Ava from Acme. How can I help you today?"


def ava_agent(owner: Any, make_agent: Any, *, instructions: str, **fields: Any) -> Any:
    """Ava, the reservation assistant of Acme: active, with a static greeting (AVA_GREETING); the voice
    tests' agent (`fields`: more of the agent's, such as recording_enabled)."""
    return make_agent(
        owner.organization,
        name="Ava",
        status="active",
        identity="Ava, the reservation assistant of Acme",
        instructions=instructions,
        greeting_type="static",
        static_greeting=AVA_GREETING,
        **fields,
    )
