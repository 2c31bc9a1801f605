"""Voice latency benchmark (not a test): N concurrent scripted callers talk to an agent over real
browser sockets of a real Daphne server.

Each client opens a session through POST /public/v1/agents/{id}/realtime-sessions, keeps its
"microphone" streaming (20 ms chunks at real time: silence, then an eSpeak NG sentence, then
silence), and measures:
  - latency: from the end of its sentence to the first byte of the answer's audio (this includes the
    end-of-turn silence window VAD_END_SILENCE_MS, recognition, the brain and the first TTS sentence);
  - underruns: a client-side player starts at the first audio byte of an utterance; an underrun is a
    chunk arriving after the player has run dry while that utterance is still playing (greeting and
    answer), i.e. an audible gap;
  - recognition: word error rate of the user transcript against the spoken sentence;
  - server CPU seconds per session (utime + stime of the Daphne process over the round / N).

Starts --servers Daphne processes (default: one per CPU core, the deployment unit) against a fresh database (SQLite file var/bench-voicebench.sqlite3, or the
PostgreSQL database named by DATABASE_URL with `_voicebench` appended), unless --no-server is given
with an already configured --url and --api-key.

Scenario `tool` (--scenario tool): the agent is a webhook agent with one custom tool delivered to a
webhook receiver in this process; every caller asks for the opening hours, the agent calls the tool
and speaks its result. Besides the figures above it reports the service's own time around each tool
call: the dispatcher's duration of the call (its agent-log line "tool call", durationMs) minus the
time the webhook itself took (from its request's arrival at the receiver to its answer), i.e.
argument validation, serializing and signing, the egress guard, the HTTP client and connection on
loopback, parsing and checking the reply, and queueing the record.

Scenario `phone` (--scenario phone): the same callers over the Twilio Media Stream protocol
(testing/twilio_stream.py plays Twilio's side): mu-law 8 kHz in and out at
/telephony/twilio/stream, opened with a stream token as the voice webhook issues it. Latency is from
the end of the sentence to the first `media` frame of the answer, underruns are counted on the 20 ms
frames, recognition is read from the call record (the phone protocol carries no transcripts). It
first reports the codec cost per 20 ms frame (encode: PCM16 24 kHz -> mu-law 8 kHz; decode: mu-law
8 kHz -> PCM16 16 kHz).

Scenario `pauses` (--scenario pauses): turn-taking. Sentences spoken with pauses inside them, as
callers pause to think or to read a number ("My number is ... four five six ... seven"), each at
every pause length of --pauses-ms, one caller each (staggered, as in `talk`): a sentence heard as more
than one user turn was split (the agent took the turn mid-sentence). Reports the split-turn rate per
pause length and kind of pause (hesitation: after words that cannot end a sentence, or inside a
number; clause: after a complete clause), and the latency from the end of the sentence to the answer
for the sentences not split. Compare with VAD_QUICK_END_SILENCE_MS=0 in the environment (a fixed
VAD_END_SILENCE_MS window for every turn, as before the quick end of turn).

Every scenario runs each N for at least as many rounds as it takes every sentence to be spoken once
(N=1: one round per sentence), so that p50 at one session is not the figure of a single sentence.

Usage: .venv/bin/python bench/voice_latency.py [--sessions 1,5,10,20] [--rounds 1] [--scenario talk|tool|phone|pauses]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.api_load import bench_organization  # noqa: E402 - after the repository root is put on sys.path
from testing.figures import percentile  # noqa: E402 - after the repository root is put on sys.path
from testing.stores import bench_database_url  # noqa: E402 - after the repository root is put on sys.path

SENTENCES = (
    "I would like to book a table for four people tomorrow evening.",
    "Can I speak to a person please?",
    "My order number is one two three four.",
    "What time do you open on Saturday?",
    "Yes, that is correct, thank you.",
    "I need to change my reservation to Friday at seven.",
)
AGENT = {
    "name": "Bench",
    "identity": "Ava, the reservation assistant of the Acme restaurant",
    "instructions": (
        "Take table reservations and answer questions about opening hours. Callers book a table for a "
        "number of people, for a date and a time; they may change a reservation, give an order number, "
        "or ask to speak to a person."
    ),
    "greeting": "Hello, this is Ava from Acme. How can I help?",
}
SECRET = "voice-latency-bench-secret"
# Sentences the offline recognizer gets right with this agent's language model, so that every
# session makes its tool call (the bench measures the call, not recognition).
TOOL_SENTENCES = ("When are you open on Saturday?", "What are your opening hours?")
# Sentences with pauses inside: (kind, the parts between the pauses).
PAUSED_SENTENCES = (
    ("hesitation", ("My number is", "four five six", "seven")),
    ("hesitation", ("I would like to", "book a table")),
    ("hesitation", ("The reservation is for", "Friday at", "seven thirty")),
    ("hesitation", ("My name is", "John Smith")),
    ("hesitation", ("I need a table for", "six people")),
    ("hesitation", ("My order number is one two", "three four")),
    ("hesitation", ("Can you tell me if", "you are open on Sunday")),
    ("hesitation", ("Um", "what time do you close")),
    ("clause", ("I want to change my reservation", "to next Tuesday")),
    ("clause", ("Can I speak to a person", "about my order")),
)
TOOL = {
    "name": "get_opening_hours",
    "description": "Tell the caller the opening hours of the restaurant on a given day.",
    "parameter_schema": {
        "type": "object",
        "properties": {"day": {"type": "string", "description": "The day of the week"}},
    },
}


class WebhookReceiver:
    """The agent's serverUrl, in a process of its own (so that the bench's clients never delay it):
    answers every tool call at once and records when each request arrived and when it was answered
    (time.monotonic: one clock for every process of the machine). GET /spans returns them."""

    def __init__(self) -> None:
        from testing.servers import free_port

        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> WebhookReceiver:
        self.process = subprocess.Popen([sys.executable, __file__, "--serve-webhook", str(self.port)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/spans", timeout=1)
                return self
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError("the webhook receiver did not start")

    def spans(self) -> dict[str, tuple[float, float]]:
        """call id -> (arrived, answered)"""
        return {k: tuple(v) for k, v in httpx.get(f"http://127.0.0.1:{self.port}/spans", timeout=10).json().items()}

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)


def serve_webhook(port: int) -> None:
    """A minimal HTTP/1.1 server on asyncio's protocol layer: the webhook's span starts when the first
    byte of a request arrives (its own parsing counts as the webhook's time, not the service's) and
    ends when the answer is written."""
    import json as jsonlib

    spans: dict[str, tuple[float, float]] = {}
    answer = jsonlib.dumps({"message": "We are open from nine in the morning to ten at night."}).encode()

    def response(status: str, body: bytes) -> bytes:
        head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        return head.encode() + body

    class Hook(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport
            self.buffer = b""
            self.arrived: float | None = None

        def data_received(self, data: bytes) -> None:
            if self.arrived is None:
                self.arrived = time.monotonic()
            self.buffer += data
            head, sep, body = self.buffer.partition(b"\r\n\r\n")
            if not sep:
                return
            lines = head.decode("latin-1").split("\r\n")
            length = next(
                (int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:")), 0
            )
            if len(body) < length:
                return
            if lines[0].startswith("GET /spans"):
                self.transport.write(response("200 OK", jsonlib.dumps(spans).encode()))
            else:
                call_id = jsonlib.loads(body[:length])["message"]["call"]["id"]
                self.transport.write(response("200 OK", answer))
                spans[call_id] = (self.arrived, time.monotonic())
            self.buffer, self.arrived = body[length:], None

    async def run() -> None:
        server = await asyncio.get_running_loop().create_server(Hook, "127.0.0.1", port)
        async with server:
            await server.serve_forever()

    asyncio.run(run())


def bench_env() -> dict[str, str]:
    database_url = bench_database_url("voicebench", ROOT / "var")
    return {"LOG_LEVEL": "WARNING", "REALTIME_TOKEN_SECRET": SECRET, "DATABASE_URL": database_url}


def seed(env: dict[str, str], webhook_url: str | None = None) -> tuple[str, str]:
    """Migrate the bench database and create an organization with one active agent (with
    `webhook_url`: a webhook agent with one custom tool delivered there)."""
    organization, api_key = bench_organization(env, "Voice bench", lift_limits=False)
    from django.utils import timezone

    from agents.models import Agent, AgentTool

    agent = Agent.objects.create(
        organization=organization,
        name=AGENT["name"],
        status="active",
        agent_type="webhook" if webhook_url else "static",
        server_url=webhook_url,
        server_secret="bench-signing-secret" if webhook_url else None,
        identity=AGENT["identity"],
        instructions=AGENT["instructions"],
        greeting_type="static",
        static_greeting=AGENT["greeting"],
        updated_at=timezone.now(),
    )
    if webhook_url:
        AgentTool.objects.create(agent=agent, **TOOL)
    return str(agent.pk), api_key


def word_errors(reference: str, hypothesis: str) -> tuple[int, int]:
    ref = re.findall(r"[a-z']+", reference.lower())
    hyp = re.findall(r"[a-z']+", hypothesis.lower())
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        previous, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (r != h))
    return row[-1], len(ref)


@dataclass
class Result:
    latency: float | None = None
    underruns: int = 0
    errors: int = 0
    words: int = 0
    startup: float | None = None
    failure: str = ""
    gaps: list[float] = field(default_factory=list)
    call_id: str = ""
    heard: str = ""


class Player:
    """A client-side player: playback starts with the first byte of an utterance and runs dry when
    the next chunk arrives later than the audio already received lasts."""

    def __init__(self) -> None:
        self.end: float | None = None
        self.underruns = 0
        self.gaps: list[float] = []

    def chunk(self, at: float, seconds: float) -> None:
        if self.end is not None and at > self.end + 0.001:
            self.underruns += 1
            self.gaps.append(at - self.end)
        self.end = max(self.end or at, at) + seconds

    def utterance_done(self) -> None:
        self.end = None


async def one_session(
    http: httpx.AsyncClient, agent_id: str, speech: bytes, sentence: str, chunk_ms: int = 20, delay: float = 0.0
) -> Result:
    from testing.clients import Received, VoiceClient, is_type

    result = Result()
    await asyncio.sleep(delay)
    loop = asyncio.get_running_loop()
    asked = loop.time()
    response = await http.post(f"/public/v1/agents/{agent_id}/realtime-sessions")
    response.raise_for_status()
    player = Player()

    def on_message(item: Received) -> None:
        message = item.message
        if message["type"] == "output_audio":
            player.chunk(item.at, len(message["audio"]) * 3 / 4 / 48000)
        elif message["type"] == "transcript" and message["role"] == "assistant":
            player.utterance_done()

    client = VoiceClient(response.json()["websocketUrl"], on_message=on_message, chunk_ms=chunk_ms)
    try:
        async with client:
            started = await client.wait_for(is_type("session.started"), timeout=120)
            result.call_id = client.messages[started].message["callId"]
            result.startup = loop.time() - asked
            mic_off = asyncio.Event()
            silence_20ms = b"\x00\x00" * 320

            async def microphone(until: asyncio.Event) -> None:
                while not until.is_set():
                    await client.stream(silence_20ms * 5)

            mic = asyncio.create_task(microphone(mic_off))
            greeting = await client.wait_for(is_type("transcript", role="assistant"), timeout=60)
            mic_off.set()
            await mic
            before = len(client.messages)
            speech_end = await client.stream(speech)
            after_speech = asyncio.Event()
            mic = asyncio.create_task(microphone(after_speech))
            first_audio = await client.wait_for(is_type("output_audio"), after=max(before, greeting + 1), timeout=60)
            result.latency = client.messages[first_audio].at - speech_end
            user = await client.wait_for(is_type("transcript", role="user"), after=before, timeout=30)
            result.heard = client.messages[user].message["text"]
            result.errors, result.words = word_errors(sentence, result.heard)
            await client.wait_for(is_type("transcript", role="assistant"), after=first_audio, timeout=60)
            after_speech.set()
            await mic
            await client.send({"type": "stop"})
            await client.wait_closed(timeout=30)
    except Exception as exc:  # noqa: BLE001 - a failed session is counted and reported, not fatal
        result.failure = f"{type(exc).__name__}: {exc}"
    result.underruns, result.gaps = player.underruns, player.gaps
    return result


async def paused_session(
    http: httpx.AsyncClient, agent_id: str, speech: bytes, sentence: str, delay: float = 0.0
) -> Result:
    """One caller says a sentence with pauses inside, then listens for 3 s: `failure` is "split" when
    the sentence came back as more than one user turn ("split: " and the turns); latency is to the answer of an unsplit one."""
    from testing.clients import VoiceClient, is_type

    result = Result()
    await asyncio.sleep(delay)
    loop = asyncio.get_running_loop()
    response = await http.post(f"/public/v1/agents/{agent_id}/realtime-sessions")
    response.raise_for_status()
    client = VoiceClient(response.json()["websocketUrl"])
    silence = b"\x00\x00" * 1600
    try:
        async with client:
            await client.wait_for(is_type("session.started"), timeout=120)
            result.call_id = client.messages[-1].message.get("callId", "")
            mic_off = asyncio.Event()

            async def microphone() -> None:
                while not mic_off.is_set():
                    await client.stream(silence)

            mic = asyncio.create_task(microphone())
            await client.wait_for(is_type("transcript", role="assistant"), timeout=60)
            mic_off.set()
            await mic
            before = len(client.messages)
            speech_end = await client.stream(speech)
            listened = loop.time()
            await client.stream(silence * 30)  # 3 s
            turns = [m for m in client.messages[before:] if is_type("transcript", role="user")(m.message)]
            answers = [m for m in client.messages[before:] if m.message["type"] == "output_audio"]
            heard = " ".join(m.message["text"] for m in turns)
            result.errors, result.words = word_errors(sentence, heard)
            if len(turns) > 1:
                result.failure = "split: " + " | ".join(m.message["text"] for m in turns)
            elif answers and answers[0].at >= listened - 0.001:
                result.latency = answers[0].at - speech_end
            await client.send({"type": "stop"})
            await client.wait_closed(timeout=30)
    except Exception as exc:  # noqa: BLE001 - a failed session is counted and reported, not fatal
        result.failure = f"{type(exc).__name__}: {exc}"
    return result


def paused_speech(parts: tuple[str, ...], pause_ms: int) -> bytes:
    """The parts in one voice, each trimmed of its own leading and trailing silence, with `pause_ms`
    of silence between them."""
    import numpy as np

    from realtime.engine.speech.espeak import synthesize
    from testing.voice import to_16k

    pieces = []
    for part in parts:
        samples = np.frombuffer(to_16k(synthesize(part, language="en-US", voice_name="eve")), dtype="<i2")
        loud = np.nonzero(np.abs(samples.astype(np.int32)) > 300)[0]
        pieces.append(samples[loud[0] : loud[-1] + 1].tobytes() if loud.size else b"")
    return (b"\x00\x00" * (16 * pause_ms)).join(pieces)


def pauses_main(args: argparse.Namespace, base_urls: list[str], api_key: str, agent_id: str) -> None:
    """The split-turn rate on sentences with pauses inside (see the module's docstring)."""
    pause_lengths = [int(x) for x in args.pauses_ms.split(",") if x.strip()]
    headers = {"Authorization": f"Bearer {api_key}"}

    async def run(pause_ms: int) -> list[tuple[str, Result]]:
        clients = [httpx.AsyncClient(base_url=url, headers=headers, timeout=60) for url in base_urls]
        try:
            results = await asyncio.gather(
                *(
                    paused_session(
                        clients[i % len(clients)],
                        agent_id,
                        paused_speech(parts, pause_ms),
                        " ".join(parts),
                        i * args.stagger_ms / 1000,
                    )
                    for i, (_, parts) in enumerate(PAUSED_SENTENCES)
                )
            )
        finally:
            for client in clients:
                await client.aclose()
        return [(kind, result) for (kind, _), result in zip(PAUSED_SENTENCES, results, strict=True)]

    print(f"{'pause ms':>8} {'kind':>10} {'sentences':>9} {'split':>5} {'rate':>5} {'p50 ms':>7} {'failed':>6}")
    for pause_ms in pause_lengths:
        outcomes = asyncio.run(run(pause_ms))
        for kind in ("hesitation", "clause", "all"):
            chosen = [r for k, r in outcomes if kind in (k, "all")]
            splits = [r.failure for r in chosen if r.failure.startswith("split")]
            split = len(splits)
            failed = [r.failure for r in chosen if r.failure and not r.failure.startswith("split")]
            latencies = [r.latency * 1000 for r in chosen if r.latency is not None]
            print(
                f"{pause_ms:>8} {kind:>10} {len(chosen):>9} {split:>5} {split / len(chosen):>5.2f} "
                f"{statistics.median(latencies) if latencies else float('nan'):>7.0f} {len(failed):>6}",
                flush=True,
            )
            for failure in failed[:2]:
                print(f"    failed session: {failure}")
            if kind == "all" and args.verbose:
                for heard in splits:
                    print(f"    {heard}")


def with_children(pids: list[int]) -> list[int]:
    """The servers and their child processes (the speech recognition workers)."""
    found = list(pids)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if parent in pids:
            found.append(int(stat.parent.name))
    return found


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in with_children(pids):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


async def run_round(
    base_urls: list[str],
    api_key: str,
    agent_id: str,
    n: int,
    speech: dict[str, bytes],
    pids: list[int],
    chunk_ms: int = 20,
    stagger_ms: int = 0,
    sentences: tuple[str, ...] = SENTENCES,
    first: int = 0,
) -> tuple[list[Result], float, float]:
    """N overlapping sessions, spread round-robin over the servers (one Daphne process per core is the
    deployment unit: a session lives on the process that holds its socket). Session i starts
    i x stagger_ms after the first, as independent callers do (0: all in lockstep, the worst case)."""
    headers = {"Authorization": f"Bearer {api_key}"}
    clients = [httpx.AsyncClient(base_url=url, headers=headers, timeout=60) for url in base_urls]
    try:
        cpu_before = cpu_seconds(pids) if pids else 0.0
        wall = time.monotonic()
        picks = [sentences[(first + i) % len(sentences)] for i in range(n)]
        results = await asyncio.gather(
            *(
                one_session(clients[i % len(clients)], agent_id, speech[s], s, chunk_ms, i * stagger_ms / 1000)
                for i, s in enumerate(picks)
            )
        )
        wall = time.monotonic() - wall
        cpu = (cpu_seconds(pids) - cpu_before) if pids else float("nan")
    finally:
        for client in clients:
            await client.aclose()
    return results, wall, cpu


TABLE_HEADER = (
    f"{'N':>3} {'p50 ms':>7} {'p95 ms':>7} {'max ms':>7} {'underruns':>9} {'failed':>6} "
    f"{'start p50 ms':>12} {'CPU s/session':>13} {'CPU %/session':>13} {'WER':>5}"
)


def report_row(n: int, rounds: list[tuple[list[Result], float, float]]) -> None:
    """One row of the table: the rounds made with N sessions, latencies pooled."""
    results = [r for round_results, _, _ in rounds for r in round_results]
    cpu_total = sum(cpu for _, _, cpu in rounds)
    wall_per_round = sum(wall for _, wall, _ in rounds) / len(rounds)
    latencies = [r.latency * 1000 for r in results if r.latency is not None]
    starts = [r.startup * 1000 for r in results if r.startup is not None]
    failures = [r.failure for r in results if r.failure]
    errors, words = sum(r.errors for r in results), sum(r.words for r in results)
    nan = float("nan")
    print(
        f"{n:>3} {statistics.median(latencies) if latencies else nan:>7.0f} "
        f"{percentile(latencies, 95) if latencies else nan:>7.0f} "
        f"{max(latencies) if latencies else nan:>7.0f} {sum(r.underruns for r in results):>9} {len(failures):>6} "
        f"{statistics.median(starts) if starts else nan:>12.0f} "
        f"{cpu_total / len(results):>13.2f} {100 * cpu_total / len(results) / wall_per_round:>13.1f} "
        f"{errors / words if words else nan:>5.2f}",
        flush=True,
    )
    for failure in failures[:3]:
        print(f"    failed session: {failure}")
    if os.environ.get("BENCH_VERBOSE"):  # each session: its latency and what was heard
        for r in results:
            print(f"    {'-' if r.latency is None else round(r.latency * 1000):>5} ms  heard: {r.heard}")


def turn_windows(settings: object) -> str:
    """The end-of-turn settings in force (the servers inherit this environment)."""
    quick = getattr(settings, "VAD_QUICK_END_SILENCE_MS", 0)
    if quick and quick < getattr(settings, "VAD_UNFINISHED_SILENCE_MS", 0):
        return (
            f"end of turn: {quick} ms of silence when the words read finished, else "
            f"{settings.VAD_UNFINISHED_SILENCE_MS} ms"  # type: ignore[attr-defined]  # settings annotated object: read only when set (getattr above)
        )
    return f"end-of-turn silence window: {settings.VAD_END_SILENCE_MS} ms"  # type: ignore[attr-defined]  # settings annotated object: read only when set (getattr above)


def tool_overheads(receiver: WebhookReceiver, call_ids: list[str]) -> list[float]:
    """The service's own time (ms) around each webhook tool call of the given calls: the dispatcher's
    duration (agent log "tool call" line) minus the webhook's own time at the receiver."""
    from calls.logging import flush_agent_logs
    from calls.models import AgentLog

    flush_agent_logs()
    time.sleep(2 * float(os.environ.get("AGENT_LOG_FLUSH_SECONDS", "1.0")))  # the servers' log writers
    sessions = {
        entry.content.get("callId"): entry.session_id
        for entry in AgentLog.objects.filter(content__message="session started")
    }
    durations = {
        entry.session_id: float(entry.content["durationMs"])
        for entry in AgentLog.objects.filter(content__message="tool call", content__status="success")
    }
    overheads = []
    spans = receiver.spans()
    for call_id in call_ids:
        session_id = sessions.get(call_id)
        if session_id in durations and call_id in spans:
            arrived, answered = spans[call_id]
            overheads.append(durations[session_id] - (answered - arrived) * 1000)
    return overheads


def main() -> None:
    if sys.argv[1:2] == ["--serve-webhook"]:
        serve_webhook(int(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="1,5,10,20", help="comma-separated numbers of concurrent sessions")
    parser.add_argument("--rounds", type=int, default=1, help="rounds per N (latencies are pooled)")
    parser.add_argument("--chunk-ms", type=int, default=20, help="size of the clients' input_audio chunks")
    parser.add_argument(
        "--stagger-ms",
        type=int,
        default=250,
        help="start session i this many ms x i after the first (0: all callers speak in lockstep)",
    )
    parser.add_argument("--servers", type=int, default=os.cpu_count() or 1, help="Daphne processes to start")
    parser.add_argument("--no-server", action="store_true", help="use --url/--api-key/--agent instead")
    parser.add_argument("--url", default="", help="with --no-server: base URL(s), comma-separated")
    parser.add_argument("--api-key", default="")
    parser.add_argument("--agent", default="")
    parser.add_argument(
        "--scenario",
        choices=("talk", "tool", "phone", "pauses"),
        default="talk",
        help="talk, a webhook tool call, talk over the Twilio media-stream protocol, or sentences with pauses",
    )
    parser.add_argument(
        "--verbose", action="store_true", help="scenario pauses: print what split sentences were heard as"
    )
    parser.add_argument("--pauses-ms", default="400,650", help="scenario pauses: pause lengths inside the sentences")
    args = parser.parse_args()
    if args.scenario == "phone":
        phone_main(args)
        return
    tool_scenario = args.scenario == "tool"
    sentences = TOOL_SENTENCES if tool_scenario else SENTENCES
    receiver = WebhookReceiver().start() if tool_scenario else None

    from testing.daphne import DaphneServer
    from testing.servers import free_port
    from testing.voice import to_16k

    servers: list[DaphneServer] = []
    if args.no_server:
        base_urls, api_key, agent_id, pids = args.url.split(","), args.api_key, args.agent, []
    else:
        env = bench_env()
        if receiver is not None:
            env["OUTBOUND_ALLOWED_NETWORKS"] = "127.0.0.0/8"
        agent_id, api_key = seed(env, receiver.url if receiver else None)
        for index in range(args.servers):
            port = free_port()
            server_env = {**env, "REALTIME_WS_URL": f"ws://127.0.0.1:{port}"}
            log = ROOT / "var" / f"bench-voice-daphne-{index}.log"
            servers.append(DaphneServer(env=server_env, port=port, log_path=log).start())
        base_urls = [server.http_url for server in servers]
        pids = [server.process.pid for server in servers if server.process]
    try:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "voiceagent.settings")
        import django

        django.setup()
        from django.conf import settings

        from realtime.engine.speech.espeak import synthesize

        speech = {s: to_16k(synthesize(s, language="en-US", voice_name="eve")) for s in sentences}
        print(
            f"servers: {len(base_urls)}; input chunks: {args.chunk_ms} ms; voice engine: {settings.VOICE_ENGINE}; {turn_windows(settings)}; session starts staggered by {args.stagger_ms} ms; recognition workers per server: {settings.ASR_WORKERS}"
        )
        asyncio.run(
            run_round(base_urls, api_key, agent_id, len(base_urls), speech, pids, sentences=sentences)
        )  # warm-up (first-agent LM build)
        if args.scenario == "pauses":
            pauses_main(args, base_urls, api_key, agent_id)
            return
        print(TABLE_HEADER)
        measured_calls: list[str] = []
        for n in [int(x) for x in args.sessions.split(",") if x.strip()]:
            rounds = [
                asyncio.run(
                    run_round(
                        base_urls,
                        api_key,
                        agent_id,
                        n,
                        speech,
                        pids,
                        args.chunk_ms,
                        args.stagger_ms,
                        sentences,
                        first=index * n,
                    )
                )
                for index in range(max(args.rounds, -(-len(sentences) // n)))
            ]
            measured_calls += [r.call_id for results, _, _ in rounds for r in results if r.call_id]
            report_row(n, rounds)
        if receiver is not None:
            overheads = tool_overheads(receiver, measured_calls)
            print(
                f"webhook tool calls: {len(overheads)} of {len(measured_calls)} sessions; the service's own time "
                f"around each call p50 {statistics.median(overheads) if overheads else float('nan'):.2f} ms, p95 "
                f"{percentile(overheads, 95) if overheads else float('nan'):.2f} ms, max "
                f"{max(overheads) if overheads else float('nan'):.2f} ms"
            )
    finally:
        for server in servers:
            server.stop()
        if receiver is not None:
            receiver.stop()


# --- scenario phone: the Twilio media-stream protocol ---------------------------------------------


def codec_cost(frames: int = 5000) -> tuple[float, float]:
    """Microseconds per 20 ms frame: encode (agent PCM16 24 kHz -> mu-law 8 kHz, through the
    anti-aliasing filter) and decode (caller mu-law 8 kHz -> PCM16 16 kHz)."""
    import numpy as np

    from telephony import audio

    t = np.arange(480 * frames) / 24000
    agent = (8000 * np.sin(2 * np.pi * 300 * t)).astype("<i2").tobytes()
    encoder = audio.PhoneEncoder()
    started = time.perf_counter()
    for offset in range(0, len(agent), 960):
        encoder.encode(agent[offset : offset + 960])
    encode = (time.perf_counter() - started) / frames * 1e6
    caller = audio.ulaw_encode(np.frombuffer(agent, dtype="<i2")[::3])
    upsampler = audio.Upsampler()
    started = time.perf_counter()
    for offset in range(0, len(caller), audio.FRAME_BYTES):
        audio.phone_to_engine(caller[offset : offset + audio.FRAME_BYTES], upsampler)
    decode = (time.perf_counter() - started) / frames * 1e6
    return encode, decode


@dataclass
class PhoneResult(Result):
    call_sid: str = ""
    sentence: str = ""


async def one_phone_session(
    ws_url: str, token: str, call_sid: str, speech: bytes, sentence: str, delay: float
) -> PhoneResult:
    """One caller over a media stream: silence until the greeting has played, the sentence, silence
    until the answer has played, then Twilio's `stop`."""
    from realtime.engine.audio import FRAME_SECONDS
    from telephony import audio
    from testing.clients import Received
    from testing.twilio_stream import TwilioStream

    result = PhoneResult(call_sid=call_sid, sentence=sentence)
    await asyncio.sleep(delay)
    loop = asyncio.get_running_loop()
    player = Player()
    last_media = [0.0]

    def on_message(item: Received) -> None:
        if item.message.get("event") == "media":
            player.chunk(item.at, FRAME_SECONDS)
            last_media[0] = item.at

    silence = bytes([audio.SILENCE_BYTE]) * audio.FRAME_BYTES * 5

    async def line(until: asyncio.Event) -> None:
        while not until.is_set():
            await stream.stream(silence)

    async def played_out(after: int) -> None:
        """The utterance that started at messages[after] has ended: no media for 600 ms."""
        while loop.time() - last_media[0] < 0.6 or not any(
            item.message.get("event") == "media" for item in stream.messages[after:]
        ):
            await asyncio.sleep(0.05)

    stream = TwilioStream(f"{ws_url}/telephony/twilio/stream", token, call_sid=call_sid, on_message=on_message)
    asked = loop.time()
    try:
        async with stream:
            await stream.start()
            quiet = asyncio.Event()
            silence_task = asyncio.create_task(line(quiet))
            await stream.wait_for(lambda m: m.get("event") == "media", timeout=120)
            result.startup = loop.time() - asked
            await asyncio.wait_for(played_out(0), 60)
            quiet.set()
            await silence_task
            player.utterance_done()
            before = len(stream.messages)
            speech_end = await stream.stream(speech)
            quiet = asyncio.Event()
            silence_task = asyncio.create_task(line(quiet))
            first = await stream.wait_for(lambda m: m.get("event") == "media", after=before, timeout=60)
            result.latency = stream.messages[first].at - speech_end
            await asyncio.wait_for(played_out(first), 60)
            quiet.set()
            await silence_task
            await stream.stop()
            await stream.wait_closed(timeout=30)
    except Exception as exc:  # noqa: BLE001 - a failed session is counted and reported, not fatal
        result.failure = f"{type(exc).__name__}: {exc}"
    result.underruns, result.gaps = player.underruns, player.gaps
    return result


async def run_phone_round(
    ws_urls: list[str], grants: list[dict[str, str]], n: int, speech: dict[str, bytes], pids: list[int], stagger_ms: int
) -> tuple[list[PhoneResult], float, float]:
    """N overlapping phone calls, spread round-robin over the servers; a stream token each."""
    import secrets

    from asgiref.sync import sync_to_async

    from telephony.streams import stream_token_issue

    cpu_before = cpu_seconds(pids) if pids else 0.0
    wall = time.monotonic()
    sessions = []
    for i in range(n):
        sentence = SENTENCES[i % len(SENTENCES)]
        call_sid = "CA" + secrets.token_hex(16)
        token = await sync_to_async(stream_token_issue)(call_sid=call_sid, **grants[0])
        sessions.append(
            one_phone_session(
                ws_urls[i % len(ws_urls)], token, call_sid, speech[sentence], sentence, i * stagger_ms / 1000
            )
        )
    results = await asyncio.gather(*sessions)
    wall = time.monotonic() - wall
    cpu = (cpu_seconds(pids) - cpu_before) if pids else float("nan")
    return list(results), wall, cpu


def phone_word_errors(results: list[PhoneResult]) -> None:
    """Recognition from the call records (the first user message of each call)."""
    from calls.models import Call, CallMessage

    for result in results:
        call = Call.objects.filter(provider_call_id=result.call_sid).first()
        heard = (
            CallMessage.objects.filter(call=call, role="user").order_by("occurred_at", "sequence").first()
            if call
            else None
        )
        result.errors, result.words = word_errors(result.sentence, heard.content if heard else "")


def phone_main(args: argparse.Namespace) -> None:
    from testing.daphne import DaphneServer
    from testing.servers import free_port
    from testing.voice import to_16k

    encode, decode = codec_cost()
    print(
        f"codec cost per 20 ms frame: encode (PCM16 24 kHz -> mu-law 8 kHz) {encode:.1f} us, decode (mu-law 8 kHz -> PCM16 16 kHz) {decode:.1f} us"
    )
    env = bench_env()
    agent_id, _ = seed(env)
    from agents.models import Agent
    from telephony.services.numbers import phone_number_assign, phone_number_claim

    agent = Agent.objects.get(pk=agent_id)
    number = phone_number_claim(organization=agent.organization, number="+14155550100")
    phone_number_assign(organization=agent.organization, agent=agent, phone_number_id=number.pk)
    grant = {
        "organization_id": str(agent.organization_id),
        "agent_id": agent_id,
        "phone_number_id": str(number.pk),
        "from_number": "+14155550199",
        "to_number": number.phone_number,
    }
    servers: list[DaphneServer] = []
    try:
        for index in range(args.servers):
            port = free_port()
            server_env = {**env, "REALTIME_WS_URL": f"ws://127.0.0.1:{port}"}
            log = ROOT / "var" / f"bench-voice-daphne-{index}.log"
            servers.append(DaphneServer(env=server_env, port=port, log_path=log).start())
        ws_urls = [server.ws_url for server in servers]
        pids = [server.process.pid for server in servers if server.process]
        from django.conf import settings

        from realtime.engine.speech.espeak import synthesize
        from testing.twilio_stream import to_phone

        speech = {s: to_phone(to_16k(synthesize(s, language="en-US", voice_name="eve"))) for s in SENTENCES}
        print(
            f"servers: {len(ws_urls)}; Twilio media streams (mu-law 8 kHz, 20 ms frames); voice engine: {settings.VOICE_ENGINE}; {turn_windows(settings)}; session starts staggered by {args.stagger_ms} ms"
        )
        print(TABLE_HEADER)
        asyncio.run(run_phone_round(ws_urls, [grant], len(ws_urls), speech, pids, 0))  # warm-up
        for n in [int(x) for x in args.sessions.split(",") if x.strip()]:
            rounds = []
            for _ in range(args.rounds):
                rounds.append(asyncio.run(run_phone_round(ws_urls, [grant], n, speech, pids, args.stagger_ms)))
                phone_word_errors(rounds[-1][0])
            report_row(n, rounds)
    finally:
        for server in servers:
            server.stop()


if __name__ == "__main__":
    main()
