"""Every page under its Content-Security-Policy in a real browser: headless Chromium (Playwright) against a
real Daphne server. Each page loads with no CSP violation (no "Refused to ..." on the console, no
securitypolicyviolation event) and still works: Swagger UI lists the operations, the agent page mounts its
talk panel, the demo page offers its agents, the call record draws its timeline."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from calls import services as calls_services
from testing.daphne import DaphneServer, start_test_server, stop_test_server

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "pw-staff-Xq4Lm8Tz"


@pytest.fixture
def world(owner: Any, make_agent: Any, django_user_model: Any) -> dict[str, Any]:
    agent = make_agent(owner.organization, name="Ava", status="active", static_greeting="Hello!")
    call = calls_services.call_start(agent=agent, channel="web")
    calls_services.call_message_add(call=call, role="assistant", content="Hello!")
    calls_services.call_message_add(call=call, role="user", content="When do you open?")
    calls_services.call_finish(call=call, status="completed")
    django_user_model.objects.create_superuser("staff", "staff@example.com", PASSWORD)
    return {"agent": agent, "call": call}


@pytest.fixture
def server(world: dict[str, Any], tmp_path_factory: Any) -> Iterator[DaphneServer]:
    env = {
        "DEMO_PAGES": "true",
        "DEMO_ORGANIZATION_ID": str(world["agent"].organization_id),
        "REALTIME_PRELOAD": "false",
    }
    started = start_test_server(tmp_path_factory, "csp", env)
    yield started
    stop_test_server(started)


def _visit(page: Any, console: list[str], url: str, ready: str) -> list[str]:
    """Open `url`, wait until `ready` (a selector) is on it, and return its CSP violations."""
    console.clear()
    response = page.goto(url)
    assert response.status == 200, url
    assert "'nonce-" in response.headers["content-security-policy"], url
    page.wait_for_selector(ready, timeout=30_000)
    page.wait_for_load_state("networkidle")
    violations = page.evaluate("window.__cspViolations")
    refused = [line for line in console if "Refused to" in line or "Content Security Policy" in line]
    errors = [line for line in console if line.startswith("pageerror")]
    return violations + refused + errors


def test_every_page_works_under_its_csp(server, world, browser_page):
    page, console = browser_page
    base = server.http_url
    agent, call = world["agent"], world["call"]

    assert _visit(page, console, f"{base}/", "h1") == []
    assert _visit(page, console, f"{base}/demo/", f"#agent-{agent.pk}") == []
    assert page.is_checked(f"#agent-{agent.pk}")  # the page's script ran
    assert page.is_visible('#talk-panel [data-role="toggle"]')
    # Swagger UI renders the operations from the schema (its start-up script is a file now).
    assert _visit(page, console, f"{base}/docs/", ".opblock") == []
    assert page.locator(".opblock").count() > 20

    assert _visit(page, console, f"{base}/admin/login/", "#id_username") == []
    page.fill("#id_username", "staff")
    page.fill("#id_password", PASSWORD)
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
