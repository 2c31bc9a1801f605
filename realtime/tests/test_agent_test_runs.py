"""Agent test runs through the API and the real runtime (issue 22, docs/agent-test-runs.md).

Runs are carried out inline (TEST_RUNS_INLINE) once the request's transaction commits, in the test's
process: each attempt is a real session (the agent's prompt, tools, knowledge, handoff; the configured
brain) with mocked tools and no call record."""

from __future__ import annotations

from typing import Any

import pytest

from calls.models import Call
from realtime.models import AgentTest
from testing.factories import AgentToolFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_db_threads")]

HANDOFF = "+15557654321"
ORDER_NUMBER = {
    "type": "object",
    "properties": {"order_number": {"type": "string", "description": "The order number"}},
    "required": ["order_number"],
}
CLINIC = """# Riverside Clinic

## Parking

Patients park for free in the car park behind the clinic, on Mill Street.

## Opening hours

The clinic is open from Monday to Friday, from eight in the morning to six in the evening.
"""


@pytest.fixture
def inline_runs(settings: Any) -> None:
    settings.TEST_RUNS_INLINE = True


@pytest.fixture
def olive(owner: Any, make_agent: Any) -> Any:
    """A webhook agent with one tool, knowledge and a handoff number."""
    agent = make_agent(
        owner.organization,
        name="Olive",
        status="active",
        identity="",
        instructions="You help callers with their orders and questions about the Riverside Clinic.",
        ai_identity_disclosure_template_id="named_agent",
        greeting_type="static",
        static_greeting="Thanks for calling.",
        agent_type="webhook",
        server_url="https://hooks.example.com/voice",
        server_secret="whsec-agent-tests",
        handoff_phone_number=HANDOFF,
    )
    AgentToolFactory(
        agent=agent,
        name="check_order_status",
        description="Look up the delivery status of an order by its order number",
        parameter_schema=ORDER_NUMBER,
    )
    upload = owner.client.post(f"/public/v1/agents/{agent.pk}/knowledge", {"content": CLINIC}, format="json")
    assert upload.status_code == 200, upload.content
    return agent


def make_test(agent: Any, name: str, **fields: Any) -> AgentTest:
    values = {"kind": "reply", "turns": [], "expect": {}, "tool_mocks": [], "tags": []}
    values.update(fields)
    return AgentTest.objects.create(organization=agent.organization, agent=agent, name=name, **values)


def run(owner: Any, agent: Any, **body: Any) -> dict[str, Any]:
    created = owner.client.post(f"/public/v1/agents/{agent.pk}/test-runs", body, format="json")
    assert created.status_code == 202, created.content
    assert created.json()["status"] == "queued"
    detail = owner.client.get(f"/public/v1/test-runs/{created.json()['id']}")
    assert detail.status_code == 200
    return detail.json()


def test_smoke(owner, olive, inline_runs):
    make_test(
        olive,
        "order status",
        turns=[{"user": "What is the status of order 3561?"}],
        tool_mocks=[{"tool": "check_order_status", "when": {"argumentsInclude": {"order_number": "3561"}}, "result": {"status": "shipped yesterday", "arrives": "Friday"}}],
        expect={"toolCalls": [{"name": "check_order_status", "argumentsInclude": {"order_number": "3561"}}]},
    )
    make_test(olive, "hours", turns=[{"user": "What are the opening hours of the clinic?"}], expect={"replyContains": ["Monday to Friday"]})
    make_test(olive, "person", turns=[{"user": "Can I talk to a real person please?"}], expect={"transferred": True})
    make_test(olive, "unmocked", turns=[{"user": "What is the status of order 3561?"}], expect={})
    result = run(owner, olive)
    import json
    print(json.dumps(result, indent=1))
    assert not Call.objects.exists()
    assert 0
