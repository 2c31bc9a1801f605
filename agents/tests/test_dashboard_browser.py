"""The dashboard builds an agent in a real browser: headless Chromium (Debian's package, driven by
Playwright, with eSpeak NG speech as its microphone) against a real Daphne server on the test database.
Staff create an agent (the organization picked by name), upload a knowledge file and wait for it to be
indexed, add a tool and test-call it against a loopback server, activate the agent, ask it a question
through the agent page's talk panel and hear it answered from the file, then find the call by a word of
its transcript; no page breaks its Content-Security-Policy. Screenshots land in var/test-artifacts/."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from agents.models import Agent, AgentTool
from knowledge.models import KnowledgeDocument
from testing.browser import (  # noqa: F401 - fixtures: Chromium with a microphone file
    log_in,
    log_lines,
    microphone_wav_fixture,
    page_fixture,
    wait_until,
    warm_up,
)
from testing.daphne import REPO, SECRET, DaphneServer, in_thread, start_test_server, stop_test_server
from testing.dashboard import STAFF_PASSWORD
from testing.webhooks import LoopbackReceiver, Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ARTIFACTS = REPO / "var" / "test-artifacts"
INDEXING_SECONDS = 240  # the server loads its embedding model for the first document
HOURS = (
    "# Opening hours\n\nThe Acme restaurant opens at noon and closes at eleven in the evening.\n\n"
    "## Parking\n\nVisitors park in bay 12, behind the kitchen.\n"
)
QUESTION = "When does the restaurant open?"
SCHEMA = {
    "type": "object",
    "properties": {"date": {"type": "string"}, "people": {"type": "integer"}},
    "required": ["date"],
}


@pytest.fixture
def tool_server(owner: Any) -> Iterator[LoopbackReceiver]:
    with LoopbackReceiver(default=Reply(json={"available": True, "table": 7})) as hook:
        yield hook


@pytest.fixture
def server(owner: Any, tmp_path_factory: Any) -> Iterator[DaphneServer]:
    User.objects.create_superuser("staff", "staff@example.com", STAFF_PASSWORD)
    started = start_test_server(
        tmp_path_factory,
        "dashboard",
        # The embedded default also when the suite runs with REDIS_URL: uploads are indexed by the server's
        # own worker (no Celery worker runs beside the suite).
        {"OUTBOUND_ALLOWED_NETWORKS": "127.0.0.0/8", "REALTIME_PRELOAD": "false", "REDIS_URL": ""},
    )
    yield started
    stop_test_server(started)


def screenshot(tab: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"dashboard-{name}.png"
    tab.screenshot(path=str(path), full_page=True)
    return path


def csp_problems(tab: Any, console: list[str]) -> list[str]:
    refused = [line for line in console if "Refused to" in line or "Content Security Policy" in line]
    return tab.evaluate("window.__cspViolations") + refused + [line for line in console if line.startswith("pageerror")]


# The caller asks again after the answer, as people do when they are not understood: on a busy machine the
# browser's capture of the first question can come out garbled ("what are two october").
@pytest.mark.parametrize("microphone_wav", [(QUESTION, QUESTION)], ids=[QUESTION], indirect=True)
def test_staff_build_an_agent_in_the_dashboard_talk_to_it_and_find_the_call(
    server,
    owner,
    tool_server,
    page,
    tmp_path,
    settings,
):
    console: list[str] = []
    page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    page.on("pageerror", lambda error: console.append(f"pageerror: {error}"))
    page.set_viewport_size({"width": 1280, "height": 900})
    page.set_default_timeout(30_000)
    base = server.http_url

    log_in(page, base)

    # A new agent: the organization is searched by name, then the agent's settings.
    page.goto(f"{base}/admin/agents/agent/add/")
    page.click(".field-organization .select2-selection")
    page.fill(".select2-search__field", "Acm")
    page.click(".select2-results__option:has-text('Acme')")
    page.fill("#id_name", "Ava")
    page.select_option("#id_agent_type", "http")
    page.fill("#id_instructions", "You take table reservations for the Acme restaurant.")
    page.select_option("#id_greeting_type", "static")
    page.fill("#id_static_greeting", "Hello, this is Ava from Acme.")
    page.select_option("#id_ai_identity_disclosure_template_id", "named_agent")
    page.click("input[name=_save]")
    page.wait_for_selector("#agent-related")
    agent = in_thread(lambda: Agent.objects.select_related("organization").get())
    assert (agent.organization, agent.agent_type, agent.status) == (owner.organization, "http", "draft")
    assert page.url == f"{base}/admin/agents/agent/{agent.pk}/change/"
    assert "Hi, I'm Ava, an AI agent." in page.inner_text(".field-disclosure_spoken")
    assert csp_problems(page, console) == []

    # A knowledge file, uploaded from the agent page and indexed by the server.
    page.click("#agent-documents a.addlink")
    assert page.input_value("#id_agent") == str(agent.pk)
    hours = tmp_path / "hours.md"
    hours.write_text(HOURS)
    page.set_input_files("#id_file", str(hours))
    page.click("input[name=_save]")
    page.wait_for_selector(".field-status")
    deadline = time.monotonic() + INDEXING_SECONDS
    while page.inner_text(".field-status .readonly") == "Processing" and time.monotonic() < deadline:
        page.wait_for_timeout(1000)
        page.reload()
    assert page.inner_text(".field-status .readonly") == "Ready"
    assert "Visitors park in bay 12, behind the kitchen." in page.inner_text(".inline-group")
    document = in_thread(lambda: KnowledgeDocument.objects.get())
    assert document.status == "ready" and document.agent_id == agent.pk
    assert document.description and document.description in page.inner_text(".field-description")
    screenshot(page, "document")

    # A tool, added from the agent page and test-called with sample arguments.
    page.goto(f"{base}/admin/agents/agent/{agent.pk}/change/")
    page.click("#agent-tools a.addlink")
    page.fill("#id_name", "check_availability")
    page.fill("#id_description", "Checks whether a table is free.")
    page.fill("#id_parameter_schema", json.dumps(SCHEMA))
    page.fill("#id_tool_url", tool_server.url("/availability"))
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist .success")
    tool = in_thread(lambda: AgentTool.objects.get())
    assert (tool.agent_id, tool.parameter_schema) == (agent.pk, SCHEMA)

    page.goto(f"{base}/admin/agents/agent/{agent.pk}/change/")
    page.click("#agent-tools a:has-text('Test')")
    page.fill("#id_arguments", '{"date": "2026-12-24", "people": 4}')
    page.click("input[name=_test]")
    page.wait_for_selector("#trial-result")
    assert [request.json() for request in tool_server.requests] == [{"date": "2026-12-24", "people": 4}]
    result = page.inner_text("#trial-result")
    assert "Request sent" in result and f"POST {tool_server.url('/availability')}" in result
    assert "Response received" in result and "HTTP 200" in result
    assert '"table": 7' in page.inner_text("#trial-model-result")
    screenshot(page, "tool-test")
    assert csp_problems(page, console) == []

    # Activation.
    page.goto(f"{base}/admin/agents/agent/{agent.pk}/change/")
    page.select_option("#id_status", "active")
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist .success")
    assert in_thread(lambda: Agent.objects.get().status) == "active"
    page.goto(f"{base}/admin/agents/agent/{agent.pk}/change/")
    assert page.input_value("#id_status") == "active"
    assert "Opening hours" in page.inner_text("#agent-documents")
    assert "check_availability" in page.inner_text("#agent-tools")
    screenshot(page, "agent")
    assert csp_problems(page, console) == []

    # Talk to it from its page: the caller (the microphone file) asks when the restaurant opens, after
    # the greeting, and the agent answers from the uploaded file. One session first, so that the
    # browser's starts at once (the microphone file plays from the moment the browser opens it).
    settings.REALTIME_TOKEN_SECRET = SECRET  # the server's: the warm-up session's token is made here
    in_thread(lambda: asyncio.run(warm_up(server, agent)))
    page.click('#talk-panel [data-role="toggle"]')
    wait_until(page, 'document.getElementById("talk-panel").dataset.state === "live"', timeout=60_000)
    wait_until(
        page,
        """() => [...document.querySelectorAll('#talk-panel [data-role="log"] li.talk-assistant:not(.talk-live)')]
                  .some((li) => li.textContent.includes("eleven in the evening"))""",
        timeout=90_000,
    )
    lines = log_lines(page)
    print(json.dumps(lines, indent=1))
    asked = [line["text"].lower() for line in lines if line["kind"] == "talk-user"]
    assert any("restaurant" in text for text in asked), asked
    answers = [line["text"] for line in lines if line["kind"] == "talk-assistant" and "noon" in line["text"]]
    assert any("opens at noon and closes at eleven in the evening" in answer for answer in answers), answers  # as heard
    for answer in answers:
        assert "bay 12" not in answer and "Opening hours" not in answer  # its own fact, never the heading
    page.click('#talk-panel [data-role="toggle"]')
    wait_until(page, 'document.getElementById("talk-panel").dataset.state === "closed"', timeout=15_000)
    call_id = page.get_attribute("#talk-panel", "data-call-id")
    screenshot(page, "agent-talk")

    # The call is found by a word of its transcript, and by the start of its id.
    for query in ("noon", call_id[:8]):
        page.goto(f"{base}/admin/calls/call/?q={query}")
        rows = page.locator("#result_list tbody tr")
        assert rows.count() == 1, query
        assert "Ava" in rows.first.inner_text()
        page.click("#result_list tbody tr th a")
        page.wait_for_url(lambda url: f"/admin/calls/call/{call_id}/change/" in url)  # with the list's filters
    assert "opens at noon" in page.inner_text("body")
    screenshot(page, "call-found")
    assert csp_problems(page, console) == []
