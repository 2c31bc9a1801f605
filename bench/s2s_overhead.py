"""Speech-to-speech overhead benchmark (not a test): the time VOICE_ENGINE=speech-to-speech spends outside the
provider, against the scripted provider of the tests (testing/speech_to_speech_provider.py, on
loopback in a thread of this process) and a real Daphne server, over real browser sockets.

For N concurrent sessions (opened one after the other, then run together) it measures:
  - answer overhead: from the provider starting to send a response's first audio delta to that
    audio's first output_audio message arriving at the browser client (the engine's reading and
    decoding, 20 ms framing, the shell's playout and mixer, the browser transport and Daphne);
    the greeting and TURNS caller turns per session;
  - relay overhead: from the client sending a 20 ms input_audio chunk to its resampled
    input_audio_buffer.append arriving at the provider (Daphne, the consumer, the shell's input
    check, soxr 16 -> 24 kHz, base64, the send queue), every chunk of 3 s of microphone per session;
  - server CPU seconds per session (utime + stime of the Daphne process over the round / N).
Both ends of each span are time.monotonic() of this machine (one clock for every process).

Usage: .venv/bin/python bench/s2s_overhead.py [--sessions 1,5,10] [--turns 5] [--stagger-ms 250]
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

from bench.voice_latency import cpu_seconds, percentile, seed  # noqa: E402 - after the repository root is put on sys.path
from realtime.engine.audio import OUT_BYTES_PER_MS  # noqa: E402 - after the repository root is put on sys.path
from testing.stores import bench_database_url  # noqa: E402 - after the repository root is put on sys.path

SECRET = "s2s-overhead-bench-secret"
MODEL = "scripted-realtime"
ANSWER = "Sure, I can help you with that order today."
MIC_SECONDS = 3.0
CHUNK_BYTES_AT_PROVIDER = 20 * OUT_BYTES_PER_MS  # a 20 ms chunk, resampled to the provider's 24 kHz PCM16


def bench_env(provider_url: str) -> dict[str, str]:
    return {
        "LOG_LEVEL": "WARNING",
        "REALTIME_TOKEN_SECRET": SECRET,
        "DATABASE_URL": bench_database_url("s2s", ROOT / "var"),
        "VOICE_ENGINE": "speech-to-speech",
        "REALTIME_PROVIDER_URL": provider_url,
        "REALTIME_PROVIDER_MODEL": MODEL,
        "REALTIME_PROVIDER_API_KEY": "sk-bench",
    }


async def first_audio_after(client: object, after: int, timeout: float = 30.0) -> float:
    from testing.clients import is_type

    index = await client.wait_for(is_type("output_audio"), after=after, timeout=timeout)  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
    return client.messages[index].at  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily


async def one_session(
    client: object, connection: object, provider: object, turns: int, delay: float = 0.0
) -> tuple[list, list]:
    """Answer overheads (ms) and relay overheads (ms) of one open session."""
    from testing.clients import is_type
    from testing.speech_to_speech_provider import Say

    answers: list[float] = []
    loop = asyncio.get_running_loop()
    greeting = await first_audio_after(client, 0)
    answers.append((greeting - connection.first_audio_times[0]) * 1000)  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
    await client.wait_for(is_type("transcript", role="assistant"), timeout=30)  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
    await asyncio.sleep(delay)
    # The microphone: 20 ms chunks at real time, each send time kept.
    sent: list[float] = []
    chunk = b"\x00\x00" * 320
    start = loop.time()
    appended_before = len(connection.append_times)  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
    for index in range(int(MIC_SECONDS * 50)):
        await asyncio.sleep(max(0.0, start + index * 0.02 - loop.time()))
        sent.append(time.monotonic())
        await client.send_audio(chunk)  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
    await asyncio.sleep(0.3)
    # The engine sends each chunk as one append while it keeps up and merges the chunks that queued up
    # into one when it does not; the resampler holds back the last few milliseconds of each. So an
    # append is matched by the audio it carries (as bench/session_load.py does): one that ends with the
    # audio of chunk j was made possible by the send of chunk j + 1.
    ends = connection.append_ends  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
    bytes_before = ends[appended_before - 1] if appended_before else 0
    arrivals = zip(connection.append_times[appended_before:], ends[appended_before:], strict=True)  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
    last = len(sent) - 1
    relays = [
        (arrived - sent[min((end - bytes_before) // CHUNK_BYTES_AT_PROVIDER, last)]) * 1000 for arrived, end in arrivals
    ]
    for _ in range(turns):
        before = len(client.messages)  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
        known = len(connection.first_audio_times)  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
        await provider.run(lambda: connection.caller_turn("Can you help me?", Say(ANSWER)))  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
        arrived = await first_audio_after(client, before)
        answers.append((arrived - connection.first_audio_times[known]) * 1000)  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
        await client.wait_for(is_type("transcript", role="assistant"), after=before, timeout=30)  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
    return answers, relays


async def run_round(
    base_url: str, api_key: str, agent_id: str, n: int, turns: int, provider: object, pid: int, stagger: float = 0.0
):
    from testing.clients import VoiceClient, is_type

    clients: list[VoiceClient] = []
    pairs = []
    async with httpx.AsyncClient(base_url=base_url, headers={"Authorization": f"Bearer {api_key}"}) as http:
        for _ in range(n):
            response = await http.post(f"/public/v1/agents/{agent_id}/realtime-sessions")
            response.raise_for_status()
            client = VoiceClient(response.json()["websocketUrl"])
            await client.__aenter__()
            clients.append(client)
            await client.wait_for(is_type("session.started"), timeout=60)
            pairs.append((client, provider.last))  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
    cpu_before, wall_before = cpu_seconds([pid]), time.monotonic()
    try:
        results = await asyncio.gather(
            *(one_session(client, conn, provider, turns, index * stagger) for index, (client, conn) in enumerate(pairs))
        )
    finally:
        for client in clients:
            await client.send({"type": "stop"})
            await client.__aexit__(None, None, None)
    cpu = cpu_seconds([pid]) - cpu_before
    return results, cpu, time.monotonic() - wall_before


def line(label: str, values: list[float]) -> str:
    if not values:
        return f"{label}: none"
    return (
        f"{label}: p50 {statistics.median(values):.2f} ms, p95 {percentile(values, 95):.2f} ms, "
        f"max {max(values):.2f} ms ({len(values)} samples)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="1,5,10", help="comma-separated numbers of concurrent sessions")
    parser.add_argument("--turns", type=int, default=5, help="caller turns per session")
    parser.add_argument(
        "--stagger-ms", type=int, default=250, help="session i starts talking i x this later (0: lockstep)"
    )
    args = parser.parse_args()

    from testing.daphne import DaphneServer
    from testing.servers import free_port
    from testing.speech_to_speech_provider import ProviderServer

    provider = ProviderServer().start()
    server = None
    try:
        env = bench_env(provider.url)
        agent_id, api_key = seed(env)
        port = free_port()
        server = DaphneServer(
            env={**env, "REALTIME_WS_URL": f"ws://127.0.0.1:{port}"},
            port=port,
            log_path=ROOT / "var" / "bench-s2s-daphne.log",
        ).start()
        assert server.process is not None
        pid = server.process.pid
        print(
            f"one Daphne process, VOICE_ENGINE=speech-to-speech against the scripted provider on loopback; {os.cpu_count()} CPUs"
        )
        asyncio.run(run_round(server.http_url, api_key, agent_id, 1, 1, provider, pid))  # warm-up
        for n in [int(x) for x in args.sessions.split(",") if x.strip()]:
            results, cpu, wall = asyncio.run(
                run_round(server.http_url, api_key, agent_id, n, args.turns, provider, pid, args.stagger_ms / 1000)
            )
            greetings = [answer[0] for answer, _ in results]
            answers = [value for answer, _ in results for value in answer[1:]]
            relays = [value for _, relay in results for value in relay]
            print(
                f"N={n}: CPU {cpu / n:.2f} s per session over {wall:.1f} s ({100 * cpu / n / wall:.1f} % of a core each)"
            )
            print("  " + line("provider first audio delta -> output_audio at the client, greeting", greetings))
            print("  " + line("provider first audio delta -> output_audio at the client, answers", answers))
            print("  " + line("client input_audio chunk -> input_audio_buffer.append at the provider", relays))
    finally:
        if server is not None:
            server.stop()
        provider.stop()


if __name__ == "__main__":
    main()
