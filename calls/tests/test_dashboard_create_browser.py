"""The dashboard creates what it lists, in a real browser (headless Chromium against a real Daphne server):
a webhook endpoint (its secret shown once, then a signed test event to a loopback receiver, the answer shown
on its page) and a campaign from a CSV file, each page loading without a console error or a
Content-Security-Policy violation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User

from calls.models import WebhookEndpoint
from kit.signing import signature
from telephony.models import CallBatch
from telephony.services.numbers import phone_number_claim
from testing.browser import CHROMIUM, WATCH_VIOLATIONS, playwright_or_skip
from testing.daphne import DaphneServer, in_thread, start_test_server, stop_test_server
from testing.dashboard import STAFF_PASSWORD
from testing.twilio_webhooks import make_account
from testing.webhooks import LoopbackReceiver

pytestmark = pytest.mark.django_db(transaction=True)

CSV = b"to,firstName\n+14155550123,Ana\n+14155550124,Bo\n"


@pytest.fixture
def world(owner: Any, make_agent: Any) -> dict[str, Any]:
    User.objects.create_superuser("staff", "staff@example.com", STAFF_PASSWORD)
    make_account(owner.organization)
    agent = make_agent(owner.organization, name="Ava", status="active")
    number = phone_number_claim(organization=owner.organization, number="+14155550100")
    return {"organization": owner.organization, "agent": agent, "number": number}


@pytest.fixture
def server(world: dict[str, Any], tmp_path_factory: Any) -> Iterator[DaphneServer]:
    env = {
        "REALTIME_PRELOAD": "false",
        "OUTBOUND_ALLOWED_NETWORKS": "127.0.0.0/8",  # the test event's loopback receiver
        "PUBLIC_BASE_URL": "https://voice.example.com",  # campaigns need a service that can place calls
    }
    started = start_test_server(tmp_path_factory, "dashboard-create", env)
    yield started
    stop_test_server(started)


@pytest.fixture
def browser() -> Iterator[tuple[Any, list[str]]]:
    """A headless Chromium page that records CSP violations (window.__cspViolations), and its console's
    errors, page errors and failed responses."""
    sync_playwright = playwright_or_skip()
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu", "--no-first-run"]
        )
        context = chromium.new_context(viewport={"width": 1280, "height": 800})
        context.add_init_script(WATCH_VIOLATIONS)
        page = context.new_page()
        problems: list[str] = []
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda error: problems.append(f"pageerror: {error}"))
        page.on("response", lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
        try:
            yield page, problems
        finally:
            chromium.close()


def clean(page: Any, problems: list[str]) -> list[str]:
    """What went wrong on the page so far: CSP violations, console errors, page errors, failed responses."""
    page.wait_for_load_state("networkidle")
    return page.evaluate("window.__cspViolations") + problems


def pick_organization(page: Any, name: str) -> None:
    """The organization field searches as you type (the admin's autocomplete)."""
    page.click("#id_organization + .select2 .select2-selection")
    page.fill(".select2-search__field", name)
    page.click(f'.select2-results__option:has-text("{name}")')


def test_a_webhook_and_a_campaign_are_created_from_the_dashboard(server, world, browser):
    page, problems = browser
    base = server.http_url
    page.goto(f"{base}/admin/login/")
    page.fill("#id_username", "staff")
    page.fill("#id_password", STAFF_PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{base}/admin/")
    assert page.locator("a", has_text="Campaigns").count() >= 1
    assert "batchs" not in page.content()
    assert clean(page, problems) == []

    # A webhook endpoint: the list's Add button, the form, the secret once, a test event.
    with LoopbackReceiver() as hook:
        page.goto(f"{base}/admin/calls/webhookendpoint/")
        page.click(".object-tools a.addlink")
        page.wait_for_selector("#id_url")
        assert clean(page, problems) == []
        pick_organization(page, "Acme")
        page.fill("#id_url", hook.url("/voice-events"))
        page.click("input[name=_save]")
        secret = page.input_value("#webhook-secret")
        assert secret.startswith("whsec_")
        assert clean(page, problems) == []
        endpoint = in_thread(WebhookEndpoint.objects.get)
        assert endpoint.url == hook.url("/voice-events") and endpoint.secret == secret

        page.click("#webhook-page")
        page.wait_for_selector("input[name=_send_test_event]")
        assert secret not in page.content()
        assert clean(page, problems) == []
        page.click("input[name=_send_test_event]")
        delivered = page.locator(".messagelist .success").inner_text()
        [received] = hook.requests
        assert received.json()["message"]["type"] == "webhook.test"
        assert received.headers["x-service-signature"] == signature(secret, received.body)
        assert "delivered: the receiver answered HTTP 200" in delivered
        assert clean(page, problems) == []

    # A campaign: the list's Add button, the form with a CSV file, the new campaign's page.
    page.goto(f"{base}/admin/telephony/callbatch/")
    page.click(".object-tools a.addlink")
    page.wait_for_selector("#id_recipients_file")
    assert clean(page, problems) == []
    pick_organization(page, "Acme")
    page.fill("#id_name", "Reminders")
    page.select_option("#id_agent", str(world["agent"].pk))
    page.select_option("#id_phone_number", str(world["number"].pk))
    page.set_input_files("#id_recipients_file", files=[{"name": "list.csv", "mimeType": "text/csv", "buffer": CSV}])
    page.fill("#id_window_start", "09:00")
    page.fill("#id_window_end", "18:00")
    page.fill("#id_concurrency", "2")
    page.click("input[name=_save]")
    added = page.locator(".messagelist .success").inner_text()
    assert "The campaign “Reminders” was added with 2 recipients" in added
    assert "+14155550124" in page.content()
    assert clean(page, problems) == []
    batch = in_thread(CallBatch.objects.get)
    assert (batch.name, batch.agent_id, batch.phone_number_id, batch.concurrency, batch.status) == (
        "Reminders",
        world["agent"].pk,
        world["number"].pk,
        2,
        "scheduled",
    )
    assert batch.window["start"] == "09:00" and in_thread(batch.recipients.count) == 2
