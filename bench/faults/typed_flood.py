"""Fault: one tenant floods its typed session (`input_text`) while another organization types normally.

One Daphne process (the embedded brain, the typed-input budget's defaults unless --lifted; docs/reference/realtime-protocol.md,
"Typed input budget"). Two organizations, each with a text agent. The flooder sends --messages turns of
--chars characters as fast as its socket takes them (the finding of issue 34: 3,000 turns of 2,000
characters in a second, 4.5 MB call events), then `stop`; meanwhile the other organization's live typed
session types --turns turns, one a second, from the start of the flood, and times each answer (input_text sent -> assistant transcript).

Prints, for the flooder: how long the flood took to send, the errors by code, the close code, the call's
status and ended reason, its typed turns and the size of the call as every call event carries it (the
JSON of GET /calls/{id}); for the other organization: its turns answered, the answer latency (p50, max)
during the flood, and its call's status. --lifted runs the same with the budget lifted (as before it).

Usage: .venv/bin/python bench/faults/typed_flood.py [--messages 3000] [--chars 2000] [--turns 10] [--lifted]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import time
from collections import Counter
from typing import Any

from common import ROOT, bench_env, make_agent, setup

LIFTED = {
    "REALTIME_TEXT_PER_SECOND": "1000000",
    "REALTIME_TEXT_BURST": "1000000",
    "REALTIME_TEXT_MAX_MESSAGES_PER_CALL": "1000000",
    "REALTIME_TEXT_MAX_BYTES_PER_CALL": "1000000000",
    "REALTIME_TEXT_FLOOD_CLOSE": "1000000",
}


def text_session_url(organization: Any, agent: Any) -> str:
    from realtime.services import realtime_session_create

    return realtime_session_create(organization=organization, agent_id=str(agent.pk), modality="text").websocket_url


def call_figures(call_id: str) -> dict[str, Any]:
    from calls.models import Call
    from calls.selectors import call_get
    from calls.serializers import call_detail

    call = Call.objects.get(pk=call_id)
    detail = call_detail(call_get(organization=call.organization, call_id=call_id))
    users = [m for m in detail["messages"] if m["role"] == "user"]
    return {
        "status": detail["status"],
        "endedReason": detail["endedReason"],
        "typed turns": len(users),
        "messages": len(detail["messages"]),
        "call JSON bytes": len(json.dumps(detail, default=str).encode()),
    }


async def open_text(url: str) -> tuple[Any, str]:
    from testing.clients import VoiceClient, is_type

    client = VoiceClient(url)
    await client.__aenter__()
    started = await client.wait_for(is_type("session.started"), timeout=60)
    await client.wait_for(is_type("transcript", role="assistant"), after=started, timeout=60)
    return client, client.messages[started].message["callId"]


async def flood(client: Any, messages: int, chars: int) -> float:
    began = time.monotonic()
    for number in range(messages):
        if client.closed:
            break
        with contextlib.suppress(ConnectionError):
            await client.send_text(f"{number} " + "x" * (chars - len(str(number)) - 1))
    with contextlib.suppress(ConnectionError):
        await client.send({"type": "stop"})
    return time.monotonic() - began


async def typist(client: Any, turns: int) -> list[float]:
    """`turns` turns, one a second (each once the last is answered); the latency of each answer."""
    from testing.clients import is_type

    latencies = []
    for turn in range(1, turns + 1):
        before = len(client.messages)
        sent = time.monotonic()
        await client.send_text(f"What are your opening hours? ({turn})")
        said = await client.wait_for(is_type("transcript", role="user"), after=before, timeout=60)
        await client.wait_for(is_type("transcript", role="assistant"), after=said, timeout=60)
        latencies.append(time.monotonic() - sent)
        await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - sent)))
    return latencies


async def main(arguments: argparse.Namespace) -> None:
    from asgiref.sync import sync_to_async

    from testing.daphne import DaphneServer
    from testing.servers import free_port

    port = free_port()
    env = {**bench_env("typed_flood"), "REALTIME_WS_URL": f"ws://127.0.0.1:{port}"}
    if arguments.lifted:
        env.update(LIFTED)
    flooder_org = await sync_to_async(setup)(env)

    def other_organization() -> Any:
        from accounts.services import organization_create

        return organization_create(name="Other organization", plan_code="agency")[0]

    other_org = await sync_to_async(other_organization)()
    flooder = await sync_to_async(make_agent)(flooder_org, "Flooder", greeting_type="none")
    other = await sync_to_async(make_agent)(other_org, "Other", greeting_type="none")
    server = DaphneServer(env=env, port=port, log_path=ROOT / "var" / "bench-faults-typed-flood-daphne.log")
    await asyncio.to_thread(server.start)
    try:
        victim, victim_call = await open_text(await sync_to_async(text_session_url)(other_org, other))
        attacker, attacker_call = await open_text(await sync_to_async(text_session_url)(flooder_org, flooder))
        typing = asyncio.create_task(typist(victim, arguments.turns))
        sent_for = await flood(attacker, arguments.messages, arguments.chars)
        close_code = await attacker.wait_closed(timeout=300)
        latencies = await typing
        await victim.send({"type": "stop"})
        await victim.wait_closed(timeout=60)
        await attacker.__aexit__(None, None, None)
        await victim.__aexit__(None, None, None)
        await asyncio.sleep(1)  # the records' last writes
        codes = Counter(m.message["code"] for m in attacker.messages if m.message["type"] == "error")
        flooded = await sync_to_async(call_figures)(attacker_call)
        other_figures = await sync_to_async(call_figures)(victim_call)
    finally:
        await asyncio.to_thread(server.stop)

    budget = "lifted" if arguments.lifted else "defaults"
    print(f"typed flood: {arguments.messages} input_text of {arguments.chars} characters, budget {budget}")
    print(f"  flooder: sent in {sent_for:.2f} s, closed {close_code}, errors {dict(codes)}")
    print(f"  flooder's call: {flooded}")
    if latencies:
        print(
            f"  other organization: {len(latencies)} turns answered from the start of the flood, latency p50 "
            f"{statistics.median(latencies) * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms"
        )
    print(f"  other organization's call: {other_figures}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--chars", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=10, help="the other organization's turns, one a second")
    parser.add_argument("--lifted", action="store_true", help="the typed-input budget lifted (as before it)")
    asyncio.run(main(parser.parse_args()))
