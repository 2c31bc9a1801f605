"""Fault: one organization's agent test matches a backtracking pattern, `(a+)+$`, against a reply of many
`a`s (with Python's `re` that is 2^N steps holding the GIL: the whole server stalls).

One Daphne process (test runs in a thread of it). Organization A saves the test (its order tool's mocked
result is `--length` `a`s, its replyMatches `(a+)+$`) and starts a run of it, `--runs` times; meanwhile
organization B types to its agent in a typed session (text modality), turn after turn, and /livez is asked between
turns. Prints how A's runs ended and how long each took, and what B and /livez saw while they ran: every
answer's latency (p50, max) and any turn not answered within 1 s. Patterns RE2 cannot run
(backreferences, lookaround) are refused when saved: the script shows that answer too.

Usage: .venv/bin/python bench/faults/regex_stall.py [--length 40] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from common import bench_env, make_agent, start_server, two_organizations, webhook_agent

ORDER = {"type": "object", "properties": {"order_number": {"type": "string"}}, "required": ["order_number"]}
STALLING = "(a+)+$"


def organizations(env: dict[str, str], length: int) -> tuple[Any, Any, str, Any, str]:
    """A (a webhook agent with an order tool and the stalling test) and B (an agent to type to), with keys."""
    organization, key, other, other_key = two_organizations(env)
    from agents.models import AgentTool
    from realtime.agent_tests.services import agent_test_create_for

    olive = webhook_agent(organization, "https://hooks.example.com/voice")
    AgentTool.objects.create(
        agent=olive, name="check_order_status", description="Look up an order", parameter_schema=ORDER
    )
    agent_test_create_for(
        agent=olive,
        body={
            "name": f"{length} a's against {STALLING}",
            "kind": "tool_call",
            "turns": [{"user": "What is the status of order 3561?"}],
            "toolMocks": [{"tool": "check_order_status", "result": {"status": "a" * length}}],
            "expect": {"replyMatches": STALLING},
        },
    )
    ava = make_agent(other, "Ava")
    return olive, ava, key, other, other_key


async def typed_session(server: Any, ava: Any, key: str) -> str:
    """The socket URL of a typed (text) session of B's agent, through B's API."""
    import httpx

    async with httpx.AsyncClient(base_url=server.http_url, headers={"Authorization": f"Bearer {key}"}) as http:
        session = await http.post(f"/public/v1/agents/{ava.pk}/realtime-sessions", json={"modality": "text"})
        session.raise_for_status()
        return f"{server.ws_url}/ws/agents/{ava.pk}/realtime?token={session.json()['token']}"


async def run_all(server: Any, olive: Any, ava: Any, key: str, other_key: str, runs: int) -> None:
    import httpx

    from testing.clients import VoiceClient, is_type

    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=server.http_url, headers=headers, timeout=60) as http:
        refused = await http.post(
            f"/public/v1/agents/{olive.pk}/tests",
            json={
                "name": "backreference",
                "kind": "reply",
                "turns": [{"user": "Hi"}],
                "expect": {"replyMatches": r"(a)\1"},
            },
        )
        print(f"saving replyMatches (a)\\1: {refused.status_code} {refused.json().get('error')}")
        url = await typed_session(server, ava, other_key)
        answers: list[float] = []
        livez: list[float] = []
        late = 0
        async with VoiceClient(url) as client:
            started = await client.wait_for(is_type("session.started"), timeout=60)
            await client.wait_for(is_type("transcript", role="assistant"), after=started, timeout=60)
            durations: list[float] = []
            outcomes: list[str] = []
            for _ in range(runs):
                began = time.monotonic()
                created = (await http.post(f"/public/v1/agents/{olive.pk}/test-runs", json={})).json()
                body: dict[str, Any] = {}
                for _turn in range(2000):  # bounded: B types until A's run is over
                    asked = time.monotonic()
                    await http.get("/livez")
                    livez.append(time.monotonic() - asked)
                    before = len(client.messages)
                    asked = time.monotonic()
                    await client.send_text("Hello")
                    try:
                        await client.wait_for(is_type("transcript", role="assistant"), after=before, timeout=30)
                    except TimeoutError:
                        late += 1
                    answers.append(time.monotonic() - asked)
                    body = (await http.get(f"/public/v1/test-runs/{created['id']}")).json()
                    if body["status"] not in ("queued", "running"):
                        break
                durations.append(time.monotonic() - began)
                attempt = body["results"][0]["attempts"][0] if body.get("results") else {}
                outcomes.append(
                    f"{body.get('status')} ({attempt.get('verdict')}: {'; '.join(attempt.get('reasons') or [])})"
                )
    print(f"organization A: {runs} runs matching {STALLING} against the mocked reply")
    for index, (seconds, outcome) in enumerate(zip(durations, outcomes, strict=True), start=1):
        print(f"  run {index}: {outcome}, over in {seconds:.2f} s")
    print(f"organization B meanwhile: {len(answers)} typed turns answered")
    print(
        f"  answer latency p50 {statistics.median(answers) * 1000:.0f} ms, max {max(answers) * 1000:.0f} ms; "
        f"over 1 s: {sum(1 for a in answers if a > 1)}; not answered within 30 s: {late}"
    )
    print(f"  /livez p50 {statistics.median(livez) * 1000:.0f} ms, max {max(livez) * 1000:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=40, help="how many a's the mocked reply holds")
    parser.add_argument("--runs", type=int, default=5, help="runs of the stalling test, one after the other")
    args = parser.parse_args()

    env = bench_env("regex")
    olive, ava, key, _other, other_key = organizations(env, args.length)
    server = start_server(env, "regex", BACKGROUND_WORK="inprocess")
    try:
        asyncio.run(run_all(server, olive, ava, key, other_key, args.runs))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
