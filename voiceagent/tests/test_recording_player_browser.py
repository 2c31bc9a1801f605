"""The call page's recording player in a real browser: headless Chromium (Playwright) against a real Daphne
server. The player loads the recording through its signed URL under the page's Content-Security-Policy
(media-src 'self'; Chromium fetches it with Range requests), and clicking a turn in the transcript or the
timeline moves the player to that turn's start."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from django.utils import timezone

from calls import services as calls_services
from calls.models import Call, CallMessage
from calls.recordings import encode_stereo_ogg, recording_store
from kit.storage import storage_from_url
from testing.daphne import DaphneServer, start_test_server, stop_test_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

PASSWORD = "pw-staff-Xq4Lm8Tz"
SECONDS = 12


@pytest.fixture
def world(owner: Any, make_agent: Any, django_user_model: Any, settings: Any, tmp_path: Any) -> dict[str, Any]:
    folder = tmp_path / "recordings"
    settings.STORAGES = {**settings.STORAGES, "recordings": storage_from_url(f"file://{folder}", default_location="")}
    agent = make_agent(owner.organization, name="Ava", status="active", recording_enabled=True)
    call = calls_services.call_start(agent=agent, channel="web")
    calls_services.call_message_add(call=call, role="assistant", content="Hello! How can I help you today?")
    calls_services.call_message_add(call=call, role="user", content="When do you open on Sunday morning?")
    calls_services.call_message_add(call=call, role="assistant", content="We open at noon on Sundays.")
    calls_services.call_finish(call=call, status="completed")
    # The conversation took 12 seconds: turns end at 3, 7 and 10 s.
    started = timezone.now() - timedelta(seconds=SECONDS)
    Call.objects.filter(pk=call.pk).update(started_at=started, ended_at=started + timedelta(seconds=SECONDS))
    for message, ends in zip(CallMessage.objects.filter(call=call).order_by("sequence"), (3, 7, 10), strict=True):
        CallMessage.objects.filter(pk=message.pk).update(occurred_at=started + timedelta(seconds=ends))
    call.refresh_from_db()
    rate = 16000
    tone = (np.sin(2 * np.pi * 220 * np.arange(SECONDS * rate) / rate) * 6000).astype("<i2").tobytes()
    encoded = io.BytesIO()
    encode_stereo_ogg(left=io.BytesIO(tone), left_rate=rate, right=io.BytesIO(tone), right_rate=rate, out=encoded)
    calls_services.call_recording_attach(call_id=str(call.pk), key=recording_store(call=call, data=encoded))
    django_user_model.objects.create_superuser("staff", "staff@example.com", PASSWORD)
    return {"call": call, "folder": folder}


@pytest.fixture
def server(world: dict[str, Any], tmp_path_factory: Any) -> Iterator[DaphneServer]:
    env = {"REALTIME_PRELOAD": "false", "RECORDINGS_STORAGE_URL": f"file://{world['folder']}"}
    started = start_test_server(tmp_path_factory, "player", env)
    yield started
    stop_test_server(started)


def test_the_call_page_plays_the_recording_and_a_click_on_a_turn_seeks_to_it(server, world, browser_page):
    page, console = browser_page
    base = server.http_url
    page.goto(f"{base}/admin/login/")
    page.fill("#id_username", "staff")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{base}/admin/")

    response = page.goto(f"{base}/admin/calls/call/{world['call'].pk}/change/")
    assert response.status == 200
    page.wait_for_function(
        "document.getElementById('call-recording').readyState >= 1", timeout=30_000
    )  # metadata loaded through the signed URL
    duration = page.evaluate("document.getElementById('call-recording').duration")
    assert abs(duration - SECONDS) < 0.5

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
    violations = page.evaluate("window.__cspViolations")
    refused = [line for line in console if "Refused to" in line or "Content Security Policy" in line]
    errors = [line for line in console if line.startswith("pageerror")]
    assert violations + refused + errors == []
