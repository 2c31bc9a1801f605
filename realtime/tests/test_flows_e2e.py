"""End to end through the project's ASGI application in the test's process (testing/inprocess.py): an agent
whose `flow` books a table (issue 39, docs/guides/flows.md).

The flow is saved through the public API and run by typed sessions over the browser socket with the
embedded brain, offline: a `say` step, a `collect` step (name, party size from 1 to 12, time) that asks
for what is missing and asks again on "a million people", a `tool` step that calls the agent's webhook
tool with the collected values, and a confirming `say`; the path taken and the values collected are in
the call's detail, the same in every run.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from testing.clients import VoiceClient, is_type
from testing.conversations import agent_for, session_token, socket_url
from testing.factories import AgentToolFactory
from testing.waiting import polled
from testing.webhooks import LoopbackReceiver, Reply, receivers_fixture  # noqa: F401 - the receivers fixture

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

BOOKING_FLOW: dict[str, Any] = {
    "start": "welcome",
    "nodes": {
        "welcome": {"type": "say", "text": "Welcome to Luigi's. I can book you a table.", "next": "details"},
        "details": {
            "type": "collect",
            "fields": [
                {"name": "name", "type": "string", "prompt": "What name should the booking be under?"},
                {"name": "party_size", "type": "number", "min": 1, "max": 12, "prompt": "For how many people?"},
                {"name": "time", "type": "time", "prompt": "At what time?"},
            ],
            "next": "book",
        },
        "book": {
            "type": "tool",
            "tool": "book_table",
            "arguments": {
                "name": "{{collected.name}}",
                "party_size": "{{collected.party_size}}",
                "time": "{{collected.time}}",
            },
            "next": "large",
            "onError": "sorry",
        },
        "large": {
            "type": "branch",
            "rules": [{"when": {"field": "party_size", "op": "gt", "value": 8}, "next": "big_table"}],
            "else": "confirm",
        },
        "big_table": {"type": "say", "text": "We will seat your group in the back room.", "next": "confirm"},
        "confirm": {
            "type": "say",
            "text": "Your table for {{collected.party_size}} at {{collected.time}} is booked under {{collected.name}}.",
            "next": "goodbye",
        },
        "goodbye": {"type": "end", "text": "Thank you, see you soon!"},
        "sorry": {"type": "end", "text": "Sorry, the booking did not go through. Please call us again."},
    },
}
BOOK_TABLE = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "party_size": {"type": "integer"},
        "time": {"type": "string"},
    },
    "required": ["name", "party_size", "time"],
}
# What the caller types, and what the agent answers each time.
SCRIPT = (
    (
        None,
        "Hi, I'm Luigi, an AI agent. Welcome to Luigi's. I can book you a table. What name should the booking be under?",
    ),
    ("My name is Anna Rossi.", "For how many people?"),
    ("A million people.", "Sorry, the party size must be between 1 and 12. For how many people?"),
    ("Four people please.", "At what time?"),
    (
        "At seven thirty in the evening.",
        "Your table for 4 at 19:30 is booked under Anna Rossi. Thank you, see you soon!",
    ),
)
PATH = ["welcome", "details", "book", "large", "confirm", "goodbye"]


def luigi(owner: Any, make_agent: Any, hook: LoopbackReceiver) -> Any:
    agent = agent_for(
        owner,
        make_agent,
        name="Luigi",
        instructions="You take table bookings for Luigi's restaurant.",
        agent_type="webhook",
        server_url=hook.url("/hooks/voice"),
        server_secret="whsec-flow-e2e-5Tq",
    )
    AgentToolFactory(agent=agent, name="book_table", description="Book a table", parameter_schema=BOOK_TABLE)
    current = owner.client.get(f"/public/v1/agents/{agent.pk}").json()
    response = owner.client.patch(
        f"/public/v1/agents/{agent.pk}",
        {"expectedUpdatedAt": current["updatedAt"], "flow": BOOKING_FLOW},
        format="json",
    )
    assert response.status_code == 200, response.content
    return agent


async def book(server: Any, owner: Any, agent: Any) -> tuple[str, list[str]]:
    """One typed booking call: its id and what the agent said, turn by turn."""
    token = await session_token(owner, agent, {"modality": "text"})
    said: list[str] = []
    async with VoiceClient(socket_url(server, agent, token)) as client:
        started = await client.wait_for(is_type("session.started"), timeout=60)
        call_id = client.messages[started].message["callId"]
        after = started
        for typed, _ in SCRIPT:
            if typed is not None:
                before = len(client.messages)
                await client.send_text(typed)
                after = await client.wait_for(is_type("transcript", role="user"), after=before, timeout=30)
            answer = await client.wait_for(is_type("transcript", role="assistant"), after=after, timeout=30)
            said.append(client.messages[answer].message["text"])
        assert await client.wait_closed() == 1000  # the end step ends the call
    return call_id, said


async def finished(owner: Any, call_id: str) -> dict[str, Any]:
    async def ended() -> dict[str, Any] | None:
        response = await sync_to_async(owner.client.get)(f"/public/v1/calls/{call_id}")
        assert response.status_code == 200, response.content
        detail: dict[str, Any] = response.json()
        return detail if detail["status"] != "active" else None

    return await polled(ended, what="the call's end", timeout=20, every=0.1)


async def test_a_flow_books_a_table_asking_again_on_a_bad_party_size_with_the_same_path_every_run(
    loopback_server, owner, make_agent, realtime_settings, receivers
):
    hook = receivers(Reply(json={"booked": True}))
    agent = await sync_to_async(luigi)(owner, make_agent, hook)

    runs = [await book(loopback_server, owner, agent) for _ in range(2)]

    for call_id, said in runs:
        assert said == [answer for _, answer in SCRIPT]
        detail = await finished(owner, call_id)
        assert (detail["status"], detail["endedReason"]) == ("completed", "agent-ended-call")
        assert detail["flow"] == {
            "path": PATH,
            "collected": {"name": "Anna Rossi", "party_size": 4, "time": "19:30"},
        }
        assert [(t["toolName"], t["status"]) for t in detail["toolInvocationsLog"]] == [
            ("book_table", "success"),
            ("flow_end", "success"),
        ]
    bookings = [request.json()["message"]["toolCall"]["arguments"] for request in hook.requests]
    assert bookings == [{"name": "Anna Rossi", "party_size": 4, "time": "19:30"}] * 2


async def test_a_failing_booking_tool_takes_the_flows_error_way(
    loopback_server, owner, make_agent, realtime_settings, receivers
):
    hook = receivers(Reply(status=500, json={"error": "no tables"}))
    agent = await sync_to_async(luigi)(owner, make_agent, hook)
    token = await session_token(owner, agent, {"modality": "text"})
    async with VoiceClient(socket_url(loopback_server, agent, token)) as client:
        started = await client.wait_for(is_type("session.started"), timeout=60)
        call_id = client.messages[started].message["callId"]
        await client.wait_for(is_type("transcript", role="assistant"), after=started, timeout=30)
        before = len(client.messages)
        await client.send_text("A table for ten under the name Marco at eight pm.")
        said = await client.wait_for(is_type("transcript", role="user"), after=before, timeout=30)
        answer = await client.wait_for(is_type("transcript", role="assistant"), after=said, timeout=30)
        assert client.messages[answer].message["text"] == BOOKING_FLOW["nodes"]["sorry"]["text"]
        assert await client.wait_closed() == 1000
    detail = await finished(owner, call_id)
    assert detail["flow"]["path"] == ["welcome", "details", "book", "sorry"]
    assert detail["flow"]["collected"] == {"name": "Marco", "party_size": 10, "time": "20:00"}


def test_agent_tests_expecting_the_flows_path_and_values_pass_and_fail_as_the_flow_runs(
    owner, make_agent, settings, receivers
):
    settings.BACKGROUND_WORK = "inline"  # the run is carried out once the request commits, in this process
    agent = luigi(owner, make_agent, receivers(Reply(json={"booked": True})))
    turns = [{"user": typed} for typed, _ in SCRIPT if typed is not None]
    mocks = [{"tool": "book_table", "result": {"booked": True}}]
    collected = {"name": "anna rossi", "party_size": 4, "time": "19:30"}
    for name, expect in (
        ("books as expected", {"flowPath": PATH, "collected": collected}),
        ("expects another party size", {"flowPath": PATH[:3], "collected": {**collected, "party_size": 6}}),
    ):
        body = {"name": name, "kind": "reply", "turns": turns, "toolMocks": mocks, "expect": expect}
        created = owner.client.post(f"/public/v1/agents/{agent.pk}/tests", body, format="json")
        assert created.status_code == 201, created.json()

    queued = owner.client.post(f"/public/v1/agents/{agent.pk}/test-runs", {}, format="json")
    assert queued.status_code == 202, queued.json()
    run = owner.client.get(f"/public/v1/test-runs/{queued.json()['id']}").json()

    assert (run["status"], run["passed"], run["failed"], run["errored"]) == ("completed", 1, 1, 0), run
    results = {result["name"]: result["attempts"][0] for result in run["results"]}
    passed, failed = results["books as expected"], results["expects another party size"]
    assert (passed["verdict"], passed["reasons"]) == ("pass", [])
    assert passed["flow"] == {"path": PATH, "collected": {"name": "Anna Rossi", "party_size": 4, "time": "19:30"}}
    assert failed["verdict"] == "fail"
    assert failed["reasons"] == [
        "flowPath: expected welcome → details → book, got welcome → details → book → large → confirm → goodbye",
        "collected: party_size: expected 6, got 4",
    ]
