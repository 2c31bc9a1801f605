"""WebRTC latency and cost benchmark (not a test): callers talk to an agent of a real Daphne server over
WebRTC (testing/webrtc.py: an aiortc peer per caller, Opus both ways, the `events` data channel) and, for
comparison, over the browser socket (bench/voice_latency.py's callers).

For each transport and each N of --sessions (1 and 20 by default), N overlapping callers (session i starts
i x --stagger-ms after the first) each open a session through POST /public/v1/agents/{id}/realtime-sessions,
hear the greeting, say one eSpeak NG sentence and wait for the answer. Printed per row:
  - latency: from the end of the caller's sentence (the last frame of it sent by the microphone, which
    runs at real time) to the first answer audio at the client. WebRTC: the first 20 ms frame of the
    agent's track louder than RMS 50 (the track carries silence between the agent's words; the server
    paces it at real time, so this is when the answer starts to play, less the client's jitter buffer).
    Socket: the first `output_audio` message (voice_latency's measure: the socket's audio runs up to
    REALTIME_OUTPUT_LEAD_MS ahead of playback);
  - p50 / p95 / max, session start-up (request to session.started: for WebRTC the offer, ICE and DTLS),
    word error rate, failures (a WebRTC caller who hears the agent during its own sentence, a turn taken
    mid-sentence, is a failure: its latency would mean nothing; each caller speaks once the greeting has
    played out at its end);
  - the clients' worst event-loop lag (this process plays every caller: aiortc encodes and decodes Opus
    for each; a loaded client sends and hears late, which the figures then include), and the server's
    (voiceagent_event_loop_lag_seconds from GET /metrics over the round: the upper bound of its p95 bucket);
  - server CPU seconds per session over the round (utime + stime of the server and its recognition
    workers / N).
Then the steady cost of a connected session: --hold N callers per transport connected and listening (the
greeting played, their microphones sending silence, the agent quiet) for --hold-s seconds; the server's
CPU over that window, minus the same window with no session, per session, as % of one core. For WebRTC
that is Opus decoding of the microphone and encoding of the agent's track (silence included: the track
always sends), SRTP both ways, the data channel's keep-alives, the resampling at the edge, and the
engine's voice activity detection on the caller's audio, which the socket's sessions pay too.

One Daphne process (--servers 1: CPU figures per process) on a fresh database (bench/voice_latency.py's:
SQLite under var/, or DATABASE_URL's with `_voicebench` appended). Every packet stays on loopback: the
server and this process offer host candidates on 127.0.0.1 only (WEBRTC_HOST_ADDRESSES), no STUN.

Usage: .venv/bin/python bench/webrtc_latency.py [--sessions 1,20] [--hold 20] [--hold-s 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.session_load import (  # noqa: E402 - after the repository root is put on sys.path
    histogram_delta,
    histogram_quantile,
    scrape_lag,
)
from bench.voice_latency import (  # noqa: E402 - after the repository root is put on sys.path
    SENTENCES,
    Result,
    bench_env,
    cpu_seconds,
    one_session,
    seed,
    word_errors,
)
from testing.figures import percentile  # noqa: E402 - after the repository root is put on sys.path

LAGS: list[float] = []  # the clients' worst loop lag of each round
SERVER_LAGS: list[float] = []  # the server's event-loop lag (p95 upper bound, GET /metrics) of each round
LOOPBACK = {"WEBRTC_HOST_ADDRESSES": "127.0.0.1", "WEBRTC_ICE_SERVERS": ""}
SILENCE_20MS = b"\x00\x00" * 320


async def webrtc_session(http: httpx.AsyncClient, agent_id: str, speech: bytes, sentence: str, delay: float) -> Result:
    """One caller over WebRTC: the greeting, the sentence, the answer, `stop`."""
    from testing.clients import is_type
    from testing.webrtc import WebRtcClient, rms

    result = Result()
    await asyncio.sleep(delay)
    loop = asyncio.get_running_loop()
    asked = loop.time()
    try:
        response = await http.post(f"/public/v1/agents/{agent_id}/realtime-sessions", json={"transport": "webrtc"})
        response.raise_for_status()
        async with WebRtcClient(response.json()["webrtc"]["offerUrl"], http) as client:
            answered = await client.offer()
            if answered.status_code != 201:
                raise RuntimeError(f"offer refused: {answered.status_code} {answered.text[:200]}")
            started = await client.wait_for(is_type("session.started"), timeout=120)
            result.call_id = client.messages[started].message["callId"]
            result.startup = loop.time() - asked
            await client.wait_for(is_type("transcript", role="assistant"), after=started, timeout=60)
            await client.quiet(0.5)  # the greeting has played out here too (a loaded client hears it late)
            before = len(client.messages)
            speech_start = loop.time()
            speech_end = await client.say(speech)
            if any(rms(pcm) > 300 for at, pcm in client.heard if speech_start <= at < speech_end):
                raise RuntimeError("the agent spoke before the end of the sentence (a turn taken mid-sentence)")
            result.latency = await client.first_sound(after=speech_end) - speech_end
            user = await client.wait_for(is_type("transcript", role="user"), after=before, timeout=30)
            result.heard = client.messages[user].message["text"]
            result.errors, result.words = word_errors(sentence, result.heard)
            await client.wait_for(is_type("transcript", role="assistant"), after=user, timeout=60)
            await client.send({"type": "stop"})
            await client.wait_closed(timeout=30)
    except Exception as exc:  # noqa: BLE001 - a failed session is counted and reported, not fatal
        result.failure = f"{type(exc).__name__}: {exc}"
    return result


class LoopLag:
    """How late this process's event loop runs a 20 ms ticker: the clients' own load (a late client sends
    its microphone late and hears the agent late). `worst` is the worst lateness seen."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LoopLag:
        self._task = asyncio.create_task(self._tick())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + 0.02
            await asyncio.sleep(0.02)
            self.worst = max(self.worst, loop.time() - due)


async def run_round(
    transport: str,
    base_url: str,
    api_key: str,
    agent_id: str,
    n: int,
    speech: dict[str, bytes],
    pid: int,
    stagger_ms: int,
    first: int,
) -> tuple[list[Result], float]:
    headers = {"Authorization": f"Bearer {api_key}"}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60) as http:
        picks = [SENTENCES[(first + i) % len(SENTENCES)] for i in range(n)]
        cpu_before = cpu_seconds([pid])
        if transport == "webrtc":
            sessions = [
                webrtc_session(http, agent_id, speech[s], s, i * stagger_ms / 1000) for i, s in enumerate(picks)
            ]
        else:
            sessions = [
                one_session(http, agent_id, speech[s], s, 20, i * stagger_ms / 1000) for i, s in enumerate(picks)
            ]
        before = await scrape_lag(http, "unset")
        async with LoopLag() as lag:
            results = list(await asyncio.gather(*sessions))
        LAGS.append(lag.worst)
        after = await scrape_lag(http, "unset")
        if isinstance(after, dict) and (before is None or isinstance(before, dict)):
            SERVER_LAGS.append(histogram_quantile(histogram_delta(before, after), 0.95))
        else:
            print(f"    server lag not measured: {after if not isinstance(after, dict) else before}")
        return results, cpu_seconds([pid]) - cpu_before


def report(transport: str, n: int, rounds: list[tuple[list[Result], float]]) -> None:
    results = [r for round_results, _ in rounds for r in round_results]
    latencies = [r.latency * 1000 for r in results if r.latency is not None]
    starts = [r.startup * 1000 for r in results if r.startup is not None]
    failures = [r.failure for r in results if r.failure]
    errors, words = sum(r.errors for r in results), sum(r.words for r in results)
    cpu = sum(c for _, c in rounds) / max(1, len(results))
    nan = float("nan")
    print(
        f"{transport:>9} {n:>3} {len(latencies):>8} {statistics.median(latencies) if latencies else nan:>7.0f} "
        f"{percentile(latencies, 95) if latencies else nan:>7.0f} {max(latencies) if latencies else nan:>7.0f} "
        f"{statistics.median(starts) if starts else nan:>12.0f} {cpu:>13.2f} {errors / words if words else nan:>5.2f} "
        f"{len(failures):>6} {1000 * max(LAGS[-len(rounds) :]):>13.0f} "
        f"{1000 * max(SERVER_LAGS[-len(rounds) :] or [nan]):>14g}",
        flush=True,
    )
    for failure in failures[:3]:
        print(f"    failed session: {failure}")


async def hold(transport: str, base_url: str, api_key: str, agent_id: str, n: int, seconds: float, pid: int) -> float:
    """N sessions connected and listening for `seconds`: the server's CPU seconds over that window."""
    from testing.clients import VoiceClient, is_type
    from testing.webrtc import WebRtcClient

    headers = {"Authorization": f"Bearer {api_key}"}
    body = {"transport": "webrtc"} if transport == "webrtc" else {}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60) as http:
        clients: list[WebRtcClient | VoiceClient] = []
        streams: list[asyncio.Task[None]] = []
        quiet = asyncio.Event()

        async def microphone(client: VoiceClient) -> None:
            while not quiet.is_set():
                await client.stream(SILENCE_20MS * 5)

        try:
            for _ in range(n):
                session = (await http.post(f"/public/v1/agents/{agent_id}/realtime-sessions", json=body)).json()
                if transport == "webrtc":
                    peer = WebRtcClient(session["webrtc"]["offerUrl"], http)
                    clients.append(peer)
                    assert (await peer.offer()).status_code == 201
                else:
                    socket = VoiceClient(session["websocketUrl"])
                    clients.append(socket)
                    await socket.__aenter__()
                    streams.append(asyncio.create_task(microphone(socket)))
            for client in clients:  # every greeting has played: the agents are quiet
                await client.wait_for(is_type("agent_speech.ended"), timeout=120)
            cpu_before = cpu_seconds([pid])
            await asyncio.sleep(seconds)
            used = cpu_seconds([pid]) - cpu_before
        finally:
            quiet.set()
            for stream in streams:
                stream.cancel()
            for client in clients:
                await client.send({"type": "stop"})
                if isinstance(client, WebRtcClient):
                    await client.close()
                else:
                    await client.__aexit__(None)
    return used


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="1,20", help="comma-separated numbers of concurrent sessions")
    parser.add_argument("--transports", default="webrtc,websocket")
    parser.add_argument("--rounds", type=int, default=0, help="rounds per N (0: enough for every sentence once)")
    parser.add_argument("--stagger-ms", type=int, default=250, help="start session i this many ms x i after the first")
    parser.add_argument(
        "--hold", type=int, default=20, help="sessions held connected for the steady CPU figure (0: none)"
    )
    parser.add_argument("--hold-s", type=float, default=20.0, help="seconds the sessions are held")
    args = parser.parse_args()

    from testing.daphne import DaphneServer
    from testing.servers import free_port

    env = {**bench_env(), **LOOPBACK}
    agent_id, api_key = seed(env)  # Django is set up in this process on the same environment: 127.0.0.1 only
    port = free_port()
    server = DaphneServer(
        env={**env, "REALTIME_WS_URL": f"ws://127.0.0.1:{port}"},
        port=port,
        log_path=ROOT / "var" / "bench-webrtc-daphne.log",
    ).start()
    assert server.process is not None
    pid = server.process.pid
    try:
        from realtime.engine.speech.espeak import synthesize
        from testing.voice import to_16k

        speech = {s: to_16k(synthesize(s, language="en-US", voice_name="eve")) for s in SENTENCES}
        transports = [t for t in args.transports.split(",") if t]
        print(
            f"one server process; {os.cpu_count()} cores; transports {', '.join(transports)}; staggered {args.stagger_ms} ms"
        )
        for transport in transports:  # warm-up: models loaded, the agent's language model built
            asyncio.run(run_round(transport, server.http_url, api_key, agent_id, 1, speech, pid, 0, 0))
        print(
            f"{'transport':>9} {'N':>3} {'measured':>8} {'p50 ms':>7} {'p95 ms':>7} {'max ms':>7} "
            f"{'start p50 ms':>12} {'CPU s/session':>13} {'WER':>5} {'failed':>6} {'client lag ms':>13} {'server lag p95':>14}"
        )
        for n in [int(x) for x in args.sessions.split(",") if x.strip()]:
            for transport in transports:
                count = args.rounds or -(-len(SENTENCES) // n)
                rounds = [
                    asyncio.run(
                        run_round(transport, server.http_url, api_key, agent_id, n, speech, pid, args.stagger_ms, i * n)
                    )
                    for i in range(count)
                ]
                report(transport, n, rounds)
        if args.hold:
            idle_before = cpu_seconds([pid])
            time.sleep(args.hold_s)
            idle = cpu_seconds([pid]) - idle_before
            print(
                f"steady cost of a connected, listening session ({args.hold} at once, {args.hold_s:g} s; idle server {100 * idle / args.hold_s:.1f} % of a core):"
            )
            for transport in transports:
                used = asyncio.run(hold(transport, server.http_url, api_key, agent_id, args.hold, args.hold_s, pid))
                per_session = (used - idle) / args.hold / args.hold_s * 100
                print(
                    f"{transport:>9}: {per_session:.2f} % of a core per session ({used:.1f} CPU s in all)", flush=True
                )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
