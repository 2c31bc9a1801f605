"""Fault: a tool whose server hangs, resets the connection, answers 500, or answers 50 MB.

One Daphne process with VOICE_ENGINE=speech-to-speech against the scripted speech-to-speech provider of the
tests (testing/speech_to_speech_provider.py, in a thread), OUTBOUND_ALLOWED_NETWORKS on
loopback. Per fault, a webhook agent whose tool server is a local scripted server (LoopbackReceiver
of testing/webhooks.py; a raw socket that resets for the reset case); a browser session asks
for the tool through the provider's function call, hears the answer, and stops. Prints what
happened to every call (status, duration, billed, the tool invocation's status and duration) and the
server's memory.

Usage: .venv/bin/python bench/faults/tool_faults.py [--timeout-ms 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import struct
import threading
import time
from pathlib import Path

from common import ROOT, Socket, bench_env, browser_url, call_of, make_agent, report, setup

ORDER = {"type": "object", "properties": {"order_number": {"type": "string"}}, "required": ["order_number"]}
FIFTY_MB = 50 * 1024 * 1024


class ResettingServer:
    """Accepts, reads the request, and resets the connection (RST) without answering."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with contextlib.suppress(OSError):
                conn.recv(65536)
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    def close(self) -> None:
        self.sock.close()


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def one_call(server: object, provider: object, agent: object, label: str) -> Socket:
    from asgiref.sync import sync_to_async

    from testing.clients import VoiceClient, is_type
    from testing.speech_to_speech_provider import CallTool, Say, eventually

    result = Socket(label, agent_id=agent.pk)  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
    url = await sync_to_async(browser_url)(server.ws_url, agent)  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
    async with VoiceClient(url) as client:
        await client.wait_for(is_type("session.started"), timeout=60)
        result.opened = time.monotonic()
        mic = asyncio.create_task(client.stream(b"\x00\x00" * 16 * 120_000))
        connection = provider.last  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
        await eventually(lambda: connection.events("response.create"), what="the session configuration")
        await client.wait_for(is_type("transcript", role="assistant"), timeout=30)  # the greeting
        provider.script(Say("Let me see what I can do."))  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
        before = len(client.messages)
        call = CallTool("check_order_status", {"order_number": "42"}, call_id=f"call_{label[:4]}")
        await provider.run(lambda: connection.caller_turn("Where is order 42?", call))  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
        try:
            await client.wait_for(is_type("tool.finished"), after=before, timeout=60)
            await client.wait_for(is_type("transcript", role="assistant"), after=before, timeout=30)
        except (TimeoutError, ConnectionError) as exc:
            print(f"  {label}: {type(exc).__name__}: {exc}")
        mic.cancel()
        await asyncio.gather(mic, return_exceptions=True)
        if not client.closed:
            await client.send({"type": "stop"})
        result.close_code = await client.wait_closed()
        result.closed = time.monotonic()
    return result


def tool_line(socket_: Socket) -> str:
    from calls.models import ToolInvocation

    call = call_of(socket_)
    rows = list(ToolInvocation.objects.filter(call=call).values_list("status", "duration_ms", "response"))
    return ", ".join(f"{status} after {ms} ms ({len(response)} characters kept)" for status, ms, response in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout-ms", type=int, default=2000, help="the tool's timeout (the hang case)")
    args = parser.parse_args()

    from testing.daphne import DaphneServer
    from testing.servers import free_port
    from testing.speech_to_speech_provider import ProviderServer
    from testing.webhooks import LoopbackReceiver, Reply

    env = bench_env("tools")
    organization = setup(env)
    from agents.models import AgentTool  # after setup: Django is configured there

    hang = LoopbackReceiver(Reply(hold=True))
    error = LoopbackReceiver(Reply(status=500, json={"error": "boom"}))
    huge = LoopbackReceiver(Reply(body=b'{"message": "' + b"x" * FIFTY_MB + b'"}', content_type="application/json"))
    reset = ResettingServer()
    faults = {"hang": hang, "reset": reset, "500": error, "50 MB": huge}
    agents = {}
    for label, target in faults.items():
        agent = make_agent(
            organization,
            f"Tool {label}",
            agent_type="webhook",
            server_url=target.url("/hooks/voice"),
            server_secret="whsec-faults-bench",
        )
        AgentTool.objects.create(
            agent=agent,
            name="check_order_status",
            description="Look up an order",
            parameter_schema=ORDER,
            timeout_ms=args.timeout_ms,
        )
        agents[label] = agent

    with contextlib.ExitStack() as stack:
        for receiver in (hang, error, huge):
            stack.enter_context(receiver)
        stack.callback(reset.close)
        provider = stack.enter_context(ProviderServer())
        port = free_port()
        server = DaphneServer(
            env={
                **env,
                "REALTIME_WS_URL": f"ws://127.0.0.1:{port}",
                "OUTBOUND_ALLOWED_NETWORKS": "127.0.0.0/8",
                "VOICE_ENGINE": "speech-to-speech",
                "REALTIME_PROVIDER_URL": provider.url,
                "REALTIME_PROVIDER_MODEL": "scripted-realtime",
                "REALTIME_PROVIDER_API_KEY": "sk-bench",
            },
            port=port,
            log_path=ROOT / "var" / "bench-faults-tools-daphne.log",
        ).start()
        stack.callback(server.stop)
        assert server.process is not None
        pid = server.process.pid

        async def run_all() -> list[tuple[Socket, float]]:
            results = []
            for label, agent in agents.items():
                results.append((await one_call(server, provider, agent, label), rss_mib(pid)))
            return results

        before = rss_mib(pid)
        results = asyncio.run(run_all())
        print(f"tool timeout {args.timeout_ms} ms; server RSS {before:.0f} MiB before the calls")
        print("calls:")
        report([socket_ for socket_, _ in results])
        for socket_, rss in results:
            print(f"  {socket_.label}: tool {tool_line(socket_)}; server RSS after it {rss:.0f} MiB")
        hang.release()


if __name__ == "__main__":
    main()
