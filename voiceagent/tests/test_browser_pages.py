"""The project's pages in a real browser: headless Chromium (Debian's, driven by Playwright) at 1280x800
against a real Daphne server. One server and one browser serve the module; each test makes its own world
on the test database and opens its pages in a fresh browser context (no cookies from the test before).

- Every page under its Content-Security-Policy: each loads with no CSP violation (no "Refused to ..." on
  the console, no securitypolicyviolation event) and still works: Swagger UI lists the operations, the
  agent page mounts its talk panel, the demo page offers its agents, the call record draws its timeline.
- The dashboard: every list page fits the window (no horizontal scrolling), the home page refreshes its
  live calls by itself under the CSP, and the favicon is served. Set DASHBOARD_SCREENSHOTS to a folder to
  keep a screenshot of each page there.
- The call page's recording player loads the recording through its signed URL under the page's CSP
  (media-src 'self'; Chromium fetches it with Range requests), and clicking a turn in the transcript or
  the timeline moves the player to that turn's start.
- Every dashboard page (each list, its add page, the first record it lists) loads with no console error and
  no CSP violation. Staff build an agent test with the structured form (turns as rows, a mocked tool in the
  table, expectations as fields; the JSON editor shows the same test and back), run it from its page and
  see it pass; they fill the agent's analysis plan form. On the agent page nothing overlaps the "Talk to
  this agent" panel (bounding boxes) and the fieldset headings are compact; a screenshot lands in
  var/test-artifacts/agent-page.png.
- The dashboard creates what it lists: a webhook endpoint (its secret shown once, then a signed test event
  to a loopback receiver, the answer shown on its page) and a campaign from a CSV file."""

from __future__ import annotations

import asyncio
import io
import json
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from accounts.models import Organization
from accounts.services import plan_get
from agents.models import Agent
from calls import services as calls_services
from calls.models import Call, CallMessage, WebhookEndpoint
from calls.recordings import encode_stereo_ogg, recording_store
from kit.signing import signature
from kit.storage import storage_from_url
from realtime.models import AgentTest, TestRun
from telephony.models import CallBatch
from telephony.services.numbers import phone_number_claim
from testing.agents import olive_for_agent_tests
from testing.browser import WATCH_VIOLATIONS, launch, log_in, playwright_or_skip, wait_until
from testing.daphne import REPO, DaphneServer, in_thread, shared_test_server, start_test_server, stop_test_server
from testing.dashboard import STAFF_PASSWORD
from testing.twilio_webhooks import make_account
from testing.waiting import polled_sync
from testing.webhooks import LoopbackReceiver

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# The organization the server's demo pages talk as (DEMO_ORGANIZATION_ID): the CSP test's world makes it.
DEMO_ORGANIZATION = "6f1d2c3b-4a59-4e8f-9d7c-0b1a2e3f4d5c"
RECORDING_SECONDS = 12
# How many pixels the page is wider than the window, or a list's table wider than its box (Django lets
# the table scroll sideways inside it: the page fits, the table does not).
OVERFLOW = """Math.max(
  document.documentElement.scrollWidth - window.innerWidth,
  ...[...document.querySelectorAll("#changelist .results")].map((box) => box.scrollWidth - box.clientWidth),
)"""


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: Any) -> Path:
    """Where the server and the tests keep recordings (the player test's is stored here)."""
    return tmp_path_factory.mktemp("recordings")


@pytest.fixture(scope="module")
def server(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: Any, recordings: Path
) -> Iterator[DaphneServer]:
    """One server for the module's tests (each test makes its own world)."""
    env = {
        "DEMO_PAGES": "true",
        "DEMO_ORGANIZATION_ID": DEMO_ORGANIZATION,
        "REALTIME_PRELOAD": "false",
        "RECORDINGS_STORAGE_URL": f"file://{recordings}",
    }
    with shared_test_server(django_db_blocker, tmp_path_factory, "pages", env) as started:
        yield started


@pytest.fixture
def own_server(tmp_path_factory: Any, recordings: Path) -> Iterator[DaphneServer]:
    """A server for one test that writes through the dashboard: the module's server caches the content
    types of the first test's database (the admin's history rows point at them), which a flush between
    tests renumbers."""
    env = {
        "REALTIME_PRELOAD": "false",
        "RECORDINGS_STORAGE_URL": f"file://{recordings}",
        "OUTBOUND_ALLOWED_NETWORKS": "127.0.0.0/8",  # a webhook's test event to a loopback receiver
        "PUBLIC_BASE_URL": "https://voice.example.com",  # campaigns need a service that can place calls
    }
    started = start_test_server(tmp_path_factory, "writes", env)
    yield started
    stop_test_server(started)


@pytest.fixture(scope="module")
def browser() -> Iterator[tuple[Any, asyncio.AbstractEventLoop]]:
    """One Chromium for the module, and the event loop of Playwright's sync API.

    That API marks its loop as running in this thread between its calls, and Django refuses database
    queries in a thread with a running loop: the mark is off while no test's page is open (each test's
    world is made, and the database flushed after it, then), and on while one is (`fresh_page`). The
    tests' own queries go through in_thread, as with a browser of their own."""
    sync_playwright = playwright_or_skip()
    with sync_playwright() as playwright:
        chromium = launch(playwright)
        loop = asyncio.get_running_loop()
        asyncio.events._set_running_loop(None)
        try:
            yield chromium, loop
        finally:
            asyncio.events._set_running_loop(loop)
            chromium.close()


@pytest.fixture
def fresh_page(browser: tuple[Any, asyncio.AbstractEventLoop]) -> Iterator[tuple[Any, list[str]]]:
    """A page (1280x800) in a context of its own that records CSP violations, and its console lines."""
    chromium, loop = browser
    asyncio.events._set_running_loop(loop)
    try:
        context = chromium.new_context(viewport={"width": 1280, "height": 800})
        try:
            context.add_init_script(WATCH_VIOLATIONS)
            page = context.new_page()
            console: list[str] = []
            page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
            page.on("pageerror", lambda error: console.append(f"pageerror: {error}"))
            yield page, console
        finally:
            context.close()
    finally:
        asyncio.events._set_running_loop(None)


def _problems(page: Any, console: list[str]) -> list[str]:
    """Once the page has settled: what its CSP refused (its securitypolicyviolation events and the
    console's "Refused to" lines), its console errors and its uncaught errors since the last look (the
    console and the events are emptied)."""
    page.wait_for_load_state("networkidle")
    found = page.evaluate("window.__cspViolations") + [
        line
        for line in console
        if line.startswith(("error:", "pageerror")) or "Refused to" in line or "Content Security Policy" in line
    ]
    console.clear()
    page.evaluate("window.__cspViolations = []")
    return found


# Every page under its CSP.


@pytest.fixture
def csp_world(make_agent: Any, django_user_model: Any) -> dict[str, Any]:
    """The demo organization with an agent and a finished call, and the superuser `staff`."""
    organization = Organization.objects.create(id=DEMO_ORGANIZATION, name="Acme", plan=plan_get(code="studio"))
    agent = make_agent(organization, name="Ava", status="active", static_greeting="Hello!")
    call = calls_services.call_start(agent=agent, channel="web")
    calls_services.call_message_add(call=call, role="assistant", content="Hello!")
    calls_services.call_message_add(call=call, role="user", content="When do you open?")
    calls_services.call_finish(call=call, status="completed")
    django_user_model.objects.create_superuser("staff", "staff@example.com", STAFF_PASSWORD)
    return {"agent": agent, "call": call}


def _visit(page: Any, console: list[str], url: str, ready: str) -> list[str]:
    """Open `url`, wait until `ready` (a selector) is on it, and return its CSP violations."""
    console.clear()
    response = page.goto(url)
    assert response.status == 200, url
    assert "'nonce-" in response.headers["content-security-policy"], url
    page.wait_for_selector(ready, timeout=30_000)
    return _problems(page, console)


def test_every_page_works_under_its_csp(server, csp_world, fresh_page):
    page, console = fresh_page
    base = server.http_url
    agent, call = csp_world["agent"], csp_world["call"]

    assert _visit(page, console, f"{base}/", "h1") == []
    assert _visit(page, console, f"{base}/demo/", f"#agent-{agent.pk}") == []
    assert page.is_checked(f"#agent-{agent.pk}")  # the page's script ran
    assert page.is_visible('#talk-panel [data-role="toggle"]')
    # Swagger UI renders the operations from the schema (its start-up script is a file now).
    assert _visit(page, console, f"{base}/docs/", ".opblock") == []
    assert page.locator(".opblock").count() > 20

    assert _visit(page, console, f"{base}/admin/login/", "#id_username") == []
    page.fill("#id_username", "staff")
    page.fill("#id_password", STAFF_PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{base}/admin/")
    pages = {
        f"{base}/admin/": "#content-main",
        f"{base}/admin/agents/agent/": "#result_list",
        f"{base}/admin/agents/agent/{agent.pk}/change/": '#talk-panel [data-role="toggle"]',
        f"{base}/admin/calls/call/": "#result_list",
        f"{base}/admin/calls/call/{call.pk}/change/": ".conversation",
        f"{base}/admin/calls/call/usage/": "table",
    }
    for url, ready in pages.items():
        assert _visit(page, console, url, ready) == [], url
    # The talk panel's script ran under the nonce: the panel is mounted (its button reads "Start").
    page.goto(f"{base}/admin/agents/agent/{agent.pk}/change/")
    assert page.locator('#talk-panel [data-role="toggle"]').is_enabled()


# The dashboard at 1280x800 (the world: voiceagent/tests/conftest.py's dashboard_world).


def _open(page: Any, console: list[str], url: str, name: str | None = None) -> tuple[int, list[str]]:
    """Open `url`; return by how many pixels it is too wide (0: it fits, see OVERFLOW) and its problems
    (`_problems`). With a `name`, its screenshot goes to the folder DASHBOARD_SCREENSHOTS names, if set."""
    console.clear()
    response = page.goto(url)
    assert response.status == 200, url
    page.wait_for_load_state("networkidle")
    folder = os.environ.get("DASHBOARD_SCREENSHOTS")
    if folder and name:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)
    return page.evaluate(OVERFLOW), _problems(page, console)


def _list_pages() -> dict[str, str]:
    pages = {"home": reverse("admin:index"), "usage": reverse("admin:calls_usage")}
    for model in admin.site._registry:
        pages[model._meta.label_lower] = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    return pages


def test_the_home_page_refreshes_live_calls_by_itself(server, dashboard_world, fresh_page):
    from playwright.sync_api import expect

    page, console = fresh_page
    base = server.http_url
    log_in(page, base)
    assert _open(page, console, f"{base}/admin/", "home") == (0, [])
    assert page.text_content('[data-count="live"]') == "2"
    assert page.locator("#live-calls tbody tr").count() == 2

    # A third call starts while the page is open: the page shows it without being reloaded.
    in_thread(lambda: calls_services.call_start(agent=dashboard_world.agent, channel="web"))
    expect(page.locator('[data-count="live"]')).to_have_text("3", timeout=20_000)
    assert page.locator("#live-calls tbody tr").count() == 3
    assert page.text_content("#live-updated").startswith("updated")
    assert page.evaluate("window.__cspViolations") == []


def test_pages_carry_a_favicon_that_is_served(server, dashboard_world, fresh_page):
    page, _ = fresh_page
    base = server.http_url
    log_in(page, base)
    icons = page.eval_on_selector_all('link[rel="icon"]', "links => links.map(link => link.href)")
    assert icons
    for href in icons:
        response = page.request.get(href)
        assert response.status == 200 and response.headers["content-type"].startswith("image/"), href
    browsers_default = page.request.get(f"{base}/favicon.ico")
    assert browsers_default.status == 200 and browsers_default.headers["content-type"].startswith("image/")


# The call page's recording player.


@pytest.fixture
def player_world(
    owner: Any, make_agent: Any, django_user_model: Any, settings: Any, recordings: Path
) -> dict[str, Any]:
    """A finished call of RECORDING_SECONDS whose turns end at 3, 7 and 10 s, recorded (a tone) where the
    server finds recordings, and the superuser `staff`."""
    settings.STORAGES = {
        **settings.STORAGES,
        "recordings": storage_from_url(f"file://{recordings}", default_location=""),
    }
    agent = make_agent(owner.organization, name="Ava", status="active", recording_enabled=True)
    call = calls_services.call_start(agent=agent, channel="web")
    calls_services.call_message_add(call=call, role="assistant", content="Hello! How can I help you today?")
    calls_services.call_message_add(call=call, role="user", content="When do you open on Sunday morning?")
    calls_services.call_message_add(call=call, role="assistant", content="We open at noon on Sundays.")
    calls_services.call_finish(call=call, status="completed")
    started = timezone.now() - timedelta(seconds=RECORDING_SECONDS)
    Call.objects.filter(pk=call.pk).update(started_at=started, ended_at=started + timedelta(seconds=RECORDING_SECONDS))
    for message, ends in zip(CallMessage.objects.filter(call=call).order_by("sequence"), (3, 7, 10), strict=True):
        CallMessage.objects.filter(pk=message.pk).update(occurred_at=started + timedelta(seconds=ends))
    call.refresh_from_db()
    rate = 16000
    tone = (np.sin(2 * np.pi * 220 * np.arange(RECORDING_SECONDS * rate) / rate) * 6000).astype("<i2").tobytes()
    encoded = io.BytesIO()
    encode_stereo_ogg(left=io.BytesIO(tone), left_rate=rate, right=io.BytesIO(tone), right_rate=rate, out=encoded)
    calls_services.call_recording_attach(call_id=str(call.pk), key=recording_store(call=call, data=encoded))
    django_user_model.objects.create_superuser("staff", "staff@example.com", STAFF_PASSWORD)
    return {"call": call}


@pytest.mark.slow
def test_the_call_page_plays_the_recording_and_a_click_on_a_turn_seeks_to_it(server, player_world, fresh_page):
    page, console = fresh_page
    base = server.http_url
    log_in(page, base)

    response = page.goto(f"{base}/admin/calls/call/{player_world['call'].pk}/change/")
    assert response.status == 200
    page.wait_for_function(
        "document.getElementById('call-recording').readyState >= 1", timeout=30_000
    )  # metadata loaded through the signed URL
    duration = page.evaluate("document.getElementById('call-recording').duration")
    assert abs(duration - RECORDING_SECONDS) < 0.5

    bubbles = page.locator(".conversation .bubble[data-seek]")
    assert bubbles.count() == 3
    target = float(bubbles.nth(2).get_attribute("data-seek"))
    assert 5 < target < 10
    bubbles.nth(2).click()
    page.wait_for_function(
        "(t) => Math.abs(document.getElementById('call-recording').currentTime - t) < 0.6", arg=target, timeout=10_000
    )
    page.evaluate("document.getElementById('call-recording').pause()")

    bar = page.locator(".timeline rect.turn.caller")
    caller_start = float(bar.first.get_attribute("data-seek"))
    bar.first.click()
    page.wait_for_function(
        "(t) => Math.abs(document.getElementById('call-recording').currentTime - t) < 0.6",
        arg=caller_start,
        timeout=10_000,
    )
    assert _problems(page, console) == []


# Every dashboard page, and the structured forms (agent tests, the analysis plan) at work.

ARTIFACTS = REPO / "var" / "test-artifacts"
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


def _submit(page: Any, selector: str) -> None:
    """Click what sends the page's form (or follows a link) and wait for the page it leads to."""
    with page.expect_navigation():
        page.click(selector)
    page.wait_for_load_state("networkidle")


def test_every_dashboard_page_loads_clean_and_its_lists_fit_a_1280_pixel_window(server, dashboard_world, fresh_page):
    """Every list page of the dashboard, its add page (where it has one) and the first record it lists, as
    staff reach them by clicking: no console error or CSP violation on any, and no list page (nor the
    record pages with the widest content) wider than the window."""
    page, console = fresh_page
    base = server.http_url
    log_in(page, base)
    visited: dict[str, list[str]] = {}
    overflowing: dict[str, int] = {}

    def look(url: str, name: str | None = None) -> None:
        """Open `url` and note its problems; with a `name`, also by how many pixels it is too wide."""
        px, visited[url.removeprefix(base)] = _open(page, console, url, name)
        if name and px:
            overflowing[name] = px

    look(f"{base}/admin/", "home")
    for name, path in _list_pages().items():
        look(base + path, name)
        add = page.locator(".object-tools a.addlink")
        first = page.locator("#result_list tbody tr th a, #result_list tbody tr td.field-__str__ a").first
        record = first.get_attribute("href") if first.count() else None
        if add.count():
            look(base + add.first.get_attribute("href"))
        if record:
            look(base + record)
    # The pages that show one record, with the widest content the dashboard has.
    call = dashboard_world.call
    phone_number = in_thread(lambda: dashboard_world.agent.phone_numbers.get().pk)
    look(base + reverse("admin:calls_call_change", args=[call.pk]), "call")
    look(f"{base}{reverse('admin:calls_agentlog_changelist')}?call={call.pk}", "agent-logs-of-a-call")
    look(base + reverse("admin:telephony_phonenumber_change", args=[phone_number]), "phone-number")
    look(base + reverse("admin:telephony_phonenumber_add"), "phone-number-add")
    assert len(visited) >= 40, sorted(visited)
    assert {url: found for url, found in visited.items() if found} == {}
    assert overflowing == {}, f"wider than the window by (px): {overflowing}"


@pytest.fixture
def olive(owner: Any, make_agent: Any) -> Agent:
    """Olive of the agent tests (testing/agents.py), and the superuser `staff`."""
    agent = olive_for_agent_tests(owner, make_agent)
    User.objects.create_superuser("staff", "staff@example.com", STAFF_PASSWORD)
    return agent


@pytest.fixture
def staff_page(olive: Agent, own_server: DaphneServer, fresh_page: tuple[Any, list[str]]) -> tuple[Any, list[str]]:
    """`fresh_page`, logged in as `staff` (after `olive` made the user)."""
    page, console = fresh_page
    log_in(page, own_server.http_url)
    console.clear()
    return page, console


def test_an_agent_test_built_with_the_structured_form_runs(own_server, olive, staff_page):
    page, console = staff_page
    base = own_server.http_url
    page.goto(f"{base}/admin/realtime/agenttest/add/?agent={olive.pk}")
    assert _problems(page, console) == []
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
    assert _problems(page, console) == []

    _submit(page, "input[name=_save]")
    page.wait_for_url(f"{base}/admin/realtime/agenttest/**")
    test = in_thread(AgentTest.objects.get)
    assert test.turns == [{"user": ORDER}] and test.tool_mocks == mocks and test.tags == ["smoke"]

    page.goto(f"{base}/admin/realtime/agenttest/{test.pk}/change/")
    assert _problems(page, console) == []
    button = page.locator("#run-this-test")
    # Styled as its neighbours among the object tools (Django's pill), not a bare browser button.
    style = button.evaluate("b => [getComputedStyle(b).textTransform, getComputedStyle(b).borderRadius]")
    assert style == ["uppercase", "15px"]
    with page.expect_navigation():
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
    assert _problems(page, console) == []

    page.goto(f"{base}/admin/realtime/agenttest/?agent__id__exact={olive.pk}")
    assert _problems(page, console) == []
    style = page.locator("button.object-tool-button").evaluate("b => getComputedStyle(b).textTransform")
    assert style == "uppercase"
    page.goto(f"{base}/admin/realtime/testrun/")
    assert _problems(page, console) == []


def test_the_agent_page_fills_its_analysis_plan_and_leaves_the_talk_panel_clear(own_server, olive, staff_page):
    page, console = staff_page
    url = f"{own_server.http_url}/admin/agents/agent/{olive.pk}/change/"
    page.goto(url)
    page.wait_for_selector('#talk-panel [data-role="toggle"]')
    assert _problems(page, console) == []

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
    _submit(page, "input[name=_continue]")
    page.wait_for_url(url)
    assert page.locator(".errornote").count() == 0, page.inner_text("#content-main")
    in_thread(olive.refresh_from_db)
    assert olive.analysis_plan["structuredData"] == {
        "enabled": True,
        "schema": {
            "type": "object",
            "properties": {"order_number": {"type": "string", "description": "The order the caller asked about"}},
            "required": ["order_number"],
        },
        "prompt": None,
    }
    assert olive.analysis_plan["successEvaluation"]["rubric"] == "The caller learned where the order is."
    assert page.input_value("[name='plan_structured_fields-0-name']") == "order_number"
    assert page.evaluate(OVERLAPPING) == []


# The dashboard creates what it lists: a webhook endpoint and a campaign.

CSV = b"to,firstName\n+14155550123,Ana\n+14155550124,Bo\n"


@pytest.fixture
def creating_world(owner: Any, make_agent: Any) -> dict[str, Any]:
    """The superuser `staff`, an organization with a Twilio account, an active agent and a claimed number."""
    User.objects.create_superuser("staff", "staff@example.com", STAFF_PASSWORD)
    make_account(owner.organization)
    agent = make_agent(owner.organization, name="Ava", status="active")
    number = phone_number_claim(organization=owner.organization, number="+14155550100")
    return {"organization": owner.organization, "agent": agent, "number": number}


def pick_organization(page: Any, name: str) -> None:
    """The organization field searches as you type (the admin's autocomplete)."""
    page.click("#id_organization + .select2 .select2-selection")
    page.fill(".select2-search__field", name)
    page.click(f'.select2-results__option:has-text("{name}")')


def test_a_webhook_and_a_campaign_are_created_from_the_dashboard(own_server, creating_world, fresh_page):
    page, console = fresh_page
    failed: list[str] = []
    page.on("response", lambda r: failed.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    base = own_server.http_url
    log_in(page, base)
    assert page.locator("a", has_text="Campaigns").count() >= 1
    assert "batchs" not in page.content()
    assert _problems(page, console) + failed == []

    # A webhook endpoint: the list's Add button, the form, the secret once, a test event.
    with LoopbackReceiver() as hook:
        page.goto(f"{base}/admin/calls/webhookendpoint/")
        page.click(".object-tools a.addlink")
        page.wait_for_selector("#id_url")
        assert _problems(page, console) + failed == []
        pick_organization(page, "Acme")
        page.fill("#id_url", hook.url("/voice-events"))
        _submit(page, "input[name=_save]")
        secret = page.input_value("#webhook-secret")
        assert secret.startswith("whsec_")
        assert _problems(page, console) + failed == []
        endpoint = in_thread(WebhookEndpoint.objects.get)
        assert endpoint.url == hook.url("/voice-events") and endpoint.secret == secret

        _submit(page, "#webhook-page")
        page.wait_for_selector("input[name=_send_test_event]")
        assert secret not in page.content()
        assert _problems(page, console) + failed == []
        _submit(page, "input[name=_send_test_event]")
        delivered = page.locator(".messagelist .success").inner_text()
        [received] = hook.requests
        assert received.json()["message"]["type"] == "webhook.test"
        assert received.headers["x-service-signature"] == signature(secret, received.body)
        assert "delivered: the receiver answered HTTP 200" in delivered
        assert _problems(page, console) + failed == []

    # A campaign: the list's Add button, the form with a CSV file, the new campaign's page.
    page.goto(f"{base}/admin/telephony/callbatch/")
    page.click(".object-tools a.addlink")
    page.wait_for_selector("#id_recipients_file")
    assert _problems(page, console) + failed == []
    pick_organization(page, "Acme")
    page.fill("#id_name", "Reminders")
    page.select_option("#id_agent", str(creating_world["agent"].pk))
    page.select_option("#id_phone_number", str(creating_world["number"].pk))
    page.set_input_files("#id_recipients_file", files=[{"name": "list.csv", "mimeType": "text/csv", "buffer": CSV}])
    page.fill("#id_window_start", "09:00")
    page.fill("#id_window_end", "18:00")
    page.fill("#id_concurrency", "2")
    _submit(page, "input[name=_save]")
    added = page.locator(".messagelist .success").inner_text()
    assert "The campaign “Reminders” was added with 2 recipients" in added
    assert "+14155550124" in page.content()
    assert _problems(page, console) + failed == []
    batch = in_thread(CallBatch.objects.get)
    assert (batch.name, batch.agent_id, batch.phone_number_id, batch.concurrency, batch.status) == (
        "Reminders",
        creating_world["agent"].pk,
        creating_world["number"].pk,
        2,
        "scheduled",
    )
    assert batch.window["start"] == "09:00" and in_thread(batch.recipients.count) == 2
