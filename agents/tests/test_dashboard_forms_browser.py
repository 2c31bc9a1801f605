"""The dashboard's structured forms in a real browser: headless Chromium (Playwright) against a real server.
Staff build an agent test with the structured form (turns as rows, a mocked tool in the table, expectations
as fields; the JSON editor shows the same test and back), run it from its page and see it pass; fill the
agent's analysis plan form; and on every page no console error and no Content-Security-Policy violation.
On the agent page nothing overlaps the "Talk to this agent" panel (bounding boxes) and the fieldset
headings are compact; a screenshot lands in var/test-artifacts/agent-page.png."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User

from agents.models import Agent
from realtime.models import AgentTest, TestRun
from testing.browser import CHROMIUM, WATCH_VIOLATIONS, playwright_or_skip, wait_until
from testing.daphne import REPO, DaphneServer, in_thread, start_test_server, stop_test_server
from testing.factories import AgentToolFactory
from testing.waiting import polled_sync

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ARTIFACTS = REPO / "var" / "test-artifacts"
PASSWORD = "pw-staff-Xq4Lm8Tz"
ORDER = "What is the status of order 3561?"
# What overlaps the talk panel: every visible element that is neither inside it nor one of its ancestors
# (text for screen readers only, clipped to nothing, is not seen).
OVERLAPPING = """() => {
  const panel = document.getElementById("talk-panel");
  const box = panel.getBoundingClientRect();
  const found = [];
  for (const element of document.body.querySelectorAll("*")) {
    if (panel.contains(element) || element.contains(panel) || element.closest(".visually-hidden")) continue;
    const r = element.getBoundingClientRect();
    const style = getComputedStyle(element);
    if (!r.width || !r.height || style.visibility === "hidden" || style.display === "none") continue;
    if (r.left < box.right && r.right > box.left && r.top < box.bottom && r.bottom > box.top) {
      found.push(`${element.tagName.toLowerCase()}#${element.id}.${element.className} at ${Math.round(r.top)}`);
    }
  }
  return found;
}"""


@pytest.fixture
def agent(owner: Any, make_agent: Any) -> Agent:
    agent = make_agent(
        owner.organization,
        name="Olive",
        status="active",
        instructions="You help callers with their orders.",
        agent_type="webhook",
        server_url="https://hooks.example.com/agent",  # never reached: the test's tool is mocked
    )
    AgentToolFactory(
        agent=agent,
        name="check_order_status",
        description="Look up the delivery status of an order by its order number",
        parameter_schema={
            "type": "object",
            "properties": {"order_number": {"type": "string", "description": "The order number"}},
            "required": ["order_number"],
        },
    )
    User.objects.create_superuser("staff", "staff@example.com", PASSWORD)
    return agent


@pytest.fixture
def server(agent: Agent, tmp_path_factory: Any) -> Iterator[DaphneServer]:
    started = start_test_server(tmp_path_factory, "dashforms", {"REALTIME_PRELOAD": "false"})
    yield started
    stop_test_server(started)


@pytest.fixture
def browser(server: DaphneServer) -> Iterator[tuple[Any, list[str]]]:
    """A logged-in Chromium page (1280x800) recording CSP violations, and its console's errors."""
    sync_playwright = playwright_or_skip()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu", "--no-first-run"]
        )
        context = launched.new_context(viewport={"width": 1280, "height": 800})
        context.add_init_script(WATCH_VIOLATIONS)
        page = context.new_page()
        console: list[str] = []
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda error: console.append(f"pageerror: {error}"))
        page.goto(f"{server.http_url}/admin/login/")
        page.fill("#id_username", "staff")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        page.wait_for_url(f"{server.http_url}/admin/")
        try:
            yield page, console
        finally:
            launched.close()


def problems(page: Any, console: list[str]) -> list[str]:
    """The page's CSP violations and console errors since the last call."""
    page.wait_for_load_state("networkidle")
    found = page.evaluate("window.__cspViolations") + console[:]
    console.clear()
    return found


def test_an_agent_test_built_with_the_structured_form_runs(server, agent, browser):
    page, console = browser
    base = server.http_url
    page.goto(f"{base}/admin/realtime/agenttest/add/?agent={agent.pk}")
    assert problems(page, console) == []
    # The JSON boxes are hidden behind the editor choice; the form's rows are shown.
    assert not page.is_visible("textarea[name=turns]") and page.is_visible("[name='turn_rows-0-user']")

    page.fill("#id_name", "Order status")
    page.select_option("#id_kind", "tool_call")
    page.fill("[name='turn_rows-0-user']", ORDER)
    page.click("text=Add a turn")  # a second row, then removed again
    assert page.locator("[name='turn_rows-1-user']").count() == 1
    page.locator(".field-turn_rows .rows-remove").last.click()
    assert page.locator("[name='turn_rows-1-user']").count() == 0
    page.fill("[name='mock_rows-0-tool']", "check_order_status")
    page.fill("[name='mock_rows-0-arguments']", '{"order_number": "3561"}')
    page.fill("[name='mock_rows-0-result']", '{"status": "shipped yesterday", "arrives": "Friday"}')
    page.fill("[name='expect_tool_calls-0-name']", "check_order_status")
    page.fill("#id_expect_reply_contains", "shipped yesterday\nFriday")
    page.select_option("#id_expect_transferred", "no")
    page.fill("#id_tag_list", "smoke")

    # Edit as JSON: the boxes hold the test the form says; back to the form, the fields are as typed.
    page.check("input[name=agent_test_editor][value=json]")
    assert page.is_visible("textarea[name=turns]") and not page.is_visible("[name='turn_rows-0-user']")
    assert json.loads(page.input_value("textarea[name=turns]")) == [{"user": ORDER}]
    mocks = json.loads(page.input_value("textarea[name=tool_mocks]"))
    assert mocks == [
        {
            "tool": "check_order_status",
            "when": {"argumentsInclude": {"order_number": "3561"}},
            "result": {"status": "shipped yesterday", "arrives": "Friday"},
        }
    ]
    expect = json.loads(page.input_value("textarea[name=expect]"))
    assert expect["replyContains"] == ["shipped yesterday", "Friday"] and expect["transferred"] is False
    page.check("input[name=agent_test_editor][value=form]")
    assert page.input_value("[name='turn_rows-0-user']") == ORDER
    assert page.input_value("[name='mock_rows-0-tool']") == "check_order_status"
    assert problems(page, console) == []

    page.click("input[name=_save]")
    page.wait_for_url(f"{base}/admin/realtime/agenttest/**")
    test = in_thread(AgentTest.objects.get)
    assert test.turns == [{"user": ORDER}] and test.tool_mocks == mocks and test.tags == ["smoke"]

    page.goto(f"{base}/admin/realtime/agenttest/{test.pk}/change/")
    assert problems(page, console) == []
    button = page.locator("#run-this-test")
    # Styled as its neighbours among the object tools (Django's pill), not a bare browser button.
    style = button.evaluate("b => [getComputedStyle(b).textTransform, getComputedStyle(b).borderRadius]")
    assert style == ["uppercase", "15px"]
    button.click()
    page.wait_for_url(f"{base}/admin/realtime/testrun/**")
    run = in_thread(TestRun.objects.get)
    polled_sync(
        lambda: in_thread(lambda: TestRun.objects.get(pk=run.pk)).status in ("completed", "failed"),
        what="the test run finished",
        timeout=120,
    )
    in_thread(run.refresh_from_db)
    assert (run.status, run.passed, run.failed, run.errored) == ("completed", 1, 0, 0), run.error
    page.reload()
    wait_until(page, "() => !!document.querySelector('.test-verdict-pass')")
    assert problems(page, console) == []

    page.goto(f"{base}/admin/realtime/agenttest/?agent__id__exact={agent.pk}")
    assert problems(page, console) == []
    style = page.locator("button.object-tool-button").evaluate("b => getComputedStyle(b).textTransform")
    assert style == "uppercase"
    page.goto(f"{base}/admin/realtime/testrun/")
    assert problems(page, console) == []


def test_the_agent_page_fills_its_analysis_plan_and_leaves_the_talk_panel_clear(server, agent, browser):
    page, console = browser
    url = f"{server.http_url}/admin/agents/agent/{agent.pk}/change/"
    page.goto(url)
    page.wait_for_selector('#talk-panel [data-role="toggle"]')
    assert problems(page, console) == []

    # Nothing overlaps the talk panel; the fieldset headings are compact bands; the agent's lists come
    # after the form, not beside it (behind the panel).
    assert page.evaluate(OVERLAPPING) == []
    heights = page.eval_on_selector_all("h2.fieldset-heading", "hs => hs.map(h => h.getBoundingClientRect().height)")
    assert heights and max(heights) <= 40, heights
    form_bottom = page.evaluate("document.getElementById('agent_form').getBoundingClientRect().bottom")
    assert page.evaluate("document.getElementById('agent-related').getBoundingClientRect().top") >= form_bottom
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "agent-page.png"))

    # The analysis plan with the form: structured data with one field, and a success rubric.
    page.check("#id_plan_structured_enabled")
    page.fill("[name='plan_structured_fields-0-name']", "order_number")
    page.select_option("[name='plan_structured_fields-0-type']", "string")
    page.fill("[name='plan_structured_fields-0-description']", "The order the caller asked about")
    page.check("[name='plan_structured_fields-0-required']")
    page.check("#id_plan_success_enabled")
    page.fill("#id_plan_success_rubric", "The caller learned where the order is.")
    page.locator("fieldset:has(#id_plan_summary_enabled)").screenshot(path=str(ARTIFACTS / "agent-analysis-plan.png"))
    page.check("input[name=analysis_plan_editor][value=json]")  # the JSON box shows the plan the form says
    plan = json.loads(page.input_value("#id_analysis_plan"))
    assert plan["structuredData"]["schema"]["required"] == ["order_number"]
    page.check("input[name=analysis_plan_editor][value=form]")
    page.click("input[name=_continue]")
    page.wait_for_url(url)
    assert page.locator(".errornote").count() == 0, page.inner_text("#content-main")
    in_thread(agent.refresh_from_db)
    assert agent.analysis_plan["structuredData"] == {
        "enabled": True,
        "schema": {
            "type": "object",
            "properties": {"order_number": {"type": "string", "description": "The order the caller asked about"}},
            "required": ["order_number"],
        },
        "prompt": None,
    }
    assert agent.analysis_plan["successEvaluation"]["rubric"] == "The caller learned where the order is."
    assert page.input_value("[name='plan_structured_fields-0-name']") == "order_number"
    assert page.evaluate(OVERLAPPING) == []
