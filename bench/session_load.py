"""Session load benchmark (not a test): N concurrent browser sessions (200 by default) on the
speech-to-speech engine (VOICE_ENGINE=speech-to-speech) of one Daphne process, against the scripted OpenAI
Realtime provider of the tests (testing/speech_to_speech_provider.py).

Three processes: Daphne (testing/daphne.py DaphneServer), the scripted provider (a process of
its own with a small control endpoint through which this script ends each caller turn and reads the
provider's timestamps), and this one, whose single asyncio loop plays every browser (precomputed audio
frames, one ticker for every microphone).

  1. ramp: sessions are created through POST /public/v1/agents/{id}/realtime-sessions and their
     sockets opened one after the other (--ramp-s spreads them); each hears its greeting;
  2. talk: right after its greeting every caller speaks --turns turns: --speech-ms of a tone in 20 ms
     PCM16 16 kHz frames at real time (--frame-ms), then the provider's server VAD ends the turn and
     the provider answers at once with a scripted tone (0.9 s), then --pause-ms. With --mic turns
     (the default) frames are sent only while the caller speaks; with --mic continuous silence is sent
     in between, as the browser client does (about 2.5 times the frames);
  3. hang up: each sends `stop` after its last answer, once all N have been open at once (streaming
     silence while it waits), the hang-ups spread over --hangup-s; the server then gets up to 60 s to
     close the call records before it is stopped.

It prints: sessions started / completed (closed 1000 after `stop`, call record `completed`), errors
(any `error` message, unexpected close, REST failure or timeout: must be 0), the engine's added latency
per turn as bench/s2s_overhead.py defines it (provider first audio delta -> first output_audio at the
client; client input_audio frame -> input_audio_buffer.append at the provider), the end of the caller's
audio -> first output_audio (the provider answers at once, so nothing scripted to subtract), server
RSS before / with N open / after / per session, server CPU, and event-loop lag: the server's own
histogram `voiceagent_event_loop_lag_seconds` from GET /metrics (Authorization: Bearer
$METRICS_TOKEN) when the endpoint exists, and always the "response lag" of GET /livez timed every
0.5 s during the load (what a health check would see). Both ends of every span are time.monotonic()
of this machine (one clock for every process).

Database: a fresh SQLite file under var/, or the PostgreSQL database named by DATABASE_URL with
`_sessionload` appended (REDIS_URL, if set, is passed to the server). The bench organization is on
the "agency" plan; per-plan limits on concurrent sessions or API requests, where the plan has them,
are lifted for the bench's own organization in its own database (bench/api_load.py bench_organization).
Bounded: everything stops after --deadline-s (300 s) whatever happens.

Usage: .venv/bin/python bench/session_load.py [--sessions 200] [--turns 3] [--ramp-s 40]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import re
import secrets
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.api_load import bench_organization  # noqa: E402 - after the repository root is put on sys.path
from bench.voice_latency import cpu_seconds, percentile, with_children  # noqa: E402 - after the repository root is put on sys.path
from testing.stores import bench_database_url  # noqa: E402 - after the repository root is put on sys.path

SECRET = "session-load-bench-secret-0123456789abcdef"
MODEL = "scripted-realtime"
ANSWER = "Sure, I can help you with that order today."  # 9 words: 0.9 s of tone
GREETING = "Hello, this is Ava from Acme. How can I help?"
LAG_METRIC = "voiceagent_event_loop_lag_seconds"
IN_RATE = 16000


# --- environment and database -----------------------------------------------------------------
def bench_env(provider_url: str) -> dict[str, str]:
    database_url = bench_database_url("sessionload", ROOT / "var")
    return {
        "LOG_LEVEL": "WARNING",
        "REALTIME_TOKEN_SECRET": SECRET,
        "DATABASE_URL": database_url,
        "VOICE_ENGINE": "speech-to-speech",
        "REALTIME_PROVIDER_URL": provider_url,
        "REALTIME_PROVIDER_MODEL": MODEL,
        "REALTIME_PROVIDER_API_KEY": "sk-bench",
        # The Prometheus endpoint's token (a random one per run, never printed).
        "METRICS_TOKEN": os.environ.get("METRICS_TOKEN") or secrets.token_urlsafe(24),
    }


def marker(index: int) -> str:
    return f"(bench caller {index}.)"


def seed(env: dict[str, str], agents: int) -> tuple[list[str], str]:
    """Migrate the bench database; an organization on the agency plan with one active agent per caller
    (its instructions carry marker(i): the provider tells which connection is whose by its session.update)."""
    organization, api_key = bench_organization(env, "Session load bench")
    from django.utils import timezone

    from agents.models import Agent

    now = timezone.now()
    created = Agent.objects.bulk_create(
        [
            Agent(
                organization=organization,
                name=f"Ava {index}",
                status="active",
                identity="Ava, the assistant of the Acme shop",
                instructions=f"Answer questions about orders. {marker(index)}",
                greeting_type="static",
                static_greeting=GREETING,
                updated_at=now,
            )
            for index in range(agents)
        ]
    )
    ids = (
        [str(agent.pk) for agent in created]
        if created[0].pk
        else [
            str(pk)
            for pk in Agent.objects.filter(organization=organization)
            .order_by("created_at", "name")
            .values_list("pk", flat=True)
        ]
    )
    return ids, api_key


def call_statuses() -> dict[str, int]:
    from django.db import connection
    from django.db.models import Count

    from calls.models import Call

    connection.close()  # the server wrote them: a fresh connection
    rows = Call.objects.filter(organization__name="Session load bench").values("status").annotate(n=Count("id"))
    return {row["status"]: row["n"] for row in rows}


def rss_bytes(pid: int) -> int:
    total = 0
    for child in with_children([pid]):
        try:
            for line in Path(f"/proc/{child}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


# --- event-loop lag ----------------------------------------------------------------------------
def parse_histogram(text: str, name: str) -> dict[str, object] | None:
    """A Prometheus histogram from the text exposition format, summed over its label sets (one per
    process in multi-process mode): {"buckets": {le: cumulative count}, "sum": s, "count": n}."""
    buckets: dict[float, float] = {}
    total = count = 0.0
    found = False
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        metric, _, rest = line.partition(" ")
        value = float(rest.split()[0])
        base = metric.split("{", 1)[0]
        if base == f"{name}_bucket":
            labels = metric.split("{", 1)[1].rstrip("}")
            le = next(part.split("=", 1)[1].strip('"') for part in labels.split(",") if part.startswith("le="))
            bound = float("inf") if le == "+Inf" else float(le)
            buckets[bound] = buckets.get(bound, 0.0) + value
            found = True
        elif base == f"{name}_sum":
            total += value
        elif base == f"{name}_count":
            count += value
    if not found:
        return None
    return {"buckets": buckets, "sum": total, "count": count}


def histogram_delta(before: dict | None, after: dict) -> dict:
    if before is None:
        return after
    return {
        "buckets": {le: n - before["buckets"].get(le, 0.0) for le, n in after["buckets"].items()},
        "sum": after["sum"] - before["sum"],
        "count": after["count"] - before["count"],
    }


def histogram_quantile(histogram: dict, q: float) -> float:
    """The upper bound of the bucket holding quantile q (what Prometheus' histogram_quantile bounds)."""
    target = q * histogram["count"]
    for bound in sorted(histogram["buckets"]):
        if histogram["buckets"][bound] >= target:
            return bound
    return float("inf")


async def scrape_lag(http: httpx.AsyncClient, token: str) -> dict | str | None:
    """The lag histogram, None when the endpoint is absent (404), or a string saying what went wrong."""
    try:
        response = await http.get("/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    except httpx.HTTPError as exc:
        return f"GET /metrics failed ({type(exc).__name__})"
    if response.status_code == 404:
        return None
    if response.status_code != 200:
        return f"GET /metrics answered {response.status_code}"
    histogram = parse_histogram(response.text, LAG_METRIC)
    return histogram if histogram is not None else f"GET /metrics has no {LAG_METRIC}"


async def probe_response_lag(http: httpx.AsyncClient, samples: list[float], failures: list[str]) -> None:
    """GET /livez every 0.5 s: its response time (ms) while the load runs."""
    loop = asyncio.get_running_loop()
    while True:
        start = loop.time()
        try:
            response = await http.get("/livez", timeout=10)
            if response.status_code != 200:
                failures.append(f"GET /livez answered {response.status_code}")
        except httpx.HTTPError as exc:
            failures.append(f"GET /livez failed ({type(exc).__name__})")
        samples.append((loop.time() - start) * 1000)
        await asyncio.sleep(max(0.0, start + 0.5 - loop.time()))


# --- the provider, in a process of its own ----------------------------------------------------
def serve_provider(control_port: int) -> None:
    """The scripted provider on loopback, and a control endpoint for this script: GET /info (the
    provider's URL and its number of connections), GET /find?marker= (the index of the connection
    whose instructions carry a caller's marker), POST /turn/{i} (connection i's caller ends a turn;
    the provider answers with ANSWER; returns the index of that answer's first-audio timestamp),
    GET /times/{i} (connection i's first-audio and append timestamps, time.monotonic())."""
    from aiohttp import web

    from testing.speech_to_speech_provider import ProviderServer, Say

    async def run() -> None:
        provider = await ProviderServer().astart()
        indexed: dict[str, int] = {}  # the marker in a connection's instructions -> its index

        async def info(request: web.Request) -> web.Response:
            return web.json_response({"url": provider.url, "connections": len(provider.connections)})

        async def find(request: web.Request) -> web.Response:
            """The index of the connection whose session.update carries the marker (long poll, 60 s)."""
            wanted = request.query["marker"]
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 60
            while loop.time() < deadline:
                if wanted in indexed:
                    return web.json_response({"index": indexed[wanted]})
                await asyncio.sleep(0.05)
            return web.json_response({"index": -1})

        async def scan() -> None:
            """Each connection is read once, after its first session.update: marker -> index."""
            unread = 0
            waiting: list[int] = []
            while True:
                waiting.extend(range(unread, len(provider.connections)))
                unread = len(provider.connections)
                for index in list(waiting):
                    instructions = str(provider.connections[index].session.get("instructions") or "")
                    if instructions:
                        waiting.remove(index)
                        found = re.search(r"\(bench caller \d+\.\)", instructions)
                        if found:
                            indexed[found.group(0)] = index
                await asyncio.sleep(0.02)

        async def turn(request: web.Request) -> web.Response:
            connection = provider.connections[int(request.match_info["index"])]
            known = len(connection.first_audio_times)
            await connection.caller_turn("Where is my order?", Say(ANSWER))
            return web.json_response({"known": known})

        async def times(request: web.Request) -> web.Response:
            connection = provider.connections[int(request.match_info["index"])]
            return web.json_response(
                {
                    "firstAudio": connection.first_audio_times,
                    "appends": list(zip(connection.append_times, connection.append_ends, strict=True)),
                }
            )

        app = web.Application()
        app.router.add_get("/info", info)
        app.router.add_get("/find", find)
        app.router.add_post("/turn/{index}", turn)
        app.router.add_get("/times/{index}", times)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", control_port).start()
        await scan()

    asyncio.run(run())


class RemoteProvider:
    def __init__(self) -> None:
        from testing.servers import free_port

        self.port = free_port()
        self.process = subprocess.Popen([sys.executable, __file__, "--serve-provider", str(self.port)], cwd=ROOT)
        self.http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.port}", timeout=60)
        self.url = ""

    async def start(self) -> RemoteProvider:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while True:
            try:
                self.url = (await self.http.get("/info")).json()["url"]
                return self
            except httpx.TransportError:
                if loop.time() > deadline or self.process.poll() is not None:
                    raise RuntimeError("the provider process did not start") from None
                await asyncio.sleep(0.1)

    async def find(self, index: int) -> int:
        return (await self.http.get("/find", params={"marker": marker(index)})).json()["index"]

    async def turn(self, index: int) -> int:
        response = await self.http.post(f"/turn/{index}")
        response.raise_for_status()
        return response.json()["known"]

    async def times(self, index: int) -> tuple[list[float], list[tuple[float, int]]]:
        body = (await self.http.get(f"/times/{index}")).json()
        return body["firstAudio"], body["appends"]

    async def stop(self) -> None:
        await self.http.aclose()
        self.process.terminate()
        await asyncio.to_thread(self.process.wait, 10)


# --- the callers -------------------------------------------------------------------------------
def frame_message(pcm16: bytes) -> str:
    return json.dumps({"type": "input_audio", "audio": base64.b64encode(pcm16).decode("ascii")})


def mic_frames(frame_ms: int) -> tuple[str, str]:
    """(silence, speech) as ready-to-send input_audio messages: the client does no work per frame."""
    samples = IN_RATE * frame_ms // 1000
    speech = (3000 * np.sin(2 * np.pi * 300 * np.arange(samples) / IN_RATE)).astype("<i2").tobytes()
    return frame_message(b"\x00\x00" * samples), frame_message(speech)


@dataclass
class Caller:
    index: int
    speaking: bool = False
    holding: bool = False  # done talking, waiting for the others to open: the microphone sends silence
    client: object = None
    connection: int = -1  # its provider connection's index
    greeted_at: float = 0.0
    arrivals: list[tuple[int, float, float]] = field(default_factory=list)  # (answer index, sent, arrived)
    sent: list[float] = field(default_factory=list)  # time.monotonic() of each frame sent
    errors: list[str] = field(default_factory=list)
    answers: list[float] = field(default_factory=list)  # ms, provider first delta -> client output_audio
    greeting: float | None = None
    turn_latency: list[float] = field(default_factory=list)  # ms, end of caller audio -> first output_audio
    relays: list[float] = field(default_factory=list)
    completed: bool = False
    step: str = "creating the session"
    _audio: asyncio.Future | None = None
    _said: asyncio.Event = field(default_factory=asyncio.Event)

    def on_message(self, item: object) -> None:
        message = item.message  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
        kind = message.get("type")
        if kind == "output_audio":
            if self._audio is not None and not self._audio.done():
                self._audio.set_result(item.at)  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
        elif kind == "transcript" and message.get("role") == "assistant":
            self._said.set()
        elif kind == "error":
            self.errors.append(f"error {message.get('code')}: {message.get('message')}")
        self.client.messages.clear()  # type: ignore[attr-defined]  # keep the client light: nothing kept

    def expect_answer(self) -> asyncio.Future:
        self._audio = asyncio.get_running_loop().create_future()
        self._said.clear()
        return self._audio

    async def answered(self, timeout: float) -> float:
        assert self._audio is not None
        return await asyncio.wait_for(asyncio.shield(self._audio), timeout)

    async def said(self, timeout: float) -> None:
        await asyncio.wait_for(self._said.wait(), timeout)


class Load:
    def __init__(
        self, args: argparse.Namespace, provider: RemoteProvider, base_url: str, api_key: str, agent_ids: list[str]
    ):
        self.args = args
        self.provider = provider
        self.base_url = base_url
        self.api_key = api_key
        self.agent_ids = agent_ids
        self.silence, self.speech = mic_frames(args.frame_ms)
        self.callers: list[Caller] = []
        self.open: list[Caller] = []  # callers whose microphone streams
        self.all_open = asyncio.Event()
        self.failures: list[str] = []

    async def microphones(self) -> None:
        """One ticker for every microphone: each open caller sends one frame per frame_ms, at real
        time, the callers spread over 4 slots of the frame so that their frames do not arrive at once."""
        loop = asyncio.get_running_loop()
        slots = 4
        step = self.args.frame_ms / 1000 / slots
        start = loop.time()
        tick = 0
        while True:
            await asyncio.sleep(max(0.0, start + tick * step - loop.time()))
            for caller in list(self.open):
                if caller.index % slots != tick % slots or caller.client.closed:  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
                    continue
                if not caller.speaking and not caller.holding and self.args.mic == "turns":
                    continue
                caller.sent.append(time.monotonic())
                try:
                    await caller.client.send_raw(self.speech if caller.speaking else self.silence)  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
                except Exception as exc:  # noqa: BLE001 - counted, the others go on
                    caller.errors.append(f"sending audio failed: {type(exc).__name__}: {exc}")
                    self.open.remove(caller)
            tick += 1

    async def open_one(self, http: httpx.AsyncClient, caller: Caller) -> None:
        from testing.clients import VoiceClient

        response = await http.post(f"/public/v1/agents/{self.agent_ids[caller.index]}/realtime-sessions")
        if not response.is_success:
            raise RuntimeError(f"POST realtime-sessions answered {response.status_code}: {response.text[:200]}")
        caller.client = VoiceClient(response.json()["websocketUrl"], on_message=caller.on_message)
        caller.expect_answer()
        await caller.client.__aenter__()  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
        # Its provider connection: the one whose instructions carry this caller's marker. Its greeting
        # is that connection's first response.
        caller.step = "waiting for the engine's provider connection"
        caller.connection = await self.provider.find(caller.index)
        if caller.connection < 0:
            raise RuntimeError("the engine did not connect to the provider")
        self.open.append(caller)
        caller.step = "waiting for the greeting's audio"
        caller.greeted_at = await caller.answered(60)
        caller.step = "waiting for the greeting's end"
        await caller.said(60)

    async def converse(self, caller: Caller, http: httpx.AsyncClient) -> None:
        args = self.args
        await self.open_one(http, caller)
        for _ in range(args.turns):
            caller.speaking = True
            await asyncio.sleep(args.speech_ms / 1000)
            caller.speaking = False
            # The end of the caller's audio: the last speech frame was sent one frame ago at most.
            ended = time.monotonic()
            caller.expect_answer()
            caller.step = "ending a turn at the provider"
            known = await self.provider.turn(caller.connection)
            caller.step = "waiting for the answer's audio"
            arrived = await caller.answered(30)
            caller.arrivals.append((known, ended, arrived))
            caller.turn_latency.append((arrived - ended) * 1000)
            caller.step = "waiting for the answer's end"
            await caller.said(30)
            await asyncio.sleep(args.pause_ms / 1000)
        # Hang up only once all N have been open at once (the ramp is over); until then the microphone
        # streams silence, as an open browser page does (and the server's input-idle timer wants).
        caller.holding = True
        await self.all_open.wait()
        # Callers hang up spread over --hangup-s, as real ones do (not all in the same instant).
        await asyncio.sleep(args.hangup_s * caller.index / args.sessions)
        if caller in self.open:
            self.open.remove(caller)
        # Every frame sent reaches the provider, but what the resampler holds back (less than a frame).
        # The engine sends each frame as one append while it keeps up and merges the frames that queued
        # up into one append when it does not, so arrivals are matched by the audio they carry: an
        # append that ends with the audio of frame j was made possible by the send of frame j + 1.
        frame_bytes = args.frame_ms * 48  # 24 kHz PCM16 at the provider
        expected = (len(caller.sent) - 1) * frame_bytes
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while True:
            first_audio, arrivals = await self.provider.times(caller.connection)
            received = arrivals[-1][1] if arrivals else 0
            if received >= expected or loop.time() > deadline:
                break
            await asyncio.sleep(0.2)
        caller.greeting = (caller.greeted_at - first_audio[0]) * 1000
        caller.answers = [(arrived - first_audio[known]) * 1000 for known, _, arrived in caller.arrivals]
        if received < expected:
            # Audio dropped on the way (the engine drops caller audio when the provider socket does not
            # keep up).
            caller.errors.append(f"{(expected - received) // frame_bytes} audio frames never reached the provider")
        else:
            last = len(caller.sent) - 1
            caller.relays = [(arrived - caller.sent[min(end // frame_bytes, last)]) * 1000 for arrived, end in arrivals]
        caller.step = "hanging up"
        stop_sent = time.monotonic()
        await caller.client.send({"type": "stop"})  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
        code = await caller.client.wait_closed(60)  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
        if code == 1000:
            caller.completed = True
        else:
            waited = time.monotonic() - stop_sent
            error = caller.client.close_error  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
            caller.errors.append(f"closed with {code} after stop")
            print(f"  {caller.client.url[-40:]}: {code} {waited:.1f} s after stop: {error!r}", flush=True)  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily

    async def run_caller(self, caller: Caller, http: httpx.AsyncClient) -> None:
        try:
            await self.converse(caller, http)
        except Exception as exc:  # noqa: BLE001 - every failure is counted and printed
            if caller.client is not None and caller.client.closed:  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
                caller.errors.append(f"socket closed ({caller.client.close_code}) {caller.step}: {type(exc).__name__}")  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
            else:
                caller.errors.append(f"{type(exc).__name__} {caller.step}: {exc}")
        finally:
            if caller in self.open:
                self.open.remove(caller)
            if caller.client is not None:
                await caller.client.__aexit__(None, None, None)  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily

    def other_cpu(self) -> tuple[float, float]:
        """CPU seconds of the provider process and of this one (the clients)."""
        mine = os.times()
        return cpu_seconds([self.provider.process.pid]), mine.user + mine.system  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily

    async def run(self, pid: int) -> dict:
        args = self.args
        headers = {"Authorization": f"Bearer {self.api_key}"}
        limits = httpx.Limits(max_connections=8)
        async with (
            httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=60, limits=limits) as http,
            httpx.AsyncClient(base_url=self.base_url, timeout=10) as probe,
        ):
            token = os.environ["METRICS_TOKEN"]
            lag_before = await scrape_lag(probe, token)
            response_lag: list[float] = []
            rss_before, cpu_before, wall_before = rss_bytes(pid), cpu_seconds([pid]), time.monotonic()
            others_before = self.other_cpu()
            microphones = asyncio.create_task(self.microphones())
            prober = asyncio.create_task(probe_response_lag(probe, response_lag, self.failures))
            tasks = []
            self.callers = [Caller(index) for index in range(args.sessions)]
            loop = asyncio.get_running_loop()
            ramp_start = loop.time()
            deadline = ramp_start + args.deadline_s
            for caller in self.callers:
                await asyncio.sleep(max(0.0, ramp_start + caller.index * args.ramp_s / args.sessions - loop.time()))
                tasks.append(asyncio.create_task(self.run_caller(caller, http)))
            # The ramp is over once every socket is open and greeted (or failed).
            while not all(t.done() or c.greeted_at > 0 for c, t in zip(self.callers, tasks, strict=True)):
                if loop.time() > deadline:
                    break
                await asyncio.sleep(0.1)
            ramp_seconds = loop.time() - ramp_start
            rss_open = rss_bytes(pid)
            open_count = sum(1 for c in self.callers if c.client is not None and not c.client.closed)  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
            self.all_open.set()
            _, unfinished = await asyncio.wait(tasks, timeout=max(0.0, deadline - loop.time()))
            for task in unfinished:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if unfinished:
                self.failures.append(f"{len(unfinished)} sessions unfinished at the deadline (--deadline-s)")
            cpu, wall = cpu_seconds([pid]) - cpu_before, time.monotonic() - wall_before
            others = [after - before for after, before in zip(self.other_cpu(), others_before, strict=True)]
            prober.cancel()
            microphones.cancel()
            lag_after = await scrape_lag(probe, token)
            await asyncio.sleep(3)  # the server's calls close; then its memory once they are gone
            rss_after = rss_bytes(pid)
        lag: dict | str | None
        if isinstance(lag_after, dict):
            lag = histogram_delta(lag_before if isinstance(lag_before, dict) else None, lag_after)
        else:
            lag = lag_after
        return {
            "ramp_seconds": ramp_seconds,
            "open": open_count,
            "rss": (rss_before, rss_open, rss_after),
            "cpu": cpu,
            "others": others,
            "wall": wall,
            "lag": lag,
            "response_lag": response_lag,
        }


async def warm_up(
    provider: RemoteProvider, base_url: str, api_key: str, agent_ids: list[str], args: argparse.Namespace
) -> None:
    """One session of one turn: the server's imports and first connections are not in the figures."""
    warm = argparse.Namespace(**{**vars(args), "sessions": 1, "turns": 1, "ramp_s": 0, "hangup_s": 0})
    load = Load(warm, provider, base_url, api_key, agent_ids)
    microphones = asyncio.create_task(load.microphones())
    caller = Caller(args.sessions)  # the agent after the callers' ones
    load.all_open.set()
    async with httpx.AsyncClient(base_url=base_url, headers={"Authorization": f"Bearer {api_key}"}) as http:
        await load.run_caller(caller, http)
    microphones.cancel()
    if caller.errors:
        raise RuntimeError(f"the warm-up session failed: {caller.errors}")


def line(label: str, values: list[float]) -> str:
    if not values:
        return f"{label}: none"
    return (
        f"{label}: p50 {statistics.median(values):.1f} ms, p95 {percentile(values, 95):.1f} ms, "
        f"max {max(values):.1f} ms ({len(values)} samples)"
    )


async def main_async(args: argparse.Namespace) -> None:
    from testing.daphne import DaphneServer
    from testing.servers import free_port

    provider = await RemoteProvider().start()
    try:
        env = bench_env(provider.url)
        agent_ids, api_key = await asyncio.to_thread(seed, env, args.sessions + 1)
        port = free_port()
        server = DaphneServer(
            env={**env, "REALTIME_WS_URL": f"ws://127.0.0.1:{port}"},
            port=port,
            log_path=ROOT / "var" / "bench-session-load-daphne.log",
        )
        await asyncio.to_thread(server.start)
        try:
            assert server.process is not None
            pid = server.process.pid
            engine = "PostgreSQL" if env["DATABASE_URL"].startswith("postgres") else "SQLite"
            print(
                f"one Daphne process ({engine}{', Redis' if os.environ.get('REDIS_URL') else ''}), "
                f"VOICE_ENGINE=speech-to-speech against the scripted provider on loopback; {os.cpu_count()} CPUs; "
                "plan limits lifted for the bench"
            )
            await warm_up(provider, server.http_url, api_key, agent_ids, args)
            load = Load(args, provider, server.http_url, api_key, agent_ids)
            result = await asyncio.wait_for(load.run(pid), args.deadline_s + 120)
            # The server closes each call record after its socket: give it up to 60 s before stopping it.
            for _ in range(120):
                if not (await asyncio.to_thread(call_statuses)).get("active"):
                    break
                await asyncio.sleep(0.5)
        finally:
            await asyncio.to_thread(server.stop)
        statuses = await asyncio.to_thread(call_statuses)
    finally:
        await provider.stop()
    report(args, load, result, statuses)


def report(args: argparse.Namespace, load: Load, result: dict, statuses: dict[str, int]) -> None:
    callers = load.callers
    n = args.sessions
    started = sum(1 for c in callers if c.greeted_at > 0)
    completed = sum(1 for c in callers if c.completed)
    errors = [error for c in callers for error in c.errors] + load.failures
    print(
        f"{n} sessions ramped over {result['ramp_seconds']:.1f} s ({result['open']} open at once), "
        f"{args.turns} turns each ({args.speech_ms} ms of caller speech, {args.frame_ms} ms frames); "
        f"wall {result['wall']:.1f} s"
    )
    print(f"sessions started {started}, completed {completed}, errors {len(errors)}")
    kinds: dict[str, int] = {}
    for error in errors:
        kinds[error[:120]] = kinds.get(error[:120], 0) + 1
    for kind, count in sorted(kinds.items(), key=lambda item: -item[1])[:10]:
        print(f"  {count} x {kind}")
    print(f"call records after the run (warm-up included; the server had up to 60 s to close them): {statuses}")
    print(
        "  "
        + line(
            "provider first audio delta -> output_audio at the client, answers", [a for c in callers for a in c.answers]
        )
    )
    print(
        "  "
        + line(
            "provider first audio delta -> output_audio at the client, greetings",
            [c.greeting for c in callers if c.greeting is not None],
        )
    )
    print(
        "  "
        + line(
            "client input_audio frame -> input_audio_buffer.append at the provider",
            [r for c in callers for r in c.relays],
        )
    )
    print(
        "  "
        + line(
            "end of caller audio -> first output_audio (provider answers at once)",
            [t for c in callers for t in c.turn_latency],
        )
    )
    before, peak, after = result["rss"]
    mib = 1024 * 1024
    print(
        f"server RSS: {before / mib:.0f} MiB before, {peak / mib:.0f} MiB with {result['open']} open, "
        f"{after / mib:.0f} MiB after they closed; {(peak - before) / max(1, result['open']) / 1024:.0f} KiB per session"
    )
    print(
        f"server CPU: {result['cpu']:.1f} s over {result['wall']:.1f} s "
        f"({100 * result['cpu'] / result['wall']:.0f} % of one core; {result['cpu'] / n:.2f} s per session)"
    )
    provider_cpu, client_cpu = result["others"]
    print(
        f"bench CPU over the same time: the scripted provider {provider_cpu:.1f} s "
        f"({100 * provider_cpu / result['wall']:.0f} %), the clients {client_cpu:.1f} s "
        f"({100 * client_cpu / result['wall']:.0f} %); load average at the end {os.getloadavg()[0]:.1f} "
        "(other work on the machine included)"
    )
    lag = result["lag"]
    if isinstance(lag, dict) and lag["count"]:
        print(
            f"event-loop lag ({LAG_METRIC} from GET /metrics, over the load): mean "
            f"{1000 * lag['sum'] / lag['count']:.1f} ms, p50 <= {1000 * histogram_quantile(lag, 0.5):g} ms, "
            f"p95 <= {1000 * histogram_quantile(lag, 0.95):g} ms, p99 <= {1000 * histogram_quantile(lag, 0.99):g} ms "
            f"({lag['count']:.0f} samples)"
        )
    elif lag is None:
        print("event-loop lag: GET /metrics is absent (404); the response lag below stands in for it")
    else:
        print(f"event-loop lag: not measured ({lag}); the response lag below stands in for it")
    print("  " + line("response lag (GET /livez every 0.5 s during the load)", result["response_lag"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200, help="concurrent browser sessions")
    parser.add_argument("--turns", type=int, default=6, help="caller turns per session")
    parser.add_argument("--ramp-s", type=float, default=30.0, help="seconds over which the sockets are opened")
    parser.add_argument(
        "--mic",
        choices=("turns", "continuous"),
        default="turns",
        help="send audio only while the caller speaks, or all the time as the browser client does",
    )
    parser.add_argument("--speech-ms", type=int, default=1500, help="caller speech per turn")
    parser.add_argument("--pause-ms", type=int, default=1000, help="pause after each answer")
    parser.add_argument("--hangup-s", type=float, default=10.0, help="callers hang up spread over this")
    parser.add_argument("--frame-ms", type=int, default=20, help="microphone frame (the browser client: 20)")
    parser.add_argument("--deadline-s", type=float, default=300.0, help="stop after this, whatever happens")
    parser.add_argument("--serve-provider", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_provider:
        serve_provider(args.serve_provider)
        return
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
