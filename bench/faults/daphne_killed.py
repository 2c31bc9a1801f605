"""Fault: the Daphne process SIGKILLed mid-call, then started again with no new call.

Opens a browser session and a phone stream on one Daphne process (CALLS_MAINTENANCE_SECONDS small),
talks for a few seconds, kills the process (SIGKILL: no disconnect runs, the calls are orphans and their
heartbeat stops), starts a new process on the same database, opens no call, and waits until the
heartbeat has expired (LIVENESS_EXPIRY_SECONDS) plus one sweep interval. Prints what happened to every
call: an orphan should end `failed` at its last activity (the upkeep sweep of the restarted process),
billed no more than the socket lived.

Usage: .venv/bin/python bench/faults/daphne_killed.py [--sweep 5] [--expiry 60]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from common import ROOT, Socket, bench_env, browser_url, make_agent, phone_stream, report, setup


async def calls_before_the_kill(server: object, browser_agent: object, phone_agent: object) -> list[Socket]:
    from asgiref.sync import sync_to_async

    from telephony import audio
    from testing.clients import VoiceClient, is_type
    from testing.twilio_stream import is_event

    ws = server.ws_url  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
    browser_socket = Socket("browser, server killed mid-call", agent_id=browser_agent.pk)
    phone_socket = Socket("phone, server killed mid-call", call_sid="CA" + "e" * 32)
    async with VoiceClient(await sync_to_async(browser_url)(ws, browser_agent)) as browser:
        await browser.wait_for(is_type("session.started"), timeout=60)
        browser_socket.opened = time.monotonic()
        mic = asyncio.create_task(browser.stream(b"\x00\x00" * 16 * 60_000))
        async with await sync_to_async(phone_stream)(ws, phone_agent, phone_socket.call_sid) as phone:
            await phone.start()
            await phone.wait_for(is_event("media"), timeout=60)
            phone_socket.opened = time.monotonic()
            line = asyncio.create_task(phone.stream(bytes([audio.SILENCE_BYTE]) * 8000 * 60))
            await asyncio.sleep(3)  # mid-call
            server.process.kill()  # type: ignore[attr-defined]  # SIGKILL
            killed = time.monotonic()
            print("daphne SIGKILLed mid-call")
            browser_socket.close_code = await browser.wait_closed(timeout=10)
            phone_socket.close_code = await phone.wait_closed(timeout=10)
            browser_socket.closed = phone_socket.closed = killed
            for task in (mic, line):
                task.cancel()
            await asyncio.gather(mic, line, return_exceptions=True)
    return [browser_socket, phone_socket]


def statuses(sockets: list[Socket]) -> list[str]:
    from common import call_of

    return [getattr(call_of(socket), "status", "none") for socket in sockets]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", type=int, default=5, help="CALLS_MAINTENANCE_SECONDS of the servers")
    parser.add_argument("--expiry", type=int, default=60, help="LIVENESS_EXPIRY_SECONDS (heartbeat: a quarter)")
    args = parser.parse_args()

    from testing.daphne import DaphneServer
    from testing.servers import free_port

    env = bench_env("killed")
    organization = setup(env)
    browser_agent = make_agent(organization, "Browser")
    phone_agent = make_agent(organization, "Phone", phone=True)
    port = free_port()
    server_env = {
        **env,
        "LOG_LEVEL": "INFO",
        "REALTIME_WS_URL": f"ws://127.0.0.1:{port}",
        "PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
        "CALLS_MAINTENANCE_SECONDS": str(args.sweep),
        "LIVENESS_EXPIRY_SECONDS": str(args.expiry),
        "LIVENESS_HEARTBEAT_SECONDS": str(args.expiry / 4),
    }
    log = ROOT / "var" / "bench-faults-killed-daphne.log"
    first = DaphneServer(env=server_env, port=port, log_path=log).start()
    try:
        sockets = asyncio.run(calls_before_the_kill(first, browser_agent, phone_agent))
    finally:
        first.stop()
    print(f"right after the kill: {statuses(sockets)}")
    restarted = DaphneServer(env=server_env, port=port, log_path=ROOT / "var" / "bench-faults-killed-daphne-2.log")
    restarted.start()
    started = time.monotonic()
    print(f"daphne started again (no new call); waiting for the {args.expiry} s expiry + one sweep ({args.sweep} s)")
    try:
        deadline = started + args.expiry + 2 * args.sweep + 5
        while time.monotonic() < deadline and "active" in statuses(sockets):
            time.sleep(1)
        waited = time.monotonic() - started
    finally:
        restarted.stop()
    print(f"after {waited:.0f} s on the restarted process: {statuses(sockets)}")
    print("calls:")
    report(sockets)


if __name__ == "__main__":
    main()
