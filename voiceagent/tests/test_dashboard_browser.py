"""The dashboard in a real browser at 1280x800 (headless Chromium against a real Daphne server): every list
page fits the window (no horizontal scrolling), the home page refreshes its live calls by itself under the
CSP, and the favicon is served.

Set DASHBOARD_SCREENSHOTS to a folder to keep a screenshot of each page there."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib import admin
from django.urls import reverse

from calls import services as calls_services
from testing.daphne import DaphneServer, in_thread, shared_test_server
from testing.dashboard import STAFF_PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)

# How many pixels the page is wider than the window, or a list's table wider than its box (Django lets
# the table scroll sideways inside it: the page fits, the table does not).
OVERFLOW = """Math.max(
  document.documentElement.scrollWidth - window.innerWidth,
  ...[...document.querySelectorAll("#changelist .results")].map((box) => box.scrollWidth - box.clientWidth),
)"""


@pytest.fixture(scope="module")
def server(django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: Any) -> Iterator[DaphneServer]:
    """One server for the module's tests (each test makes its own dashboard world)."""
    with shared_test_server(django_db_blocker, tmp_path_factory, "dashboard", {"REALTIME_PRELOAD": "false"}) as started:
        yield started


def _log_in(page: Any, base: str) -> None:
    page.goto(f"{base}/admin/login/")
    page.fill("#id_username", "staff")
    page.fill("#id_password", STAFF_PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{base}/admin/")


def _open(page: Any, console: list[str], url: str, name: str) -> int:
    """Open `url`; return by how many pixels it is too wide (0: it fits, see OVERFLOW)."""
    console.clear()
    response = page.goto(url)
    assert response.status == 200, url
    page.wait_for_load_state("networkidle")
    folder = os.environ.get("DASHBOARD_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)
    problems = page.evaluate("window.__cspViolations") + [line for line in console if "pageerror" in line]
    assert problems == [], url
    return page.evaluate(OVERFLOW)


def _list_pages() -> dict[str, str]:
    pages = {"home": reverse("admin:index"), "usage": reverse("admin:calls_usage")}
    for model in admin.site._registry:
        pages[model._meta.label_lower] = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    return pages


def test_every_list_page_fits_a_1280_pixel_window(server, dashboard_world, browser_page):
    page, console = browser_page
    base = server.http_url
    _log_in(page, base)
    overflowing = {name: px for name, path in _list_pages().items() if (px := _open(page, console, base + path, name))}
    assert overflowing == {}, f"wider than the window by (px): {overflowing}"

    # The pages that show one record, with the widest content the dashboard has.
    call = dashboard_world.call
    records = {
        "call": reverse("admin:calls_call_change", args=[call.pk]),
        "agent-logs-of-a-call": f"{reverse('admin:calls_agentlog_changelist')}?call={call.pk}",
        "phone-number": reverse(
            "admin:telephony_phonenumber_change", args=[in_thread(lambda: dashboard_world.agent.phone_numbers.get().pk)]
        ),
        "phone-number-add": reverse("admin:telephony_phonenumber_add"),
    }
    overflowing = {name: px for name, path in records.items() if (px := _open(page, console, base + path, name))}
    assert overflowing == {}, f"wider than the window by (px): {overflowing}"


def test_the_home_page_refreshes_live_calls_by_itself(server, dashboard_world, browser_page):
    page, console = browser_page
    base = server.http_url
    _log_in(page, base)
    assert _open(page, console, f"{base}/admin/", "home") == 0
    from playwright.sync_api import expect

    assert page.text_content('[data-count="live"]') == "2"
    assert page.locator("#live-calls tbody tr").count() == 2

    # A third call starts while the page is open: the page shows it without being reloaded.
    in_thread(lambda: calls_services.call_start(agent=dashboard_world.agent, channel="web"))
    expect(page.locator('[data-count="live"]')).to_have_text("3", timeout=20_000)
    assert page.locator("#live-calls tbody tr").count() == 3
    assert page.text_content("#live-updated").startswith("updated")
    assert page.evaluate("window.__cspViolations") == []


def test_pages_carry_a_favicon_that_is_served(server, dashboard_world, browser_page):
    page, _ = browser_page
    base = server.http_url
    _log_in(page, base)
    icons = page.eval_on_selector_all('link[rel="icon"]', "links => links.map(link => link.href)")
    assert icons
    for href in icons:
        response = page.request.get(href)
        assert response.status == 200 and response.headers["content-type"].startswith("image/"), href
    browsers_default = page.request.get(f"{base}/favicon.ico")
    assert browsers_default.status == 200 and browsers_default.headers["content-type"].startswith("image/")
