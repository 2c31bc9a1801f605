"""Fault: Redis (the channel layer) killed and started again under live calls.

Starts its own redis-server on a free port and one Daphne process with REDIS_URL pointing at it; opens
a browser session and a phone stream (Twilio's side scripted); kills Redis (SIGKILL), opens a new
browser session during the outage and ends it, keeps the others talking for --outage seconds, starts
Redis again on the same port, then ends the phone call with Twilio's status callback (it reaches the
stream through Redis) and the browser session with `stop`. Prints what happened to every call.

Usage: .venv/bin/python bench/faults/redis_restart.py [--outage 5]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from common import (
    ROOT,
    Socket,
    bench_env,
    browser_url,
    make_agent,
    phone_stream,
    report,
    setup,
    status_callback,
    wait_until,
)

from testing.stores import RedisServer


async def scenario(server: object, browser_agent: object, phone_agent: object, redis: RedisServer, outage: float):
    from asgiref.sync import sync_to_async

    from telephony import audio
    from testing.clients import VoiceClient, is_type
    from testing.twilio_stream import is_event

    ws, http = server.ws_url, server.http_url  # type: ignore[attr-defined]  # annotated object: the test kit's classes are imported lazily
    sockets = {
        "browser, live across the outage": Socket("browser, live across the outage", agent_id=browser_agent.pk),
        "phone, live across the outage": Socket("phone, live across the outage", call_sid="CA" + "b" * 32),
        "browser, opened during the outage": Socket("browser, opened during the outage", agent_id=None),
    }
    live, phone_socket, during_socket = sockets.values()
    url = await sync_to_async(browser_url)(ws, browser_agent)
    async with VoiceClient(url) as browser:
        await browser.wait_for(is_type("session.started"), timeout=60)
        live.opened = time.monotonic()
        mic = asyncio.create_task(browser.stream(b"\x00\x00" * 16 * 120_000))
        stream = await sync_to_async(phone_stream)(ws, phone_agent, phone_socket.call_sid)
        async with stream as phone:
            await phone.start()
            await phone.wait_for(is_event("media"), timeout=60)
            phone_socket.opened = time.monotonic()
            line = asyncio.create_task(phone.stream(bytes([audio.SILENCE_BYTE]) * 8000 * 120))

            redis.kill()
            print(f"redis killed; outage of {outage:.0f} s")
            during_agent = await sync_to_async(make_agent)(browser_agent.organization, "During outage")
            during_socket.agent_id = during_agent.pk
            try:
                async with VoiceClient(await sync_to_async(browser_url)(ws, during_agent)) as during:
                    await during.wait_for(is_type("session.started"), timeout=60)
                    during_socket.opened = time.monotonic()
                    await during.stream(b"\x00\x00" * 16 * 1000)
                    await during.send({"type": "stop"})
                    during_socket.close_code = await during.wait_closed()
                    during_socket.closed = time.monotonic()
            except Exception as exc:  # noqa: BLE001 - reported as what happened
                print(f"  new browser session during the outage: {type(exc).__name__}: {exc}")
            await asyncio.sleep(max(0.0, outage - (time.monotonic() - phone_socket.opened)))
            redis.start()
            print("redis started again on the same port")
            # The stream joins its call group again at its next retry (backoff up to 2 s); a status
            # callback before that would find the group empty (the call is then finished by the
            # callback's grace, and Twilio closes the stream itself).
            log = ROOT / "var" / "bench-faults-redis-daphne.log"
            await wait_until(lambda: "channel layer available again" in log.read_text(errors="replace"), 15)

            code = await sync_to_async(status_callback)(http, phone_socket.call_sid)
            print(f"status callback 'completed' answered {code}")
            try:
                phone_socket.close_code = await phone.wait_closed(timeout=15)
            except TimeoutError:
                print("  the phone stream was not closed by the status callback")
            phone_socket.closed = time.monotonic()
            line.cancel()
        mic.cancel()
        await asyncio.gather(mic, line, return_exceptions=True)
        if not browser.closed:
            await browser.send({"type": "stop"})
            live.close_code = await browser.wait_closed()
        else:
            live.close_code = browser.close_code
        live.closed = time.monotonic()
    return list(sockets.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outage", type=float, default=5.0, help="seconds Redis stays down")
    args = parser.parse_args()

    from testing.daphne import DaphneServer
    from testing.servers import free_port

    env = bench_env("redis")
    organization = setup(env)
    browser_agent = make_agent(organization, "Browser")
    phone_agent = make_agent(organization, "Phone", phone=True)
    redis = RedisServer().start()
    port = free_port()
    log = ROOT / "var" / "bench-faults-redis-daphne.log"
    server = DaphneServer(
        env={
            **env,
            "LOG_LEVEL": "INFO",
            "REDIS_URL": redis.url,
            "REALTIME_WS_URL": f"ws://127.0.0.1:{port}",
            "PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
            "TELEPHONY_CALL_END_GRACE_SECONDS": "30",
        },
        port=port,
        log_path=log,
    ).start()
    try:
        sockets = asyncio.run(scenario(server, browser_agent, phone_agent, redis, args.outage))
    finally:
        server.stop()
        redis.kill()
    time.sleep(0.5)
    print("calls:")
    report(sockets)
    text = log.read_text(errors="replace")
    print(
        f"server log: {text.count('Traceback')} tracebacks, "
        f"{text.count('channel layer unavailable')} 'channel layer unavailable', "
        f"{text.count('channel layer available again')} 'available again' ({log.relative_to(ROOT)})"
    )


if __name__ == "__main__":
    main()
