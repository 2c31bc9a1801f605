"""The embeddable widget in a real browser: headless Chromium (Debian's package, driven by Playwright) with
eSpeak NG speech as its microphone, on a page of a site of its own (a loopback HTTP server serving the
one-line snippet under a strict Content-Security-Policy), against a real Daphne server on the test database.

From an origin the widget key lists, the widget talks to the agent over WebRTC (the agent's greeting heard
on the media track, the caller's question recognized and answered, a typed turn on the data channel, the
call ended from the panel); from another origin the session is refused (403) and the panel says why; a
flood of session requests is refused with 429 and Retry-After, and the panel says so too. Every packet stays
on 127.0.0.1: the server offers only that address as its ICE candidate and no STUN or TURN server is given.
Screenshots land in var/test-artifacts/."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from calls.models import Call
from realtime.widget.services import widget_key_create
from testing.agents import AVA_GREETING, ava_agent
from testing.browser import (  # noqa: F401 - the microphone file fixture
    SENTENCE,
    WATCH_VIOLATIONS,
    launch,
    microphone_wav_fixture,
    playwright_or_skip,
    wait_until,
    warm_up,
)
from testing.daphne import REPO, DaphneServer, in_thread, start_test_server, stop_test_server
from testing.servers import ScriptedServer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ARTIFACTS = REPO / "var" / "test-artifacts"
GREETING = AVA_GREETING
INSTRUCTIONS = (
    "You take table reservations for lunch and dinner at the Acme restaurant and answer questions about its "
    "menu. Callers book a table for a number of people, for a date and a time, for lunch or dinner."
)
TYPED = "Can I book a table for two tonight?"
# Each RTCPeerConnection the page makes, for the test to read its statistics (an init script).
WATCH_PEERS = """
window.__peers = [];
if (window.RTCPeerConnection) {
  const Native = window.RTCPeerConnection;
  window.RTCPeerConnection = class extends Native {
    constructor(...args) {
      super(...args);
      window.__peers.push(this);
    }
  };
}
"""
# The widget's host element and its shadow root.
HOST = "document.querySelector('[data-voice-widget]')"
SHADOW = f"{HOST}.shadowRoot"


class SitePage(ScriptedServer):
    """A customer's site: one page with the widget's snippet, under a Content-Security-Policy that allows
    scripts and requests to the voice service only (no inline script or style, no 'unsafe-eval')."""

    thread_name = "widget-site"

    def __init__(self, *, service: str, key: str, **attributes: str) -> None:
        super().__init__()
        self.service = service
        self.key = key
        self.attributes = attributes

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/", self._page)

    async def _page(self, request: web.Request) -> web.Response:
        extra = "".join(f' data-{name.replace("_", "-")}="{value}"' for name, value in self.attributes.items())
        html = (
            "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Acme shop</title></head>"
            "<body><h1>Acme shop</h1><p>Welcome to our shop.</p>"
            f'<script src="{self.service}/static/widget/v1/widget.js" data-key="{self.key}"{extra} async></script>'
            "</body></html>"
        )
        sockets = self.service.replace("http://", "ws://")
        policy = (
            f"default-src 'none'; script-src {self.service}; connect-src {self.service} {sockets}; "
            "style-src 'none'; img-src 'none'; media-src 'none'; base-uri 'none'; form-action 'none'"
        )
        return web.Response(text=html, content_type="text/html", headers={"Content-Security-Policy": policy})


@pytest.fixture
def ava(owner: Any, make_agent: Any) -> Any:
    return ava_agent(owner, make_agent, instructions=INSTRUCTIONS)


@pytest.fixture
def server(tmp_path: Path, realtime_settings: Any) -> Iterator[DaphneServer]:
    env = {
        # (WebRTC on loopback only: testing.daphne's WEBRTC_HOST_ADDRESSES, no STUN or TURN server.)
        # Every request of these tests comes from 127.0.0.1: the per-address limit is the API tests'
        # (test_widget_keys_api.py); here each key allows 3 sessions at once, then 1 each 10 s.
        "WIDGET_ADDRESS_SESSIONS_PER_MINUTE": "0",
        "WIDGET_KEY_SESSIONS_PER_MINUTE": "6",
        "WIDGET_KEY_SESSIONS_BURST": "3",
    }
    started = start_test_server(tmp_path, "daphne", env)
    try:
        yield started
    finally:
        stop_test_server(started)
    print(f"server log: {started.log_path}")


@pytest.fixture
def warmed(server: DaphneServer, ava: Any) -> DaphneServer:
    """The server after one session: the browser's starts at once (models loaded, Ava's language model
    built), so the caller speaks after the greeting. Before the browser (its loop runs in this thread)."""
    asyncio.run(warm_up(server, ava))
    return server


def key_for(agent: Any, *origins: str) -> Any:
    """A new widget key of the agent for `origins` (a WidgetKey: `.key` is the publishable value)."""
    return in_thread(
        lambda: widget_key_create(
            organization=agent.organization, agent_id=str(agent.pk), body={"allowedOrigins": list(origins)}
        )
    )


@contextlib.contextmanager
def site(server: DaphneServer, key: str, **attributes: str) -> Iterator[SitePage]:
    with SitePage(service=server.http_url, key=key, **attributes) as page_server:
        yield page_server


@pytest.fixture
def browser(microphone_wav: Path) -> Iterator[Any]:
    """Chromium with the microphone file (WebRTC on this machine only: testing.browser.launch)."""
    sync_playwright = playwright_or_skip()
    with sync_playwright() as playwright:
        chromium = launch(
            playwright,
            "--use-fake-ui-for-media-stream",
            "--use-fake-device-for-media-stream",
            f"--use-file-for-fake-audio-capture={microphone_wav}%noloop",
            "--autoplay-policy=no-user-gesture-required",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        )
        try:
            yield chromium
        finally:
            chromium.close()


@contextlib.contextmanager
def opened(browser: Any, url: str) -> Iterator[Any]:
    """A fresh page at `url` (the microphone allowed for every origin), printing its console afterwards."""
    context = browser.new_context(viewport={"width": 1200, "height": 900}, permissions=["microphone"])
    context.add_init_script(WATCH_VIOLATIONS)  # window.__cspViolations: what the site's CSP refused
    context.add_init_script(WATCH_PEERS)
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    page.on("pageerror", lambda error: console.append(f"pageerror: {error}"))
    try:
        page.goto(url)
        wait_until(page, f"Boolean({HOST}) && {HOST}.dataset.state === 'idle'", timeout=15_000)
        yield page
    finally:
        if console:
            print("browser console:\n" + "\n".join(console[-60:]))
        context.close()


def is_local(address: str) -> bool:
    """Whether `address` is one of this machine's own (a socket can be bound to it)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.bind((address, 0))
        except OSError:
            return False
    return True


def session_statuses(page: Any) -> Callable[[], list[int]]:
    """The HTTP statuses of the page's session requests so far (a function to call), also of answers the
    page may not read (CORS): the DevTools protocol sees every response. A response's status may come
    before its request's URL, so they are matched when asked."""
    urls: dict[str, str] = {}
    statuses: dict[str, int] = {}
    devtools = page.context.new_cdp_session(page)
    devtools.send("Network.enable")
    devtools.on(
        "Network.requestWillBeSent", lambda event: urls.__setitem__(event["requestId"], event["request"]["url"])
    )
    devtools.on(
        "Network.responseReceivedExtraInfo",
        lambda event: statuses.__setitem__(event["requestId"], event["statusCode"]) if "statusCode" in event else None,
    )
    return lambda: [
        status for request, status in statuses.items() if urls.get(request, "").endswith("/widget/sessions")
    ]


def widget(page: Any, selector: str) -> Any:
    """An element of the widget (Playwright's CSS selectors go through open shadow roots)."""
    return page.locator(f"[data-voice-widget] {selector}")


def captions(page: Any) -> list[dict[str, str]]:
    return page.evaluate(
        f"[...{SHADOW}.querySelectorAll('.captions li')].map((li) => ({{kind: li.className, text: li.textContent}}))"
    )


def screenshot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path))
    print(f"screenshot: {path}")


def peer_statistics(page: Any) -> dict[str, Any]:
    """The WebRTC connection's statistics: the selected candidate pair's addresses, audio each way."""
    return page.evaluate(
        """async () => {
          const peer = window.__peers.at(-1);
          const reports = [...(await peer.getStats()).values()];
          const byId = Object.fromEntries(reports.map((report) => [report.id, report]));
          const transport = reports.find((report) => report.type === "transport");
          const pair = byId[transport.selectedCandidatePairId];
          const inbound = reports.find((report) => report.type === "inbound-rtp" && report.kind === "audio");
          const outbound = reports.find((report) => report.type === "outbound-rtp" && report.kind === "audio");
          const codec = inbound && byId[inbound.codecId];
          return {
            local: byId[pair.localCandidateId].address,
            remote: byId[pair.remoteCandidateId].address,
            codec: codec ? `${codec.mimeType}/${codec.clockRate}` : null,
            receivedEnergy: inbound ? inbound.totalAudioEnergy : 0,
            receivedPackets: inbound ? inbound.packetsReceived : 0,
            sentPackets: outbound ? outbound.packetsSent : 0,
          };
        }"""
    )


@pytest.mark.parametrize("microphone_wav", [SENTENCE], indirect=True)
def test_a_page_of_an_allowed_origin_talks_to_the_agent_through_the_widget_over_webrtc(warmed, ava, browser):
    # The WebRTC server side is in the tree: the widget must use it (the socket is only its fallback).
    assert (REPO / "realtime" / "webrtc").is_dir()
    server = warmed
    with site(server, "") as shop:
        key = key_for(ava, shop.origin)
        shop.key = key.key
        with opened(browser, f"{shop.origin}/") as page:
            assert page.evaluate(f"{HOST}.dataset.open") == "false"
            widget(page, ".launcher").click()
            assert page.evaluate(f"{HOST}.dataset.open") == "true"
            started = time.monotonic()
            widget(page, ".call").click()
            wait_until(page, f"{HOST}.dataset.state === 'live'", timeout=60_000)
            print(f"live {time.monotonic() - started:.1f} s after the click")
            assert page.evaluate(f"{HOST}.dataset.transport") == "webrtc"
            call_id = page.evaluate(f"{HOST}.dataset.callId")
            assert widget(page, ".call").inner_text() == "End call"

            # The greeting is captioned while it is spoken (the live line), then final.
            wait_until(page, f"Boolean({SHADOW}.querySelector('.captions li.agent.speaking'))", timeout=30_000)
            # The greeting, captioned as it is spoken and heard on the track; then the caller's question
            # (the microphone file, after the greeting) is recognized and answered.
            wait_until(
                page,
                f"""() => {{
                  const kinds = [...{SHADOW}.querySelectorAll('.captions li')].map((li) => li.className);
                  const user = kinds.indexOf("user");
                  return kinds[0] === "agent" && user > 0 && kinds.slice(user).includes("agent");
                }}""",
                timeout=90_000,
            )
            lines = captions(page)
            print(json.dumps(lines, indent=1))
            assert (
                lines[0]["text"] == f"Assistant:Just so you know, you are speaking with an AI, not a person. {GREETING}"
            )
            heard = next(line["text"] for line in lines if line["kind"] == "user")
            assert len(heard) > len("You:"), heard
            statistics = peer_statistics(page)
            print(f"WebRTC: {statistics}")
            # The server's one candidate is 127.0.0.1; Chromium's end may be another address of this machine
            # (it prefers its interface's over loopback): either way no packet leaves the machine.
            assert statistics["remote"] == "127.0.0.1" and is_local(statistics["local"]), statistics
            assert statistics["codec"] == "audio/opus/48000"
            assert statistics["receivedEnergy"] > 0 and statistics["receivedPackets"] > 100
            assert statistics["sentPackets"] > 100

            # A typed turn goes on the data channel and is answered.
            before = len(lines)
            widget(page, ".say input").fill(TYPED)
            widget(page, ".say input").press("Enter")
            wait_until(
                page,
                f"""([count, typed]) => {{
                  const items = [...{SHADOW}.querySelectorAll('.captions li')].slice(count);
                  const mine = items.findIndex((li) => li.className === "user" && li.textContent.includes(typed));
                  return mine >= 0 && items.slice(mine + 1).some((li) => li.className === "agent");
                }}""",
                arg=[before, TYPED],
                timeout=60_000,
            )
            screenshot(page, "widget-call")
            assert page.evaluate("window.__cspViolations") == []

            # Mute: the microphone's track goes silent (the call goes on), and back.
            sending = "window.__peers.at(-1).getSenders()[0].track.enabled"
            widget(page, ".mute").click()
            assert page.evaluate(f"{SHADOW}.querySelector('.mute').getAttribute('aria-pressed')") == "true"
            assert page.evaluate(sending) is False and page.evaluate(f"{HOST}.dataset.muted") == "true"
            assert "(muted)" in widget(page, ".status").inner_text()
            widget(page, ".mute").click()
            assert page.evaluate(sending) is True

            widget(page, ".call").click()  # End call
            wait_until(page, f"{HOST}.dataset.state === 'closed'", timeout=15_000)
            assert widget(page, ".call").inner_text() == "Start call"
            assert widget(page, ".error").is_hidden()

    call = in_thread(lambda: Call.objects.get(pk=call_id))
    assert call.status == "completed" and call.agent_id == ava.pk and call.channel == "web"
    assert call.metadata == {"widget": {"keyId": str(key.pk), "origin": shop.origin}}
    contents = in_thread(lambda: list(call.messages.filter(role="user").values_list("content", flat=True)))
    assert TYPED in contents


def test_the_same_page_on_another_origin_is_refused_and_says_why(server, ava, browser):
    with site(server, "") as shop, site(server, "") as elsewhere:
        key = key_for(ava, shop.origin).key
        shop.key = elsewhere.key = key
        with opened(browser, f"{elsewhere.origin}/") as page:
            answers = session_statuses(page)
            # By keyboard: Tab reaches the call button, Enter opens the panel with the focus on Start,
            # Escape closes it and gives the focus back.
            page.keyboard.press("Tab")
            assert page.evaluate(f"{SHADOW}.activeElement.className") == "launcher"
            assert page.evaluate(f"{SHADOW}.activeElement.getAttribute('aria-expanded')") == "false"
            page.keyboard.press("Enter")
            assert page.evaluate(f"{HOST}.dataset.open") == "true"
            assert page.evaluate(f"{SHADOW}.activeElement.className") == "call"
            page.keyboard.press("Shift+Tab")
            assert page.evaluate(f"{SHADOW}.activeElement.getAttribute('aria-label')") == "Close"
            page.keyboard.press("Escape")
            assert page.evaluate(f"{HOST}.dataset.open") == "false"
            assert page.evaluate(f"{SHADOW}.activeElement.className") == "launcher"
            page.keyboard.press("Enter")
            page.keyboard.press("Enter")  # Start
            wait_until(page, f"{HOST}.dataset.state === 'closed' && Boolean({HOST}.dataset.error)", timeout=30_000)
            assert page.evaluate(f"{HOST}.dataset.error") == "origin"
            message = widget(page, ".error").inner_text()
            print(message)
            assert f"not enabled on this website ({elsewhere.origin})" in message and "allowed origins" in message
            assert answers() == [403]  # the service refused it (the page may not read why: no CORS header)
            assert page.evaluate(f"{SHADOW}.querySelector('.error').getAttribute('role')") == "alert"
            screenshot(page, "widget-origin-refused")
            assert page.evaluate("window.__cspViolations") == []
        # The same key from its own origin is fine.
        with opened(browser, f"{shop.origin}/") as page:
            status = page.evaluate(
                """async ([service, key]) => (await fetch(`${service}/public/v1/widget/sessions`, {
                  method: "POST", headers: {"Content-Type": "text/plain"}, body: JSON.stringify({key}),
                })).status""",
                [server.http_url, key],
            )
            assert status == 200


def test_a_flood_of_session_requests_gets_429s_and_the_panel_says_so(server, ava, browser):
    with site(server, "", label="Call Acme", color="#0b6e4f") as shop:
        shop.key = key_for(ava, shop.origin).key
        with opened(browser, f"{shop.origin}/") as page:
            assert widget(page, ".launcher").inner_text() == "Call Acme"
            background = page.evaluate(f"getComputedStyle({SHADOW}.querySelector('.launcher')).backgroundColor")
            assert background == "rgb(11, 110, 79)"  # data-color
            answers = page.evaluate(
                """async ([service, key]) => {
                  const answers = [];
                  for (let i = 0; i < 10; i++) {
                    const response = await fetch(`${service}/public/v1/widget/sessions`, {
                      method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({key}),
                    });
                    answers.push([response.status, response.headers.get("Retry-After"), (await response.json()).code]);
                  }
                  return answers;
                }""",
                [server.http_url, shop.key],
            )
            print(answers)
            assert [status for status, _, _ in answers] == [200] * 3 + [429] * 7
            for _, retry_after, code in answers[3:]:
                assert code == "RATE_LIMITED" and 1 <= int(retry_after) <= 10  # readable: listed origin
            widget(page, ".launcher").click()
            widget(page, ".call").click()
            wait_until(page, f"{HOST}.dataset.state === 'closed' && Boolean({HOST}.dataset.error)", timeout=30_000)
            assert page.evaluate(f"{HOST}.dataset.error") == "rate"
            message = widget(page, ".error").inner_text()
            print(message)
            assert message.startswith("Too many calls were started just now. Please try again in ")
            screenshot(page, "widget-rate-limited")
            assert page.evaluate("window.__cspViolations") == []
