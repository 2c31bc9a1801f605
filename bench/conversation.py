"""Conversation bench (not a test): scripted callers who talk the way people talk, over real browser
sockets of real Daphne servers on the cascade voice engine (offline), in real time.

The callers are eSpeak NG voices, recorded once per run (testing/voice.py record_voice: each sentence
in a fresh, seeded process) and trimmed of their silence, so that the caller's first and last words are
the first and last chunks the bench sends. Every session keeps its microphone open (20 ms chunks of
silence between utterances, as the browser client does).

The agent (a webhook agent, made the way bench/voice_latency.py makes its agent) has `transfer_call`
(a handoff number), `end_call`, a webhook tool `track_parcel` answered by a loopback receiver in this
process that counts requests per call (testing/webhooks.py LoopbackReceiver), and a knowledge document
uploaded through POST /public/v1/agents/{id}/knowledge, whose opening hours are the long answer (about
9 s spoken) the interruption scripts talk over. The paused sentences talk to bench/voice_latency.py's
reservation agent, without tools, transfer or end of call (no sentence ends its session).

Scripts (one session each; one session runs them one after the other, 20 sessions run them at once,
staggered):
  - actions: two-sentence requests (each sentence recorded on its own, SENTENCE_GAP_MS between them)
    for a transfer, for the end of the call, for the tool, and a knowledge question; an action is lost
    when the client's message for it (`transfer`; the socket closing; a successful `tool.finished` of
    track_parcel; an answer from the document that is not cut) does not arrive within 10 s of the
    caller's last word;
  - probes: a question whose answer is long, then 1.5 s into the answer a backchannel ("Okay.",
    "Mm-hmm.", "Yeah.") or a 300 ms noise burst: a false interruption cut the agent when a `clear`
    arrives between the probe's start and 2 s after its end; then "Stop. What time do you open?" over
    another long answer: missed when no `clear` arrives within 500 ms of its first word;
  - paused sentences: the ten sentences with pauses of bench/voice_latency.py's `pauses` scenario, in
    four voices and pause lengths; a sentence is split when it came back as two `user` transcripts
    with agent audio between them (the agent answered the first part; a continuation the engine
    added to the same turn before answering is not a split).

Figures (each next to its target): actions lost, tool requests doubled (requests the receiver got
beyond one per caller request), unanswered turns (caller turns, probes aside, after whose last word
no agent audio, transcript or action comes within 10 s), false interruptions that cut the agent,
paused sentences split, real interruptions missed, and the caller's last word to the first answer
audio (p50, p95; turns where the agent was still speaking when the caller stopped are left out). All
times are this process's loop clock, from the audio it sends to the messages it receives.

Usage: .venv/bin/python bench/conversation.py [--sessions 1,20] [--quick] [--verbose] [--only TEXT]
(BENCH_TIMELINE=1 with --verbose: every session's timeline). A JSON line with every figure ends the
output. docs/guides/conversation.md ("The conversation bench") says what each figure means.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.api_load import bench_organization  # noqa: E402 - after the repository root is put on sys.path
from bench.voice_latency import AGENT as PAUSES_AGENT  # noqa: E402 - after the repository root is put on sys.path
from bench.voice_latency import PAUSED_SENTENCES, turn_windows  # noqa: E402 - after the repository root is put on sys.path
from testing.figures import percentile  # noqa: E402 - after the repository root is put on sys.path
from testing.stores import bench_database_url  # noqa: E402 - after the repository root is put on sys.path

SECRET = "conversation-bench-secret-0123456789abcdef"
HANDOFF = "+15557654321"
ACTION_SECONDS = 10.0  # an action, or any answer to a turn, within this long after the caller's last word
REAL_CUT_SECONDS = 0.5  # a real interruption cuts the agent within this long after its first word
PROBE_AFTER_S = 1.5  # a probe starts this long into the agent's answer
FALSE_CUT_WINDOW_S = 2.0  # a clear this long after a probe's end still counts as its cut

# Two-sentence requests: each sentence recorded on its own, SENTENCE_GAP_MS of silence between them (a
# caller's breath between sentences; long enough for the quick end of turn to take the first alone).
SENTENCE_GAP_MS = 700
TRANSFER = ("Please transfer me to a human.", "I want to speak to a real person.")
FAREWELL = ("No, that's all.", "Thank you very much.")
TOOL_REQUEST = ("Where is my parcel?", "Please track my parcel delivery for me.")
KNOWLEDGE = ("What time do you open?", "I want to visit the shop.")
KNOWLEDGE_WORD = "nine"  # in the passage the knowledge answers speak
LONG_QUESTION = "What time do you open?"
REAL_INTERRUPTION = "Stop. What time do you open?"
BACKCHANNELS = ("Okay.", "Mm-hmm.", "Yeah.")
NOISE = "(noise)"
VOICES = (("eve", 400), ("rex", 650), ("ara", 500), ("leo", 650))  # paused sentences: voice, pause ms

AGENT = {
    "name": "Ava",
    "identity": "Ava, the assistant of the Acme bike shop",
    "instructions": (
        "Help callers with their parcels, returns and the opening hours of the shop. When the caller says "
        "goodbye, say goodbye and end the call."
    ),
}
TOOL = {
    "name": "track_parcel",
    "description": "Track the delivery of the caller's parcel and tell where the parcel is",
    "parameter_schema": {"type": "object", "properties": {}},
}
TOOL_ANSWER = {"status": "Your parcel is with the courier and arrives tomorrow before noon."}
DOCUMENT = """# Acme bike shop

## Return policy
Our return policy is simple: you can return any unused item within forty five days of delivery, as long as
it is in its original packaging with every label still attached, and we refund the full price to the card
you paid with within seven days of the parcel reaching our warehouse, or give you store credit at once if
you prefer it.

## Opening hours
The shop is open from nine in the morning to six in the evening from Monday to Friday, from ten in the
morning to four in the afternoon on Saturday, and it is closed on Sunday and on public holidays, when you
can still order online at any time of the day or night and collect your order on the next working day.
"""


# --- the agent ---------------------------------------------------------------------------------------
def bench_env() -> dict[str, str]:
    return {
        "LOG_LEVEL": "WARNING",
        "REALTIME_TOKEN_SECRET": SECRET,
        "DATABASE_URL": bench_database_url("conversation", ROOT / "var"),
        "OUTBOUND_ALLOWED_NETWORKS": "127.0.0.0/8",
        "EVENTS_POLL_SECONDS": "0",  # no event delivery: the receiver hears tool calls only
    }


def seed(env: dict[str, str], server_url: str) -> tuple[str, str, str]:
    """Migrate the bench database; an organization with the bench agent (no document yet) and the
    agent of the paused sentences: bench/voice_latency.py's reservation agent (its instructions make
    the recognizer's language model), without tools, transfer or end_call, so that no sentence ends its
    session. Returns both agents' ids and the API key."""
    organization, api_key = bench_organization(env, "Conversation bench")
    from django.utils import timezone

    from agents.models import Agent, AgentTool

    agent = Agent.objects.create(
        organization=organization,
        name=AGENT["name"],
        status="active",
        agent_type="webhook",
        server_url=server_url,
        server_secret="conversation-bench-signing-secret",
        identity=AGENT["identity"],
        instructions=AGENT["instructions"],
        ai_identity_disclosure_template_id="named_agent",
        greeting_type="none",
        handoff_phone_number=HANDOFF,
        updated_at=timezone.now(),
    )
    AgentTool.objects.create(agent=agent, **TOOL)
    listener = Agent.objects.create(
        organization=organization,
        name=PAUSES_AGENT["name"],
        status="active",
        agent_type="static",
        identity=PAUSES_AGENT["identity"],
        instructions=PAUSES_AGENT["instructions"],
        ai_identity_disclosure_template_id="named_agent",
        greeting_type="none",
        end_call_enabled=False,
        updated_at=timezone.now(),
    )
    return str(agent.pk), str(listener.pk), api_key


def upload_document(base_url: str, api_key: str, agent_id: str) -> None:
    """The knowledge document, through the API; returns once it is indexed."""
    from testing.daphne import wait_until_indexed

    headers = {"Authorization": f"Bearer {api_key}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=60) as http:
        response = http.post(f"/public/v1/agents/{agent_id}/knowledge", json={"content": DOCUMENT, "name": "Shop"})
        response.raise_for_status()
        item = wait_until_indexed(
            lambda: http.get(f"/public/v1/agents/{agent_id}/knowledge").json(), response.json()["id"]
        )
    if item["status"] != "ready":
        raise RuntimeError(f"the knowledge document was not indexed: {item}")


class ToolServer:
    """The agent's serverUrl: a loopback receiver answering every tool call at once; requests per call."""

    def __init__(self) -> None:
        from testing.webhooks import LoopbackReceiver, Reply

        self.receiver = LoopbackReceiver(default=Reply(json=TOOL_ANSWER))

    @property
    def url(self) -> str:
        return self.receiver.url("/hook")

    def hits(self, call_id: str) -> int:
        count = 0
        for request in list(self.receiver.requests):
            try:
                message = request.json()["message"]
            except (ValueError, KeyError, TypeError):
                continue
            if message.get("type") == "agent:tool-call" and message.get("call", {}).get("id") == call_id:
                count += message.get("toolCall", {}).get("name") == TOOL["name"]
        return count


# --- the callers' voices -----------------------------------------------------------------------------
def trimmed(pcm16: bytes) -> bytes:
    """Without the recording's silence before and after the words: 60 ms are kept before the first
    loud sample (a soft first consonant) and none after the last."""
    samples = np.frombuffer(pcm16, dtype="<i2")
    loud = np.nonzero(np.abs(samples.astype(np.int32)) > 100)[0]
    return samples[max(0, loud[0] - 960) : loud[-1] + 1].tobytes() if loud.size else b""


def noise_burst(ms: int = 300) -> bytes:
    generator = np.random.default_rng(7)
    return np.clip(generator.normal(0, 3000, 16 * ms), -32768, 32767).astype("<i2").tobytes()


def record_all(paused_voices: int, folder: Path) -> tuple[dict[str, bytes], list[tuple[str, str, bytes]]]:
    """(whole sentences, [(voice, sentence, paused audio)]): every recording made in parallel."""
    from testing.voice import record_voice

    requests = (TRANSFER, FAREWELL, TOOL_REQUEST, KNOWLEDGE)
    whole = (LONG_QUESTION, REAL_INTERRUPTION, *BACKCHANNELS, *(s for request in requests for s in request))
    (folder / "whole").mkdir()
    speech = {s: trimmed(pcm) for s, pcm in record_voice(tuple(dict.fromkeys(whole)), folder / "whole").items()}
    for request in requests:
        speech[" ".join(request)] = (b"\x00\x00" * (16 * SENTENCE_GAP_MS)).join(speech[s] for s in request)
    speech[NOISE] = noise_burst()
    parts = tuple(dict.fromkeys(part for _, sentence in PAUSED_SENTENCES for part in sentence))
    paused = []
    for voice, pause_ms in VOICES[:paused_voices]:
        (folder / voice).mkdir()
        recorded = {p: trimmed(pcm) for p, pcm in record_voice(parts, folder / voice, voice).items()}
        for _, sentence in PAUSED_SENTENCES:
            audio = (b"\x00\x00" * (16 * pause_ms)).join(recorded[part] for part in sentence)
            paused.append((f"{voice}/{pause_ms}ms", " ".join(sentence), audio))
    return speech, paused


# --- one session -------------------------------------------------------------------------------------
CHUNK_S = 0.02
CHUNK_BYTES = 640  # 20 ms of PCM16 at 16 kHz
SILENCE = b"\x00\x00" * 320


@dataclass
class Said:
    what: str
    start: float  # loop time of the first word
    end: float  # of the last word
    probe: bool = False


class Line:
    """A browser session with its microphone always open: a ticker sends a 20 ms chunk every 20 ms,
    from the utterance being said or silence. Keeps every message (audio without its bytes)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.said: list[Said] = []
        self._queue: list[tuple[bytes, asyncio.Future[tuple[float, float]]]] = []
        self._ticker: asyncio.Task[None] | None = None
        self.closed_at: float | None = None

    @property
    def messages(self) -> list[Any]:
        return self.client.messages

    def start(self) -> None:
        self._ticker = asyncio.create_task(self._tick())

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):  # the socket may be gone already
                await self._ticker

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        begin = loop.time()
        index = 0
        current: tuple[bytes, asyncio.Future[tuple[float, float]]] | None = None
        offset, first = 0, 0.0
        while not self.client.closed:
            at = begin + index * CHUNK_S
            delay = at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if current is None and self._queue:
                current, offset, first = self._queue.pop(0), 0, at
            if current is None:
                chunk = SILENCE
            else:
                audio, done = current
                chunk = audio[offset : offset + CHUNK_BYTES]
                offset += CHUNK_BYTES
                if offset >= len(audio):
                    end = at + len(chunk) / 32000
                    loop.call_at(end, lambda d=done, s=first, e=end: d.done() or d.set_result((s, e)))
                    current = None
                chunk = chunk.ljust(CHUNK_BYTES, b"\x00")
            try:
                await self.client.send_audio(chunk)
            except Exception:  # noqa: BLE001 - the socket closed under the microphone
                break
            index += 1
        if self.closed_at is None:
            self.closed_at = loop.time()

    async def say(self, what: str, audio: bytes, *, probe: bool = False) -> Said:
        """Say it (in turn with the microphone's silence); returns once its last word has been said."""
        done: asyncio.Future[tuple[float, float]] = asyncio.get_running_loop().create_future()
        self._queue.append((audio, done))
        assert self._ticker is not None
        await asyncio.wait({done, self._ticker}, timeout=len(audio) / 32000 + 30, return_when=asyncio.FIRST_COMPLETED)
        if not done.done():
            raise ConnectionError(f"the session ended before {what!r} was said")
        start, end = done.result()
        await asyncio.sleep(max(0.0, end - asyncio.get_running_loop().time()))
        said = Said(what, start, end, probe)
        self.said.append(said)
        return said

    def after(self, at: float) -> list[Any]:
        return [item for item in self.messages if item.at > at]

    async def until(self, predicate: Callable[[Any], bool], *, after: float, timeout: float) -> Any | None:
        """The first message after loop time `after` that matches, waiting up to `timeout` s; None."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            for item in self.messages:
                if item.at > after and predicate(item):
                    return item
            if self.client.closed or loop.time() >= deadline:
                return None
            await asyncio.sleep(0.02)

    async def quiet(self, *, after: float, timeout: float = 30.0) -> None:
        """Until the agent has nothing more to say after `after`: no sentence of its is playing and
        no audio came for 0.8 s (or nothing at all came within 4 s), at most `timeout` s."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline and not self.client.closed:
            later = self.after(after)
            speech = [i for i in later if _kind(i) in ("agent_speech", "agent_speech.ended")]
            audio = [i.at for i in later if _kind(i) == "output_audio"]
            speaking = bool(speech) and _kind(speech[-1]) == "agent_speech"
            now = loop.time()
            if not speaking and now - (audio[-1] if audio else after) > 0.8 and (speech or now - after > 4.0):
                return
            await asyncio.sleep(0.05)


def _kind(item: Any) -> str:
    return str(item.message.get("type"))


def _is_assistant(item: Any) -> bool:
    return _kind(item) == "transcript" and item.message.get("role") == "assistant"


def _is_user(item: Any) -> bool:
    return _kind(item) == "transcript" and item.message.get("role") == "user"


def _tool_finished(name: str) -> Callable[[Any], bool]:
    return lambda i: _kind(i) == "tool.finished" and i.message.get("name") == name


@dataclass
class Outcome:
    script: str
    call_id: str = ""
    actions: dict[str, bool] = field(default_factory=dict)  # kind -> lost
    tool_requests: int = 0  # caller requests for the tool
    tool_hits: int = 0
    turns: int = 0
    unanswered: list[str] = field(default_factory=list)
    false_probes: list[tuple[str, bool]] = field(default_factory=list)  # (probe, cut)
    real: list[float | None] = field(default_factory=list)  # ms from the first word to the clear; None
    paused: list[tuple[str, str, bool]] = field(default_factory=list)  # (voice, sentence, split)
    latencies: list[float] = field(default_factory=list)  # ms
    failure: str = ""
    seconds: float = 0.0
    timeline: list[str] = field(default_factory=list)


class Session:
    def __init__(self, line: Line, outcome: Outcome, speech: dict[str, bytes]) -> None:
        self.line = line
        self.outcome = outcome
        self.speech = speech

    async def turn(self, what: str, audio: bytes | None = None) -> Said:
        """A caller turn (evaluate() checks afterwards that it was answered, and how fast)."""
        said = await self.line.say(what, audio if audio is not None else self.speech[what])
        self.outcome.turns += 1
        return said

    async def ask_long(self) -> Any | None:
        """A question whose answer is long; its first audio (None: no answer)."""
        said = await self.turn(LONG_QUESTION)
        return await self.line.until(lambda i: _kind(i) == "output_audio", after=said.end, timeout=ACTION_SECONDS)

    async def false_probe(self, probe: str) -> None:
        first = await self.ask_long()
        if first is None:
            return
        await asyncio.sleep(max(0.0, first.at + PROBE_AFTER_S - asyncio.get_running_loop().time()))
        if any(_kind(i) == "agent_speech.ended" or _is_assistant(i) for i in self.line.after(first.at)):
            self.outcome.failure = self.outcome.failure or "the long answer ended before the probe"
            return
        said = await self.line.say(probe, self.speech[probe], probe=True)
        await asyncio.sleep(FALSE_CUT_WINDOW_S)
        cut = any(
            _kind(i) == "clear" and said.start <= i.at <= said.end + FALSE_CUT_WINDOW_S
            for i in self.line.after(said.start)
        )
        self.outcome.false_probes.append((probe, cut))
        await self.line.quiet(after=said.start)

    async def real_probe(self) -> None:
        first = await self.ask_long()
        if first is None:
            return
        await asyncio.sleep(max(0.0, first.at + PROBE_AFTER_S - asyncio.get_running_loop().time()))
        said = await self.turn(REAL_INTERRUPTION)
        cleared = next((i for i in self.line.after(said.start) if _kind(i) == "clear"), None)
        self.outcome.real.append(None if cleared is None else (cleared.at - said.start) * 1000)
        await self.line.quiet(after=said.end)

    async def action(self, kind: str) -> None:
        loop = asyncio.get_running_loop()
        if kind == "transfer":
            said = await self.turn(" ".join(TRANSFER))
            got = await self.line.until(lambda i: _kind(i) == "transfer", after=said.start, timeout=ACTION_SECONDS)
            self.outcome.actions[kind] = got is None or got.at > said.end + ACTION_SECONDS
        elif kind == "end":
            said = await self.turn(" ".join(FAREWELL))
            deadline = said.end + ACTION_SECONDS
            while not self.line.client.closed and loop.time() < deadline:
                await asyncio.sleep(0.05)
            self.outcome.actions[kind] = not self.line.client.closed
        elif kind == "tool":
            said = await self.turn(" ".join(TOOL_REQUEST))
            self.outcome.tool_requests += 1
            got = await self.line.until(
                lambda i: _tool_finished(TOOL["name"])(i) and i.message.get("status") == "success",
                after=said.start,
                timeout=ACTION_SECONDS,
            )
            self.outcome.actions[kind] = got is None or got.at > said.end + ACTION_SECONDS
            await self.line.quiet(after=said.end)
        elif kind == "knowledge":
            said = await self.turn(" ".join(KNOWLEDGE))
            await self.line.until(
                lambda i: _kind(i) == "agent_speech" and KNOWLEDGE_WORD in str(i.message.get("text")),
                after=said.start,
                timeout=ACTION_SECONDS,
            )
            await self.line.quiet(after=said.end)
            # The answer counts when it starts within the bound and is not cut (one begun while the
            # caller still spoke and cut by the rest of the question does not).
            heard = False
            later = self.line.after(said.start)
            for index, item in enumerate(later):
                if _kind(item) == "agent_speech" and KNOWLEDGE_WORD in str(item.message.get("text")):
                    ended = next((i for i in later[index:] if _kind(i) == "agent_speech.ended"), None)
                    cut = ended is not None and ended.message.get("interrupted")
                    heard = heard or (not cut and item.at <= said.end + ACTION_SECONDS)
            self.outcome.actions[kind] = not heard

    async def paused(self, voice: str, sentence: str, audio: bytes) -> None:
        said = await self.turn(sentence, audio)
        await self.line.quiet(after=said.end, timeout=ACTION_SECONDS)
        window = [i for i in self.line.after(said.start) if _is_user(i) or _kind(i) == "output_audio"]
        users = [n for n, i in enumerate(window) if _is_user(i)]
        split = len(users) > 1 and any(_kind(i) == "output_audio" for i in window[users[0] : users[-1]])
        self.outcome.paused.append((voice, sentence, split))


def evaluate(line: Line, outcome: Outcome) -> None:
    """Unanswered turns and latencies, from what was said and what arrived."""
    closed = line.closed_at
    for said in line.said:
        if said.probe:
            continue
        after = [i for i in line.after(said.end) if i.at <= said.end + ACTION_SECONDS]
        answered = any(
            _kind(i) in ("output_audio", "transfer", "tool.started", "tool.call") or _is_assistant(i) for i in after
        ) or (closed is not None and closed <= said.end + ACTION_SECONDS)
        if not answered:
            outcome.unanswered.append(said.what)
        during = [i for i in line.messages if said.start <= i.at <= said.end]
        playing = False
        for item in during:
            if _kind(item) == "output_audio":
                playing = True
            elif _kind(item) in ("clear", "agent_speech.ended") or _is_assistant(item):
                playing = False
        first = next((i for i in line.after(said.end) if _kind(i) == "output_audio"), None)
        if not playing and first is not None and first.at <= said.end + ACTION_SECONDS:
            outcome.latencies.append((first.at - said.end) * 1000)


def timeline(line: Line, began: float) -> list[str]:
    """What was said and what arrived (audio as runs), in order: BENCH_TIMELINE=1 prints it."""
    events = [(s.start, f"caller says {s.what!r} ({s.end - s.start:.1f} s)") for s in line.said]
    run: float | None = None
    for item in line.messages:
        if _kind(item) == "output_audio":
            if run is None:
                run = item.at
                events.append((item.at, "agent audio starts"))
            continue
        run = None
        rest = {k: v for k, v in item.message.items() if k != "type"}
        events.append((item.at, f"{_kind(item)} {json.dumps(rest)[:120]}"))
    if line.closed_at is not None:
        events.append((line.closed_at, "socket closed"))
    return [f"{at - began:7.2f} {what}" for at, what in sorted(events)]


Script = Callable[[Session], Awaitable[None]]


async def run_script(
    name: str,
    script: Script,
    http: httpx.AsyncClient,
    agent_id: str,
    speech: dict[str, bytes],
    tools: ToolServer,
    delay: float,
) -> Outcome:
    from testing.clients import Received, VoiceClient, is_type

    await asyncio.sleep(delay)
    outcome = Outcome(name)
    loop = asyncio.get_running_loop()
    began = loop.time()
    line: Line | None = None
    try:
        response = await http.post(f"/public/v1/agents/{agent_id}/realtime-sessions")
        response.raise_for_status()

        def lighten(item: Received) -> None:
            if item.message.get("type") == "output_audio":
                item.message["audio"] = ""  # the bench needs when audio came, not its bytes

        async with VoiceClient(response.json()["websocketUrl"], on_message=lighten) as client:
            line = Line(client)
            started = await client.wait_for(is_type("session.started"), timeout=120)
            outcome.call_id = client.messages[started].message["callId"]
            line.start()
            await client.wait_for(is_type("transcript", role="assistant"), after=started, timeout=60)
            await script(Session(line, outcome, speech))
            if not client.closed:
                await line.stop()
                await client.send({"type": "stop"})
                await client.wait_closed(timeout=30)
    except Exception as exc:  # noqa: BLE001 - a failed session is counted and reported, not fatal
        outcome.failure = f"{type(exc).__name__}: {exc}"
    finally:
        if line is not None:
            await line.stop()
            evaluate(line, outcome)
    outcome.tool_hits = tools.hits(outcome.call_id) if outcome.call_id else 0
    if os.environ.get("BENCH_TIMELINE") and line is not None:
        outcome.timeline = timeline(line, began)
    outcome.seconds = loop.time() - began
    return outcome


# --- the scripts -------------------------------------------------------------------------------------
def scripts(paused: list[tuple[str, str, bytes]], n: int, *, quick: bool) -> list[tuple[str, Script, str]]:
    """The scripts of a level of n sessions, each a session with the agent it talks to ("main" or
    "pauses"). One session: two of actions, the probes (one script with --quick) and the first ten
    paused sentences (five with --quick), one after the other. More: every script, the forty paused
    sentences five to a session, and the first scripts again up to n sessions."""

    def probes(*names: str, real: bool) -> Script:
        async def run(session: Session) -> None:
            for name in names:
                await session.false_probe(name)
            if real:
                await session.real_probe()

        return run

    def actions(*kinds: str) -> Script:
        async def run(session: Session) -> None:
            for kind in kinds:
                await session.action(kind)

        return run

    def sentences(chosen: list[tuple[str, str, bytes]]) -> Script:
        async def run(session: Session) -> None:
            for voice, sentence, audio in chosen:
                await session.paused(voice, sentence, audio)

        return run

    main: list[tuple[str, Script, str]] = [
        ("tool, knowledge, transfer", actions("tool", "knowledge", "transfer"), "main"),
        ("end", actions("end"), "main"),
        ("okay, noise, stop", probes("Okay.", NOISE, real=True), "main"),
        ("mm-hmm, yeah, stop", probes("Mm-hmm.", "Yeah.", real=True), "main"),
        ("noise, okay", probes(NOISE, "Okay.", real=False), "main"),
    ]
    per_session = 5
    listening = [
        (
            f"paused {paused[first][0]} {first % 10 + 1}-{first % 10 + per_session}",
            sentences(paused[first : first + per_session]),
            "pauses",
        )
        for first in range(0, len(paused), per_session)
    ]
    if n == 1:
        return main[:3] + listening[:1] if quick else main[:4] + listening[:2]
    return main + listening + [main[i % len(main)] for i in range(max(0, n - len(main) - len(listening)))]


async def run_level(
    n: int,
    base_urls: list[str],
    api_key: str,
    agents: dict[str, str],
    speech: dict[str, bytes],
    paused: list[tuple[str, str, bytes]],
    tools: ToolServer,
    *,
    quick: bool,
    stagger_ms: int,
    only: str = "",
) -> list[Outcome]:
    """n sessions at once (1: the scripts one after the other)."""
    headers = {"Authorization": f"Bearer {api_key}"}
    clients = [httpx.AsyncClient(base_url=url, headers=headers, timeout=60) for url in base_urls]
    chosen = [script for script in scripts(paused, n, quick=quick) if only in script[0]]
    try:
        if n == 1:
            return [await run_script(name, s, clients[0], agents[a], speech, tools, 0.0) for name, s, a in chosen]
        outcomes: list[Outcome] = []
        for wave in range(0, len(chosen), n):
            outcomes += await asyncio.gather(
                *(
                    run_script(name, s, clients[i % len(clients)], agents[a], speech, tools, i * stagger_ms / 1000)
                    for i, (name, s, a) in enumerate(chosen[wave : wave + n])
                )
            )
        return outcomes
    finally:
        for client in clients:
            await client.aclose()


# --- figures -----------------------------------------------------------------------------------------
def figures(n: int, outcomes: list[Outcome], seconds: float) -> dict[str, Any]:
    lost = sum(lost for o in outcomes for lost in o.actions.values())
    actions = sum(len(o.actions) for o in outcomes)
    lost_by_kind: dict[str, int] = {}
    for o in outcomes:
        for kind, was_lost in o.actions.items():
            lost_by_kind[kind] = lost_by_kind.get(kind, 0) + was_lost
    doubled = sum(max(0, o.tool_hits - o.tool_requests) for o in outcomes)
    probes = [cut for o in outcomes for _, cut in o.false_probes]
    real = [ms for o in outcomes for ms in o.real]
    paused = [split for o in outcomes for _, _, split in o.paused]
    latencies = [ms for o in outcomes for ms in o.latencies]
    return {
        "sessions": n,
        "seconds": round(seconds, 1),
        "actionsLost": lost,
        "actions": actions,
        "actionsLostByKind": lost_by_kind,
        "toolRequests": sum(o.tool_requests for o in outcomes),
        "toolHits": sum(o.tool_hits for o in outcomes),
        "toolRequestsDoubled": doubled,
        "turns": sum(o.turns for o in outcomes),
        "unansweredTurns": sum(len(o.unanswered) for o in outcomes),
        "falseInterruptions": len(probes),
        "falseInterruptionsCut": sum(probes),
        "pausedSentences": len(paused),
        "pausedSplit": sum(paused),
        "realInterruptions": len(real),
        "realInterruptionsMissed": sum(ms is None or ms > REAL_CUT_SECONDS * 1000 for ms in real),
        "realInterruptionClearMs": sorted(round(ms) for ms in real if ms is not None),
        "latencyP50Ms": round(statistics.median(latencies)) if latencies else None,
        "latencyP95Ms": round(percentile(latencies, 95)) if latencies else None,
        "latencySamples": len(latencies),
        "failedSessions": sum(bool(o.failure) for o in outcomes),
    }


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def report(f: dict[str, Any], outcomes: list[Outcome], verbose: bool) -> bool:
    n = f["sessions"]
    p50_target = 300 if n == 1 else 350
    rows = [
        ("actions lost", f"{f['actionsLost']} of {f['actions']} {f['actionsLostByKind']}", "0", f["actionsLost"] == 0),
        (
            "tool requests doubled",
            f"{f['toolRequestsDoubled']} ({f['toolHits']} requests for {f['toolRequests']} asked)",
            "0",
            f["toolRequestsDoubled"] == 0,
        ),
        ("unanswered turns", f"{f['unansweredTurns']} of {f['turns']}", "0", f["unansweredTurns"] == 0),
        (
            "false interruptions that cut the agent",
            f"{f['falseInterruptionsCut']} of {f['falseInterruptions']}",
            "<= 1 in 10",
            f["falseInterruptions"] > 0 and f["falseInterruptionsCut"] * 10 <= f["falseInterruptions"],
        ),
        (
            "paused sentences split",
            f"{f['pausedSplit']} of {f['pausedSentences']}",
            "<= 2 of 40",
            f["pausedSentences"] > 0 and f["pausedSplit"] * 40 <= 2 * f["pausedSentences"],
        ),
        (
            "real interruptions missed",
            f"{f['realInterruptionsMissed']} of {f['realInterruptions']} (clear after {f['realInterruptionClearMs']} ms)",
            "0 (clear <= 500 ms)",
            f["realInterruptions"] > 0 and f["realInterruptionsMissed"] == 0,
        ),
        (
            "end of speech to first answer audio p50",
            f"{f['latencyP50Ms']} ms ({f['latencySamples']} turns)",
            f"<= {p50_target} ms",
            f["latencyP50Ms"] is not None and f["latencyP50Ms"] <= p50_target,
        ),
        ("end of speech to first answer audio p95", f"{f['latencyP95Ms']} ms", "-", True),
    ]
    print(
        f"\n{n} session{'s' if n > 1 else ''} ({f['seconds']} s, {len(outcomes)} scripts, {f['failedSessions']} failed)"
    )
    for name, value, target, ok in rows:
        print(f"  {name:<42} {value:<48} target {target:<20} {verdict(ok) if target != '-' else ''}", flush=True)
    for o in outcomes:
        if o.failure:
            print(f"    failed session ({o.script}): {o.failure}")
        if verbose:
            print(
                f"    {o.script}: {o.seconds:.0f} s, actions lost {o.actions}, probes {o.false_probes}, "
                f"real {o.real}, unanswered {o.unanswered}, split {[s for _, s, x in o.paused if x]}, "
                f"latencies {[round(x) for x in o.latencies]}"
            )
        for event in o.timeline:
            print(f"      {event}")
    return all(ok for _, _, target, ok in rows if target != "-")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="1,20", help="comma-separated numbers of concurrent sessions")
    parser.add_argument(
        "--quick", action="store_true", help="a subset (fewer probes, 10 paused sentences) at 1 session"
    )
    parser.add_argument("--servers", type=int, default=os.cpu_count() or 1, help="Daphne processes to start")
    parser.add_argument("--stagger-ms", type=int, default=250, help="session i starts i x this many ms after the first")
    parser.add_argument("--verbose", action="store_true", help="each script's outcome")
    parser.add_argument("--only", default="", help="only the scripts whose name contains this")
    args = parser.parse_args()
    levels = [1] if args.quick else [int(x) for x in args.sessions.split(",") if x.strip()]
    timings: dict[str, float] = {}
    began = time.monotonic()

    from testing.daphne import DaphneServer
    from testing.servers import free_port

    tools = ToolServer()
    tools.receiver.start()
    servers: list[DaphneServer] = []
    try:
        env = bench_env()
        agent_id, pauses_id, api_key = seed(env, tools.url)
        agents = {"main": agent_id, "pauses": pauses_id}
        for index in range(args.servers):
            port = free_port()
            server_env = {**env, "REALTIME_WS_URL": f"ws://127.0.0.1:{port}"}
            log = ROOT / "var" / f"bench-conversation-daphne-{index}.log"
            servers.append(DaphneServer(env=server_env, port=port, log_path=log).start())
        base_urls = [server.http_url for server in servers]
        upload_document(base_urls[0], api_key, agent_id)
        timings["servers and agent"] = time.monotonic() - began
        mark = time.monotonic()
        with tempfile.TemporaryDirectory() as folder:
            speech, paused = record_all(1 if args.quick or levels == [1] else len(VOICES), Path(folder))
        timings["recording the callers"] = time.monotonic() - mark
        from django.conf import settings

        print(
            f"servers: {len(base_urls)}; voice engine: {settings.VOICE_ENGINE}; brain: embedded; "
            f"{turn_windows(settings)}; interruptions: the agent's default (adaptive: words, not sounds); "
            f"sessions staggered by {args.stagger_ms} ms"
        )
        results = []
        passed = True
        for n in levels:
            mark = time.monotonic()
            outcomes = asyncio.run(
                run_level(
                    n,
                    base_urls,
                    api_key,
                    agents,
                    speech,
                    paused,
                    tools,
                    quick=args.quick,
                    stagger_ms=args.stagger_ms,
                    only=args.only,
                )
            )
            timings[f"{n} session{'s' if n > 1 else ''}"] = time.monotonic() - mark
            found = figures(n, outcomes, time.monotonic() - mark)
            passed = report(found, outcomes, args.verbose) and passed
            results.append(found)
    finally:
        for server in servers:
            server.stop()
        tools.receiver.stop()
    timings["total"] = time.monotonic() - began
    print("\ntime taken: " + ", ".join(f"{name} {seconds:.0f} s" for name, seconds in timings.items()))
    print(
        json.dumps(
            {
                "bench": "conversation",
                "passed": passed,
                "levels": results,
                "timings": {k: round(v, 1) for k, v in timings.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
