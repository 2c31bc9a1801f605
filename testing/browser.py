"""Chromium (Debian's package, driven by Playwright) with a microphone file, against a real server: the
browser tests of the realtime demo and dashboard pages.

`page` is a fresh page whose fake microphone plays `microphone_wav` (the caller's SENTENCE, then SENTENCE
again over the agent's answer; or, parametrized, the sentences it is given), with
window.__cspViolations recording what the page's Content-Security-Policy refused (WATCH_VIOLATIONS). A
test module uses them by importing `page_fixture` and `microphone_wav_fixture` (registered under the
short names).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pytest

from testing.clients import VoiceClient, is_type
from testing.daphne import DaphneServer
from testing.dashboard import STAFF_PASSWORD
from testing.voice import OUT_RATE, record_voice_24k

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SENTENCE = "I would like to book a table for four people tomorrow evening."
# Records the page's Content-Security-Policy violations in window.__cspViolations (an init script).
WATCH_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push(`${e.violatedDirective} blocked ${e.blockedURI || "inline"} (${e.sourceFile}:${e.lineNumber})`);
});
"""
# Records in window.__timeline when the microphone opened (its file starts playing then), each message the
# server sent but audio, and every 5 s of microphone audio sent, at the time of day in UTC (an init script):
# printed after a conversation test beside the agent log, so that a failure shows what happened when.
WATCH_TIMELINE = """
window.__timeline = [];
const __mark = (what) => window.__timeline.push(`${new Date().toISOString().slice(11, 23)} ${what}`);
if (navigator.mediaDevices) {
  const openMicrophone = navigator.mediaDevices.getUserMedia.bind(navigator.mediaDevices);
  navigator.mediaDevices.getUserMedia = async (constraints) => {
    const stream = await openMicrophone(constraints);
    __mark("microphone open");
    return stream;
  };
}
const NativeSocket = window.WebSocket;
window.WebSocket = class extends NativeSocket {
  constructor(...args) {
    super(...args);
    this.addEventListener("message", (event) => {
      if (typeof event.data === "string" && !event.data.includes('"output_audio"')) __mark(event.data.slice(0, 160));
    });
    this.audioFrames = 0;
  }
  send(data) {
    // Every 5 s of microphone audio sent (250 frames of 20 ms): a browser that keeps up sends them 5 s apart.
    if (typeof data === "string" && data.startsWith('{"type":"input_audio"') && ++this.audioFrames % 250 === 0) {
      __mark(`sent ${this.audioFrames / 50} s of microphone audio`);
    }
    super.send(data);
  }
};
"""
MIC_RATE = 48000
# The microphone file: silence while the disclosure and greeting play, the sentence, a pause, and the
# sentence again, spoken over the agent's answer (a barge-in); then silence. The file plays from the
# moment the browser opens the microphone, whatever the machine's load, while the agent's timing depends
# on it. The lead: the session's start and the greeting (about 7.5 s of speech) took 7.6 to 8.6 s
# beside a CPU hog (a longer lead changes what the recognizer makes of the first sentence: the browser's
# automatic gain rises in the silence). The pause: the caller's audio may be processed seconds late on
# a busy machine, but all of it equally late; what counts is that the answer has started and played
# REALTIME_CONTINUE_TURN_MS (after which the caller's words are a barge-in, not more of the same turn)
# within the pause, up to 4 s after the turn ended, with a long answer (about 8 s: see
# realtime/tests/test_browser_e2e.py) still playing when the caller speaks again.
LEAD_SECONDS = 11.0
PAUSE_SECONDS = 4.5
TAIL_SECONDS = 12.0
# Between the sentences of a caller parametrized with several: time for the agent to answer the first in full.
REPEAT_PAUSE_SECONDS = 16.0


def playwright_or_skip() -> Any:
    """Playwright's sync_playwright, or a skip when Playwright or Chromium is missing."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover - requirements-dev.txt pins it
        pytest.skip("playwright is not installed (requirements-dev.txt)")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip("chromium is not installed (make setup installs it as root; .ci/run does)")
    return sync_playwright


# WebRTC on this machine only: loopback among Chromium's ICE candidates (it leaves it out by default), and
# its real addresses rather than mDNS names, which it would announce on the network.
WEBRTC_LOOPBACK = ("--allow-loopback-in-peer-connection", "--disable-features=WebRtcHideLocalIpsWithMdns")


def launch(playwright: Any, *args: str) -> Any:
    """Debian's Chromium, headless, with `args` added to what every browser test needs."""
    return playwright.chromium.launch(
        executable_path=CHROMIUM,
        headless=True,
        args=["--no-sandbox", "--disable-gpu", "--no-first-run", *WEBRTC_LOOPBACK, *args],
    )


def log_in(page: Any, base: str, *, to: str = "/admin/") -> None:
    """Log in to the dashboard at `base` as `staff` (STAFF_PASSWORD) and wait for the page `to`."""
    page.goto(f"{base}/admin/login/?next={quote(to)}")
    page.fill("#id_username", "staff")
    page.fill("#id_password", STAFF_PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{base}{to}")


def _write_wav(path: Path, *parts: np.ndarray) -> Path:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(MIC_RATE)
        out.writeframes(np.concatenate(parts).tobytes())
    return path


def _speech_48k(sentences: tuple[str, ...], folder: Path) -> dict[str, np.ndarray]:
    """The caller's sentences at the microphone's rate, the same audio in every run (`record_voice_24k`:
    speech synthesized in this process would carry random breath noise that the recognizer mishears)."""
    import soxr

    recorded = record_voice_24k(sentences, folder, voice_name="rex")
    return {
        sentence: soxr.resample(np.frombuffer(pcm, dtype="<i2"), OUT_RATE, MIC_RATE).astype("<i2")
        for sentence, pcm in recorded.items()
    }


def _silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * MIC_RATE), dtype="<i2")


@pytest.fixture(name="microphone_wav")
def microphone_wav_fixture(request: Any, tmp_path: Path) -> Path:
    """The caller: SENTENCE, then SENTENCE again over the answer; or, parametrized with a sentence, that
    sentence once; or, parametrized with a tuple of sentences, each after the agent's answer to the one
    before (REPEAT_PAUSE_SECONDS apart), as a caller who asks again when not understood."""
    sentences = getattr(request, "param", None)
    if sentences is None:
        speech = _speech_48k((SENTENCE,), tmp_path)[SENTENCE]
        parts = [_silence(LEAD_SECONDS), speech, _silence(PAUSE_SECONDS), speech, _silence(TAIL_SECONDS)]
    else:
        said = (sentences,) if isinstance(sentences, str) else tuple(sentences)
        speech_of = _speech_48k(tuple(dict.fromkeys(said)), tmp_path)
        parts = [_silence(LEAD_SECONDS)]
        for index, sentence in enumerate(said):
            parts += [_silence(REPEAT_PAUSE_SECONDS)] if index else []
            parts.append(speech_of[sentence])
        parts.append(_silence(TAIL_SECONDS))
    return _write_wav(tmp_path / "caller.wav", *parts)


async def warm_up(server: DaphneServer, agent: Any) -> None:
    """One session first, so that a browser's starts at once (models loaded, the agent's language model
    built)."""
    from realtime import tokens

    token = tokens.issue_token(agent_id=agent.pk, organization_id=agent.organization_id)[0]
    async with VoiceClient(f"{server.ws_url}/ws/agents/{agent.pk}/realtime?token={quote(token, safe='')}") as client:
        await client.wait_for(is_type("session.started"), timeout=90)
        await client.send({"type": "stop"})
        await client.wait_closed()


@pytest.fixture(name="page")
def page_fixture(microphone_wav: Path, request: Any) -> Iterator[Any]:
    sync_playwright = playwright_or_skip()
    with sync_playwright() as playwright:
        browser = launch(
            playwright,
            "--use-fake-ui-for-media-stream",
            "--use-fake-device-for-media-stream",
            f"--use-file-for-fake-audio-capture={microphone_wav}%noloop",
            "--autoplay-policy=no-user-gesture-required",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        )
        context = browser.new_context(viewport={"width": 1200, "height": 900})
        context.add_init_script(WATCH_VIOLATIONS)  # window.__cspViolations: what the page's CSP refused
        context.add_init_script(WATCH_TIMELINE)  # window.__timeline: the microphone and the server's messages
        opened = context.new_page()
        console: list[str] = []
        opened.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
        opened.on("pageerror", lambda error: console.append(f"pageerror: {error}"))
        opened.on("response", lambda r: console.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
        try:
            yield opened
        finally:
            if console:
                print("browser console:\n" + "\n".join(console[-50:]))
            with contextlib.suppress(Exception):  # the page may be gone
                print("timeline:\n" + "\n".join(opened.evaluate("window.__timeline || []")))
            browser.close()


def log_lines(page: Any) -> list[dict[str, str]]:
    return page.eval_on_selector_all(
        '#talk-panel [data-role="log"] li', "items => items.map(li => ({kind: li.className, text: li.textContent}))"
    )


def wait_until(page: Any, expression: str, *, arg: Any = None, timeout: float = 30_000) -> None:
    """Until `expression` (a JavaScript expression or function of `arg`) is true on the page.

    Not Playwright's wait_for_function: it builds its predicate with `new Function`, which the pages'
    Content-Security-Policy (no 'unsafe-eval') refuses; page.evaluate goes through the DevTools protocol."""
    deadline = time.monotonic() + timeout / 1000
    while not page.evaluate(expression, arg):
        if time.monotonic() > deadline:
            raise TimeoutError(f"not true within {timeout / 1000:g} s: {expression}")
        page.wait_for_timeout(100)
