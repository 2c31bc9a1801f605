"""The dashboard's agent tests and test runs: tests listed per agent, created and edited through the API's
services (the page refuses what the API refuses, on the field it concerns), runs listed with their counts and
a run's page with each attempt's verdict and reasons, and the *Run* button."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from agents.models import Agent, AgentTool
from realtime.models import AgentTest, TestRun
from testing.factories import attempt_rows_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(owner: Any, make_agent: Any) -> Agent:
    agent = make_agent(owner.organization, name="Ava", server_url="https://hooks.example.com/agent")
    AgentTool.objects.create(agent=agent, name="lookup_order")
    return agent


def form(agent: Agent, **changes: Any) -> dict[str, Any]:
    data = {
        "agent": str(agent.pk),
        "name": "Order status",
        "kind": "tool_call",
        "turns": json.dumps([{"user": "Where is my order 42?"}]),
        "caller": "",
        "variables": "",
        "tool_mocks": json.dumps([{"tool": "lookup_order", "result": {"status": "shipped"}}]),
        "expect": json.dumps({"toolCalls": [{"name": "lookup_order"}], "replyContains": ["shipped"]}),
        "tags": json.dumps(["smoke", "smoke"]),
    }
    data.update(changes)
    return data


def errors_of(response: Any) -> str:
    assert response.status_code == 200  # the form again, with its errors
    return response.content.decode()


def test_a_test_is_added_and_edited_through_the_services(admin_client: Client, agent: Agent) -> None:
    response = admin_client.post("/admin/realtime/agenttest/add/", form(agent))
    assert response.status_code == 302, errors_of(response)
    test = AgentTest.objects.get()
    assert test.organization_id == agent.organization_id and test.agent_id == agent.pk
    assert test.tags == ["smoke"]  # cleaned as the API cleans it
    assert test.tool_mocks == [{"tool": "lookup_order", "when": None, "result": {"status": "shipped"}}]
    assert test.caller is None and test.variables == {}

    page = admin_client.get(f"/admin/realtime/agenttest/{test.pk}/change/")
    assert page.status_code == 200 and "Order status" in page.content.decode()
    response = admin_client.post(f"/admin/realtime/agenttest/{test.pk}/change/", form(agent, name="Renamed"))
    assert response.status_code == 302, errors_of(response)
    test.refresh_from_db()
    assert test.name == "Renamed"


def test_the_form_refuses_what_the_api_refuses_on_the_field(admin_client: Client, agent: Agent) -> None:
    page = errors_of(
        admin_client.post(
            "/admin/realtime/agenttest/add/", form(agent, tool_mocks=json.dumps([{"tool": "refund", "result": 1}]))
        )
    )
    assert "toolMocks.0.tool: unknown tool &#x27;refund&#x27;: the agent offers lookup_order, end_call." in page
    page = errors_of(
        admin_client.post(
            "/admin/realtime/agenttest/add/", form(agent, expect=json.dumps({"replyMatches": "ship(ped"}))
        )
    )
    assert "expect.replyMatches: Not a valid regular expression: missing ), unterminated subpattern" in page
    page = errors_of(admin_client.post("/admin/realtime/agenttest/add/", form(agent, turns="[]")))
    assert "A tool_call test needs at least one turn" in page
    page = errors_of(admin_client.post("/admin/realtime/agenttest/add/", form(agent, turns="not json")))
    assert "Enter a valid JSON" in page
    assert not AgentTest.objects.exists()

    admin_client.post("/admin/realtime/agenttest/add/", form(agent))
    test = AgentTest.objects.get()
    page = errors_of(
        admin_client.post(
            f"/admin/realtime/agenttest/{test.pk}/change/",
            form(agent, caller=json.dumps({"persona": "p", "goal": "g"})),
        )
    )
    assert "Only conversation tests have a simulated caller" in page
    test.refresh_from_db()
    assert test.caller is None


def test_the_agent_page_links_its_tests_and_runs(admin_client: Client, agent: Agent) -> None:
    page = admin_client.get(f"/admin/agents/agent/{agent.pk}/change/").content.decode()
    assert f"/admin/realtime/agenttest/?agent__id__exact={agent.pk}" in page
    assert f"/admin/realtime/testrun/?agent__id__exact={agent.pk}" in page
    add = admin_client.get(f"/admin/realtime/agenttest/add/?agent={agent.pk}").content.decode()
    assert f'<option value="{agent.pk}" selected>' in add  # the agent chosen already


def test_an_agents_tests_have_a_run_button_and_link_to_its_runs(admin_client: Client, agent: Agent) -> None:
    admin_client.post("/admin/realtime/agenttest/add/", form(agent))
    page = admin_client.get(f"/admin/realtime/agenttest/?agent__id__exact={agent.pk}").content.decode()
    assert "Order status" in page
    assert f'action="/admin/realtime/agenttest/run/{agent.pk}/"' in page
    assert "Run Ava's tests" in page
    assert f"/admin/realtime/testrun/?agent__id__exact={agent.pk}" in page
    unfiltered = admin_client.get("/admin/realtime/agenttest/").content.decode()
    assert "/run/" not in unfiltered  # the button runs one agent's tests: shown once the list is of one agent
    assert admin_client.get(f"/admin/realtime/agenttest/run/{agent.pk}/").status_code == 405  # POST only


def test_the_run_button_queues_a_run_of_the_agents_tests(admin_client: Client, agent: Agent) -> None:
    admin_client.post("/admin/realtime/agenttest/add/", form(agent))
    response = admin_client.post(f"/admin/realtime/agenttest/run/{agent.pk}/")
    run = TestRun.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/admin/realtime/testrun/{run.pk}/change/"
    assert run.agent_id == agent.pk and run.test_ids == [str(AgentTest.objects.get().pk)]

    test = AgentTest.objects.get()
    response = admin_client.post(
        "/admin/realtime/agenttest/", {"action": "run_selected", "_selected_action": [str(test.pk)]}
    )
    assert response.status_code == 302 and TestRun.objects.count() == 2


T1, T2 = "5f0c3c1e-1d5e-4c55-9c0a-3f1a3d2b7e01", "5f0c3c1e-1d5e-4c55-9c0a-3f1a3d2b7e02"


def test_runs_are_listed_with_counts_and_a_run_shows_each_verdict(admin_client: Client, agent: Agent) -> None:
    run = TestRun.objects.create(
        organization=agent.organization,
        agent=agent,
        status="completed",
        test_ids=[T1, T2],
        passed=1,
        failed=1,
        errored=1,
    )
    attempt_rows_create(
        run,
        [
            {
                "testId": T1,
                "name": "Order status",
                "kind": "tool_call",
                "passRate": 0.5,
                "attempts": [
                    {
                        "verdict": "pass",
                        "reasons": [],
                        "transcript": [{"role": "user", "text": "Where is 42?"}],
                        "toolCalls": [{"name": "lookup_order", "arguments": {"order": "42"}}],
                        "latencyMs": [120],
                    },
                    {
                        "verdict": "fail",
                        "reasons": [{"expectation": "replyContains", "reason": "no 'shipped'"}],
                        "transcript": [],
                        "toolCalls": [],
                        "latencyMs": [],
                    },
                ],
            },
            {
                "testId": T2,
                "name": "Transfer",
                "kind": "reply",
                "passRate": 0.0,
                "attempts": [{"verdict": "error", "reasons": ["unmocked tool transfer_call"]}],
            },
        ],
    )
    listing = admin_client.get("/admin/realtime/testrun/").content.decode()
    assert "Ava" in listing and "completed" in listing
    page = admin_client.get(f"/admin/realtime/testrun/{run.pk}/change/").content.decode()
    for text in (
        "Order status",
        "replyContains: no &#x27;shipped&#x27;",
        "unmocked tool transfer_call",
        "50%",
        "user: Where is 42?",
        "lookup_order",
        ">fail<",
        ">error<",
        ">pass<",
    ):
        assert text in page, text
    assert admin_client.get("/admin/realtime/testrun/add/").status_code == 403  # runs are made by Run / the API
    queued = TestRun.objects.create(organization=agent.organization, agent=agent, test_ids=[])
    assert "No results yet." in admin_client.get(f"/admin/realtime/testrun/{queued.pk}/change/").content.decode()
