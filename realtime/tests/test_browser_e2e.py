"""The browser client in a real browser: headless Chromium (Debian's package, driven by Playwright)
against a real Daphne server on the test database, with eSpeak NG speech as the microphone.

The demo page: greeting, the caller's words, the agent's answer, and a barge-in whose `clear` empties
the playback queue. The dashboard: a staff login, the agent page's "Talk to this agent" panel, and
the call record reached through the call id link. On both, the agent's words show while it speaks them,
with a speaking indicator. With the speech-to-speech engine (a scripted provider): the same, and a tool
that fails, shown with its reason. Screenshots land in var/test-artifacts/."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.contrib.auth import get_user_model

from calls.models import AgentLog, Call
from testing.agents import AVA_GREETING, ava_agent, olive
from testing.agents import DISCLOSURE as OLIVE_DISCLOSURE
from testing.agents import GREETING as OLIVE_GREETING
from testing.browser import (  # noqa: F401 - the fixtures: Chromium with a microphone file
    SENTENCE,
    log_in,
    log_lines,
    microphone_wav_fixture,
    page_fixture,
    wait_until,
    warm_up,
)
from testing.daphne import REPO, DaphneServer, in_thread, start_test_server, stop_test_server
from testing.dashboard import STAFF_PASSWORD
from testing.speech_to_speech_provider import CallTool, ProviderServer, Say
from testing.webhooks import LoopbackReceiver, Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ARTIFACTS = REPO / "var" / "test-artifacts"
GREETING = AVA_GREETING
# Ava answers what she does from the first sentence: "I take table reservations for lunch ... menu. What
# would you like to do?", about 8 s of speech, which the caller's second sentence cuts (testing/browser.py).
INSTRUCTIONS = (
    "You take table reservations for lunch and dinner at the Acme restaurant and answer questions about its "
    "menu. Callers book a table for a number of people, for a date and a time, for lunch or dinner."
)
REAL_PERSON = "Can I speak to a real person please?"
HANDOFF = "+15557654321"


@pytest.fixture
def ava(owner: Any, make_agent: Any) -> Any:
    return ava_agent(owner, make_agent, instructions=INSTRUCTIONS)


@contextmanager
def _daphne(ava: Any, tmp_path: Path, **extra: str) -> Iterator[DaphneServer]:
    """A server on the test database whose demo organization is Ava's; `extra` adds settings."""
    env = {"DEMO_PAGES": "true", "DEMO_ORGANIZATION_ID": str(ava.organization_id), **extra}
    started = start_test_server(tmp_path, "daphne", env)
    # One session first, so that the browser's starts at once (models loaded, Ava's language model
    # built): the microphone file starts playing when the browser opens the microphone, not when the
    # session starts, and the caller should speak after the greeting.
    try:
        asyncio.run(warm_up(started, ava))
        yield started
    finally:
        stop_test_server(started)
        print_agent_log(ava.organization_id)
    print(f"server log: {started.log_path}")


def print_agent_log(organization_id: Any) -> None:
    """The agent log of the organization's sessions (the warm-up's and the browser's), as the server
    wrote it: what to read when a conversation test fails, with the page's timeline."""
    rows = in_thread(
        lambda: list(
            AgentLog.objects.filter(organization_id=organization_id)
            .order_by("timestamp", "sequence")
            .values_list("timestamp", "session_id", "severity", "content")
        )
    )
    print("agent log:")
    for timestamp, session, severity, content in rows:
        print(f"{timestamp:%H:%M:%S.%f}"[:-3], session, severity, json.dumps(content)[:300])


@pytest.fixture
def server(ava: Any, tmp_path: Path, realtime_settings: Any) -> Iterator[DaphneServer]:
    with _daphne(ava, tmp_path) as started:
        yield started


@pytest.fixture
def provider() -> Iterator[ProviderServer]:
    with ProviderServer(speech=True) as scripted:
        yield scripted


@pytest.fixture
def failing_hook() -> Iterator[LoopbackReceiver]:
    with LoopbackReceiver(Reply(status=500, json={"detail": "database down"})) as receiver:
        yield receiver


@pytest.fixture
def s2s_server(ava: Any, tmp_path: Path, realtime_settings: Any, provider: ProviderServer) -> Iterator[DaphneServer]:
    """A server whose voice engine is the scripted speech-to-speech provider."""
    settings = {
        "VOICE_ENGINE": "speech-to-speech",
        "REALTIME_PROVIDER_URL": provider.url,
        "REALTIME_PROVIDER_MODEL": "gpt-realtime-browser",
        "OUTBOUND_ALLOWED_NETWORKS": "127.0.0.0/8",
    }
    with _daphne(ava, tmp_path, **settings) as started:
        yield started


def screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    return path


def speaking_now(page: Any, timeout: float = 30_000) -> dict[str, Any]:
    """The panel at the first moment it shows the agent speaking, read at that one instant: the live
    line's words, whether the speaking indicator is visible, and the log's final agent lines then."""
    deadline = time.monotonic() + timeout / 1000
    while True:
        seen = page.evaluate(
            """() => {
              const panel = document.getElementById("talk-panel");
              const caption = panel.querySelector('[data-role="log"] li.talk-live [data-role="caption"]');
              if (!caption || panel.dataset.speaking !== "true") return null;
              const indicator = panel.querySelector('[data-role="speaking"]');
              const lines = [...panel.querySelectorAll('[data-role="log"] li')];
              return {
                caption: caption.textContent,
                line: caption.parentElement.textContent,
                indicator: indicator.checkVisibility() ? indicator.textContent.trim() : null,
                clientSpeaking: panel.talk.client.speaking,
                finalAgentLines: lines.filter((li) => li.className === "talk-assistant").length,
              };
            }"""
        )
        if seen:
            return seen
        if time.monotonic() > deadline:
            raise TimeoutError(f"the panel did not show the agent speaking within {timeout / 1000:g} s")
        page.wait_for_timeout(50)


def assert_the_greeting_shows_as_it_is_spoken(page: Any, first_sentence: str, name: str) -> None:
    """While the opening plays, its first sentence is on the panel with the speaking indicator, before
    its transcript; once it has played, the indicator goes."""
    seen = speaking_now(page)
    print(f"while the agent speaks: {seen}")
    assert seen["caption"].startswith(first_sentence) and seen["line"].startswith("Agent: ")
    assert seen["indicator"] == "Agent speaking" and seen["clientSpeaking"] is True
    assert seen["finalAgentLines"] == 0  # its transcript has not come: the agent is still speaking
    screenshot(page, name)
    wait_until(page, 'document.getElementById("talk-panel").dataset.speaking === "false"', timeout=30_000)
    assert not page.is_visible('#talk-panel [data-role="speaking"]')


def staff_login(page: Any, server: DaphneServer, agent: Any) -> None:
    """Log in as a new superuser and open the agent's dashboard page."""
    in_thread(lambda: get_user_model().objects.create_superuser("staff", "staff@example.com", STAFF_PASSWORD))
    # The socket, whose messages these tests read (test_widget_browser.py talks over WebRTC).
    log_in(page, server.http_url, to=f"/admin/agents/agent/{agent.pk}/change/?transport=websocket")
    assert "Talk to this agent" in page.inner_text("#talk-panel h2")
    assert "va_" not in page.content()


def wait_for_conversation(page: Any, *, users: int, clears: int, timeout_ms: int = 90_000) -> None:
    """Until the panel shows the greeting, `users` caller turns, an agent answer after the last one, and
    `clears` barge-ins."""
    wait_until(
        page,
        """([users, clears]) => {
          const panel = document.getElementById("talk-panel");
          const items = [...panel.querySelectorAll('[data-role="log"] li')].map((li) => li.className);
          const last = items.lastIndexOf("talk-user");
          return items[0] === "talk-assistant" && items.filter((kind) => kind === "talk-user").length >= users
            && items.slice(last).includes("talk-assistant") && panel.talk.clears.length >= clears;
        }""",
        arg=[users, clears],
        timeout=timeout_ms,
    )


def stop_call(page: Any) -> None:
    page.click('#talk-panel [data-role="toggle"]')
    wait_until(page, 'document.getElementById("talk-panel").dataset.state === "closed"', timeout=15_000)


def speech_16k() -> np.ndarray:
    import soxr

    from realtime.engine.speech.espeak import synthesize

    speech = np.frombuffer(synthesize(SENTENCE, language="en-US", voice_name="rex"), dtype="<i2")
    return soxr.resample(speech, 24000, 16000)


def envelope_match(signal: np.ndarray, reference: np.ndarray, frame: int = 320) -> float:
    """How well the loudness contour (log RMS per 20 ms at 16 kHz) of `reference` matches the best stretch
    of `signal` (Pearson correlation, 1 at best). Unlike the waveform, the contour survives the browser's
    echo canceller, noise suppressor and gain control; audio at a wrong rate or with gaps would not match."""

    def contour(samples: np.ndarray) -> np.ndarray:
        usable = samples[: len(samples) // frame * frame].astype(np.float64).reshape(-1, frame)
        return np.log10(np.sqrt((usable**2).mean(axis=1)) + 1.0)

    whole, part = contour(signal), contour(reference)
    best = -1.0
    for lag in range(len(whole) - len(part) + 1):
        stretch = whole[lag : lag + len(part)]
        if stretch.std() > 0:
            best = max(best, float(np.corrcoef(stretch, part)[0, 1]))
    return best


def test_the_demo_page_talks_with_an_agent_and_a_barge_in_empties_the_playback_queue(server, ava, page):
    page.goto(f"{server.http_url}/demo/?transport=websocket")  # the socket: its messages are read below
    assert page.is_checked(f"#agent-{ava.pk}")
    button = page.locator('#talk-panel [data-role="toggle"]')
    assert button.inner_text() == "Start conversation"
    sent: list[str] = []
    page.on("websocket", lambda socket: socket.on("framesent", lambda payload: sent.append(payload)))
    started = time.monotonic()
    button.click()
    wait_until(page, 'document.getElementById("talk-panel").dataset.state === "live"', timeout=60_000)
    print(f"live {time.monotonic() - started:.1f} s after the click")
    assert button.inner_text() == "Stop"
    call_id = page.get_attribute("#talk-panel", "data-call-id")
    assert call_id and call_id in page.inner_text('#talk-panel [data-role="call"]')
    assert_the_greeting_shows_as_it_is_spoken(page, "Just so you know, you are speaking with an AI", "demo-speaking")

    # The caller's sentence, the answer, the sentence again over the answer (a barge-in), its answer.
    wait_for_conversation(page, users=2, clears=1)
    lines = log_lines(page)
    assert lines[0]["text"] == f"Agent: Just so you know, you are speaking with an AI, not a person. {GREETING}"
    heard = next(line["text"] for line in lines if line["kind"] == "talk-user")
    # What the recognizer makes of the speech after the browser's echo canceller, noise suppressor and
    # automatic gain (which lifts eSpeak's peaks to full scale) varies: only that something was heard
    # is asserted here. The audio path itself is exact: see the Node tests of the resampler.
    assert len(heard) > len("You: "), heard
    # The barge-in: the agent's queued audio was dropped at once, and the queue was empty right after.
    clears = page.evaluate('document.getElementById("talk-panel").talk.clears')
    assert clears[0]["droppedSamples"] > 0 and clears[0]["queuedAfter"] == 0, clears
    kinds = [line["kind"] for line in lines]
    first_user = kinds.index("talk-user")
    second_user = kinds.index("talk-user", first_user + 1)
    assert "talk-clear" in kinds[first_user:second_user], kinds  # the first answer was cut
    assert kinds[-1] == "talk-assistant" and len(lines[-1]["text"]) > len("Agent: ")
    # The microphone meter saw speech.
    assert page.evaluate('document.getElementById("talk-panel").talk.maxLevel') > 0.01
    print(f"conversation with a barge-in after {time.monotonic() - started:.1f} s: {json.dumps(lines, indent=1)}")
    screenshot(page, "demo-page")

    stop_call(page)
    assert button.inner_text() == "Start again"
    assert "close code 1000" in page.inner_text('#talk-panel [data-role="status"]')
    # What the browser sent: 20 ms input_audio chunks of 16 kHz PCM16 that carry the caller's speech,
    # then stop.
    messages = [json.loads(payload) for payload in sent]
    assert messages[-1] == {"type": "stop"}
    chunks = [base64.b64decode(m["audio"]) for m in messages[:-1] if m["type"] == "input_audio"]
    assert len(chunks) == len(messages) - 1 and {len(chunk) for chunk in chunks} == {640}
    match = envelope_match(np.frombuffer(b"".join(chunks), dtype="<i2"), speech_16k())
    print(f"the sent audio's loudness contour matches the sentence's: {match:.2f}")
    assert match > 0.7  # another sentence, or this one at a wrong sample rate: about 0.2

    call = in_thread(lambda: Call.objects.get(pk=call_id))
    assert call.status == "completed" and call.agent_id == ava.pk
    messages = in_thread(lambda: list(call.messages.order_by("occurred_at", "sequence").values_list("role", "content")))
    assert messages[0] == ("assistant", lines[0]["text"][len("Agent: ") :])
    # The caller's words as the browser showed them; when the sentence said again arrived before the first
    # answer was kept (a busy machine), the engine took it as the same turn's continuation and kept one
    # caller message holding both.
    assert messages[1][0] == "user" and messages[1][1].startswith(heard[len("You: ") :]), messages[1]
    assert messages[2][0] == "assistant"


@pytest.mark.parametrize("microphone_wav", [REAL_PERSON], indirect=True)
def test_staff_talk_to_an_agent_from_its_dashboard_page_and_open_the_call_record(server, ava, page, microphone_wav):
    def prepare() -> None:
        ava.handoff_phone_number = HANDOFF
        ava.save(update_fields=["handoff_phone_number"])

    in_thread(prepare)
    staff_login(page, server, ava)

    page.click('#talk-panel [data-role="toggle"]')
    wait_until(page, 'document.getElementById("talk-panel").dataset.state === "live"', timeout=60_000)
    assert_the_greeting_shows_as_it_is_spoken(
        page, "Just so you know, you are speaking with an AI", "dashboard-speaking"
    )
    # The caller asks for a person: the agent calls transfer_call, says so, and the server ends the call.
    wait_until(page, 'document.getElementById("talk-panel").dataset.state === "closed"', timeout=90_000)
    lines = log_lines(page)
    print(json.dumps(lines, indent=1))
    assert lines[0]["text"] == f"Agent: Just so you know, you are speaking with an AI, not a person. {GREETING}"
    # With tool events (the panel asks for them), the lines carry the arguments, the duration and the result.
    tool_lines = [line["text"] for line in lines if line["kind"] == "talk-tool"]
    assert len(tool_lines) == 2, tool_lines
    assert tool_lines[0].startswith("Tool transfer_call started with {")
    assert re.fullmatch(r"Tool transfer_call finished in \d+ ms: .+", tool_lines[1]), tool_lines[1]
    assert lines[-1]["text"] == f"Transfer to {HANDOFF}"
    assert "close code 1000" in page.inner_text('#talk-panel [data-role="status"]')
    assert page.inner_text('#talk-panel [data-role="toggle"]') == "Start again"
    screenshot(page, "dashboard-agent-talk")

    call_id = page.get_attribute("#talk-panel", "data-call-id")
    page.click(f'#talk-panel [data-role="call"] a:has-text("{call_id}")')
    page.wait_for_url(f"**/admin/calls/call/{call_id}/change/")
    body = page.inner_text("body")
    assert call_id in body and "Ava" in body and f"Call transferred to {HANDOFF}" in body
    screenshot(page, "dashboard-call-record")
    assert in_thread(lambda: Call.objects.get(pk=call_id).status) == "completed"


def test_the_dashboard_panel_shows_a_speech_to_speech_agent_s_words_as_it_speaks_and_a_failed_tool(
    s2s_server, page, provider, failing_hook, owner, make_agent
):
    olive_agent = in_thread(lambda: olive(owner, make_agent, failing_hook))
    staff_login(page, s2s_server, olive_agent)
    page.click('#talk-panel [data-role="toggle"]')
    wait_until(page, 'document.getElementById("talk-panel").dataset.state === "live"', timeout=60_000)
    assert_the_greeting_shows_as_it_is_spoken(page, OLIVE_DISCLOSURE, "dashboard-s2s-speaking")
    assert log_lines(page)[0] == {"kind": "talk-assistant", "text": f"Agent: {OLIVE_DISCLOSURE} {OLIVE_GREETING}"}

    # The caller asks about an order; the tool's server fails; the panel says so, then the apology plays.
    sorry = "Sorry, I cannot look that order up right now. Please try again later."
    provider.script(Say(sorry, speech=True))
    connection = provider.last
    call = CallTool("check_order_status", {"order_number": "3561"}, call_id="call_browser_fail")
    provider.run_sync(lambda: connection.caller_turn("Where is order 3561?", call))
    seen = speaking_now(page)
    assert seen["caption"] == "Sorry, I cannot look that order up right now." and seen["indicator"]
    wait_until(page, 'document.getElementById("talk-panel").dataset.speaking === "false"', timeout=30_000)
    lines = log_lines(page)
    print(json.dumps(lines, indent=1))
    # The caller's late transcript and the tool's start may come in either order; then the failure
    # with its reason (the agent log's), then the answer's line, which was the live line.
    assert sorted(line["text"] for line in lines[1:3]) == [
        'Tool check_order_status started with {"order_number":"3561"}',
        "You: Where is order 3561?",
    ]
    assert lines[3]["kind"] == "talk-tool talk-failed"
    assert re.fullmatch(r"Tool check_order_status failed in \d+ ms: The tool answered HTTP 500", lines[3]["text"])
    assert lines[4:] == [{"kind": "talk-assistant", "text": f"Agent: {sorry}"}]
    screenshot(page, "dashboard-s2s-failed-tool")
    stop_call(page)


# Counts the page's microphone requests in window.__microphones (an init script).
COUNT_MICROPHONES = """
window.__microphones = 0;
const getUserMedia = navigator.mediaDevices.getUserMedia.bind(navigator.mediaDevices);
navigator.mediaDevices.getUserMedia = (constraints) => {
  window.__microphones += 1;
  return getUserMedia(constraints);
};
"""


def session_requests(page: Any) -> list[Any]:
    """The bodies of the page's session requests (POST .../session), as JSON, as they are made."""
    bodies: list[Any] = []

    def seen(request: Any) -> None:
        if request.method == "POST" and request.url.endswith("/session"):
            bodies.append(json.loads(request.post_data or "null"))

    page.on("request", seen)
    return bodies


def frames_sent(page: Any) -> list[dict[str, Any]]:
    """What the page sends on its sockets, as JSON messages."""
    sent: list[dict[str, Any]] = []
    page.on("websocket", lambda socket: socket.on("framesent", lambda payload: sent.append(json.loads(payload))))
    return sent


def until_seen(page: Any, check: Any, *, what: str, timeout: float = 10.0) -> Any:
    """The first truthy `check()` of what Playwright's page events recorded (they are delivered while the
    page is being waited on); AssertionError past `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        page.wait_for_timeout(50)
    return result


def typed_lines(page: Any) -> list[dict[str, str]]:
    return [line for line in log_lines(page) if "talk-typed" in line["kind"]]


def test_the_demo_page_sends_a_typed_turn_in_a_voice_session(server, ava, page):
    """The text box takes a typed turn during a voice conversation: it goes out as input_text beside the
    microphone's audio and shows in the log at once, as a pending line that the server's `user`
    transcript of the same words confirms (part T's server side: see the report of issue 22, part D)."""
    bodies = session_requests(page)
    sent = frames_sent(page)
    page.goto(f"{server.http_url}/demo/?transport=websocket")  # the socket: its messages are read below
    text_box = page.locator('#talk-panel [data-role="text"]')
    assert text_box.is_visible() and text_box.is_disabled()  # until the conversation is live
    assert page.is_disabled('#talk-panel [data-role="send"]')
    page.click('#talk-panel [data-role="toggle"]')
    wait_until(page, 'document.getElementById("talk-panel").dataset.state === "live"', timeout=60_000)
    assert bodies == [{"modality": "audio", "events": ["tool"]}]
    assert text_box.is_enabled() and page.is_disabled('#talk-panel [data-role="typed-only"]')

    question = "What time do you open tomorrow?"
    text_box.fill(f"  {question} ")
    text_box.press("Enter")
    wait_until(page, 'document.getElementById("talk-panel").talk.typed.length === 1', timeout=5_000)
    # Shown at once (pending), then confirmed by the server's transcript of the typed turn.
    assert [line["text"] for line in typed_lines(page)] == [f"You (typed): {question}"]
    wait_until(page, "!document.querySelector('#talk-panel .talk-pending')", timeout=30_000)
    assert typed_lines(page) == [{"kind": "talk-user talk-typed", "text": f"You (typed): {question}"}]
    assert text_box.input_value() == ""
    wait_until(page, "document.getElementById('talk-panel').talk.client.socket.bufferedAmount === 0", timeout=5_000)
    typed_sent = until_seen(page, lambda: [m for m in sent if m["type"] == "input_text"], what="the input_text frame")
    assert typed_sent == [{"type": "input_text", "text": question}]
    assert any(m["type"] == "input_audio" for m in sent)  # the microphone goes on as before
    screenshot(page, "demo-typed-turn")
    assert page.evaluate("window.__cspViolations") == []
    stop_call(page)
    assert sent[-1] == {"type": "stop"}


def test_staff_start_a_typed_only_conversation_from_the_dashboard_panel(server, ava, page):
    """The "Typed only" switch: a text session (asked for with modality text), no microphone, no audio; Enter
    and Send both send a typed turn and the change form around the panel is not submitted; the tool
    events (tool.call / tool.result, which part T's server sends) fill the tool lines with arguments,
    results and durations, in whichever order they come."""
    page.add_init_script(COUNT_MICROPHONES)
    bodies = session_requests(page)
    sent = frames_sent(page)
    staff_login(page, server, ava)
    agent_page = page.url
    page.check('#talk-panel [data-role="typed-only"]')
    page.click('#talk-panel [data-role="toggle"]')
    wait_until(page, 'document.getElementById("talk-panel").dataset.state === "live"', timeout=60_000)
    assert bodies == [{"modality": "text", "events": ["tool"]}]
    assert page.evaluate("window.__microphones") == 0
    assert page.evaluate(
        """() => {
          const client = document.getElementById("talk-panel").talk.client;
          return [client.modality, client.context, client.stream];
        }"""
    ) == ["text", None, None]
    assert not page.is_visible('#talk-panel [data-role="mic"]')
    assert page.inner_text('#talk-panel [data-role="status"]') == "Live: type a message."
    assert page.evaluate("document.activeElement.dataset.role") == "text"

    page.keyboard.type("Do you have a table for four tonight?")
    page.keyboard.press("Enter")
    page.fill('#talk-panel [data-role="text"]', "At eight, please.")
    page.click('#talk-panel [data-role="send"]')
    wait_until(page, 'document.getElementById("talk-panel").talk.typed.length === 2', timeout=5_000)
    assert page.url == agent_page and page.get_attribute("#talk-panel", "data-state") == "live"  # not submitted
    assert [line["text"] for line in typed_lines(page)] == [
        "You (typed): Do you have a table for four tonight?",
        "You (typed): At eight, please.",
    ]
    # The server's `user` transcript of each typed turn confirms its line instead of adding one, and the
    # agent answers each in text (no audio in a typed session).
    wait_until(page, "!document.querySelector('#talk-panel .talk-pending')", timeout=30_000)
    assert typed_lines(page) == [
        {"kind": "talk-user talk-typed", "text": "You (typed): Do you have a table for four tonight?"},
        {"kind": "talk-user talk-typed", "text": "You (typed): At eight, please."},
    ]
    assert not [line for line in log_lines(page) if line["kind"] == "talk-user"]
    wait_until(
        page,
        "document.querySelectorAll('#talk-panel .talk-assistant').length >= 3",  # the greeting and two answers
        timeout=30_000,
    )

    # The tool lines: each call's arguments join its "started" line, its result and duration its
    # "finished" line (a failed one keeps its reason), whatever the order of the messages.
    page.evaluate(
        """() => {
          const client = document.getElementById("talk-panel").talk.client;
          const deliver = (message) => client.onMessage(JSON.stringify(message));
          deliver({type: "tool.started", name: "lookup_order"});
          deliver({type: "tool.call", id: "c1", name: "lookup_order", arguments: {order_number: "3561"}});
          deliver({type: "tool.result", id: "c1", name: "lookup_order", result: {status: "shipped"},
                   durationMs: 42, status: "success"});
          deliver({type: "tool.finished", name: "lookup_order", status: "success"});
          deliver({type: "tool.call", id: "c2", name: "check_order_status", arguments: {order_number: "9"}});
          deliver({type: "tool.started", name: "check_order_status"});
          deliver({type: "tool.result", id: "c2", name: "check_order_status", result: "HTTP 500",
                   durationMs: 7, status: "error"});
          deliver({type: "tool.finished", name: "check_order_status", status: "error",
                   error: "The tool answered HTTP 500"});
        }"""
    )
    tools = [line for line in log_lines(page) if line["kind"].startswith("talk-tool")]
    assert tools == [
        {"kind": "talk-tool", "text": 'Tool lookup_order started with {"order_number":"3561"}'},
        {"kind": "talk-tool", "text": 'Tool lookup_order finished in 42 ms: {"status":"shipped"}'},
        {"kind": "talk-tool", "text": 'Tool check_order_status started with {"order_number":"9"}'},
        {
            "kind": "talk-tool talk-failed",
            "text": "Tool check_order_status failed in 7 ms: The tool answered HTTP 500",
        },
    ]
    events = page.evaluate('document.getElementById("talk-panel").talk.toolEvents')
    assert [(event["type"], event["id"]) for event in events] == [
        ("tool.call", "c1"),
        ("tool.result", "c1"),
        ("tool.call", "c2"),
        ("tool.result", "c2"),
    ]
    screenshot(page, "dashboard-typed-only")
    assert page.evaluate("window.__cspViolations") == []
    stop_call(page)
    assert page.evaluate("window.__microphones") == 0
    assert not [m for m in sent if m["type"] == "input_audio"]
    assert [m for m in sent if m["type"] != "input_audio"] == [
        {"type": "input_text", "text": "Do you have a table for four tonight?"},
        {"type": "input_text", "text": "At eight, please."},
        {"type": "stop"},
    ]
