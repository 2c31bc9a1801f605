"""Agent tests' flow expectations (issue 39): `expect.flowPath` and `expect.collected` checked when a test is
saved (400 naming the place), kept through the dashboard's structured form, and failing with a clear reason
on an agent without a flow.

Their pass and fail on an agent whose flow runs are proven end to end once the flow runtime exists (the
runner reads `Session.flow`: realtime/agent_tests/runner.py); the evaluation has no unit tests of its own,
as the runner's other checks have none."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from agents.models import Agent
from realtime.models import AgentTest
from testing.agents import olive_for_agent_tests
from testing.dashboard import PageForm

REPLY = {"name": "Books a table", "kind": "reply", "turns": [{"user": "A table for four at half past seven"}]}
FLOW_EXPECT = {
    "flowPath": ["greet", "ask_details", "book", "confirm"],
    "collected": {"name": "Ann", "party_size": 4, "time": "19:30", "vip": False, "code": "4"},
}


@pytest.fixture
def olive(owner: Any, make_agent: Any) -> Agent:
    return olive_for_agent_tests(owner, make_agent)


def create(owner: Any, agent: Agent, body: dict[str, Any]) -> Any:
    return owner.client.post(f"/public/v1/agents/{agent.pk}/tests", body, format="json")


def refusal(response: Any, field: str) -> str:
    assert response.status_code == 400, response.json()
    body = response.json()
    assert field in body["issues"], body
    [message] = body["issues"][field]
    assert body["error"] == f"Invalid {field}: {message}"
    return message


# --- saved through the API -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_flow_expectations_are_stored_as_given(owner: Any, olive: Agent) -> None:
    created = create(owner, olive, {**REPLY, "expect": {**FLOW_EXPECT, "replyContains": ["booked"]}})
    assert created.status_code == 201, created.json()
    assert created.json()["expect"] == {**FLOW_EXPECT, "replyContains": ["booked"]}

    test_id = created.json()["id"]
    read = owner.client.get(f"/public/v1/agents/{olive.pk}/tests/{test_id}")
    assert read.json()["expect"]["flowPath"] == FLOW_EXPECT["flowPath"]
    changed = owner.client.patch(
        f"/public/v1/agents/{olive.pk}/tests/{test_id}",
        {"expect": {"collected": {"party_size": 2.5}}},
        format="json",
    )
    assert changed.status_code == 200, changed.json()
    assert changed.json()["expect"] == {"collected": {"party_size": 2.5}}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("expect", "field", "says"),
    [
        ({"flowPath": "greet"}, "expect.flowPath", "Must be an array"),
        ({"flowPath": None}, "expect.flowPath", "Must be an array"),
        ({"flowPath": []}, "expect.flowPath", "at least one node id"),
        ({"flowPath": ["greet"] * 201}, "expect.flowPath", "At most 200"),
        ({"flowPath": ["greet", ""]}, "expect.flowPath.1", "blank"),
        ({"flowPath": ["greet", 3]}, "expect.flowPath.1", "Must be a string"),
        ({"flowPath": ["x" * 65]}, "expect.flowPath.0", "At most 64"),
        ({"collected": ["name", "Ann"]}, "expect.collected", "Must be an object"),
        ({"collected": "Ann"}, "expect.collected", "Must be an object"),
        ({"collected": {f"f{n}": n for n in range(51)}}, "expect.collected", "At most 50 values"),
        ({"collected": {" ": "Ann"}}, "expect.collected", "A name must be 1 to 64"),
        ({"collected": {"n" * 65: "Ann"}}, "expect.collected", "A name must be 1 to 64"),
        ({"collected": {"name": None}}, "expect.collected.name", "a string, a number or true or false"),
        ({"collected": {"name": ["Ann"]}}, "expect.collected.name", "a string, a number or true or false"),
        ({"collected": {"name": {"first": "Ann"}}}, "expect.collected.name", "a string, a number or true or false"),
        ({"collected": {"name": "  "}}, "expect.collected.name", "blank"),
        ({"collected": {"name": "x" * 501}}, "expect.collected.name", "At most 500"),
        ({"collected": {"name": "a\u0000b"}}, "expect.collected.name", "NUL"),
    ],
)
def test_a_wrong_flow_expectation_is_a_400_naming_its_place(
    owner: Any, olive: Agent, expect: dict[str, Any], field: str, says: str
) -> None:
    message = refusal(create(owner, olive, {**REPLY, "expect": expect}), field)
    assert says in message
    assert not AgentTest.objects.exists()


@pytest.mark.django_db
def test_the_unknown_key_message_lists_the_flow_expectations(owner: Any, olive: Agent) -> None:
    message = refusal(create(owner, olive, {**REPLY, "expect": {"path": ["greet"]}}), "expect")
    assert message == (
        "Unknown key 'path'; the keys are toolCalls, noToolCalls, replyContains, replyMatches, transferred, ended, "
        "flowPath, collected, criteria."
    )


# --- the dashboard's form --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_structured_form_shows_and_keeps_the_flow_expectations(admin_client: Client, olive: Agent) -> None:
    def form_of(url: str) -> dict[str, Any]:
        parser = PageForm("agenttest_form")
        parser.feed(admin_client.get(url).content.decode())
        return parser.data

    json_form = {
        "agent": str(olive.pk),
        "name": REPLY["name"],
        "kind": REPLY["kind"],
        "agent_test_editor": "json",
        "turns": json.dumps(REPLY["turns"]),
        "caller": "",
        "variables": "",
        "tool_mocks": "",
        "expect": json.dumps(FLOW_EXPECT),
        "tags": "",
    }
    response = admin_client.post("/admin/realtime/agenttest/add/", json_form)
    assert response.status_code == 302, response.content.decode()
    test = AgentTest.objects.get()
    assert test.expect == FLOW_EXPECT
    url = f"/admin/realtime/agenttest/{test.pk}/change/"

    shown = form_of(url)
    assert shown["agent_test_editor"] == "form"
    assert shown["expect_flow_path"].split() == FLOW_EXPECT["flowPath"]
    cells = {shown[f"expect_collected-{row}-name"]: shown[f"expect_collected-{row}-value"] for row in range(5)}
    # The text "4" is quoted so that it is read back as text, not as the number 4.
    assert cells == {"name": "Ann", "party_size": "4", "time": "19:30", "vip": "false", "code": '"4"'}
    response = admin_client.post(url, shown)  # the structured form, as shown
    assert response.status_code == 302, response.content.decode()
    test.refresh_from_db()
    assert test.expect == FLOW_EXPECT

    # Edited with the form: a node added, a value changed; a blank name is the API's refusal on the field.
    shown["expect_flow_path"] += "\ngoodbye"
    [row] = [row for row in range(5) if shown[f"expect_collected-{row}-name"] == "party_size"]
    shown[f"expect_collected-{row}-value"] = "6"
    response = admin_client.post(url, shown)
    assert response.status_code == 302, response.content.decode()
    test.refresh_from_db()
    assert test.expect["flowPath"][-1] == "goodbye" and test.expect["collected"]["party_size"] == 6
    response = admin_client.post(url, {**shown, "expect_collected-5-name": " ", "expect_collected-5-value": "x"})
    assert response.status_code == 200
    assert "expect.collected: A name must be 1 to 64 characters" in response.content.decode()


# --- run on an agent without a flow ----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_db_threads")
def test_on_an_agent_without_a_flow_the_flow_expectations_fail_saying_so(
    owner: Any, olive: Agent, settings: Any
) -> None:
    settings.BACKGROUND_WORK = "inline"  # the run is carried out once the request commits, in this process
    created = create(owner, olive, {**REPLY, "expect": FLOW_EXPECT})
    assert created.status_code == 201, created.json()

    queued = owner.client.post(f"/public/v1/agents/{olive.pk}/test-runs", {}, format="json")
    assert queued.status_code == 202, queued.json()
    run = owner.client.get(f"/public/v1/test-runs/{queued.json()['id']}").json()

    assert (run["status"], run["passed"], run["failed"], run["errored"]) == ("completed", 0, 1, 0), run
    [attempt] = run["results"][0]["attempts"]
    assert attempt["verdict"] == "fail"
    assert attempt["reasons"] == ["flowPath: the agent has no flow", "collected: the agent has no flow"]
    assert attempt["flow"] is None
    assert attempt["transcript"][0]["role"] == "assistant"  # the session ran: only the flow was missing
