"""Fault: one organization floods the agent-test runner: the biggest runs the limits allow, as many as it
may queue, more refused, while another organization runs a one-test run.

One Daphne process with one test-run worker thread (TEST_RUNS_WORKERS=1, the default). Organization A
has 60 tests whose agent asks its server for its prompt at the start of every attempt (a dynamic prompt);
that loopback server never answers, so each attempt lasts the request's timeout (3 s). A asks for a run
of all 60 tests x 5 (refused: over TEST_RUNS_MAX_ATTEMPTS), then for runs of 20 tests x 5 until one is
refused (TEST_RUNS_MAX_UNFINISHED_PER_ORGANIZATION). Organization B then starts a run of its one test,
`--rounds` times one after the other. Then A cancels its runs. Prints what A was answered, how long B's
runs took, how long cancelling took to be seen and how many attempts A's runs made after it, the largest
attempt row and the database's growth.

Usage: .venv/bin/python bench/faults/testrun_flood.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path
from typing import Any

from common import bench_env, make_agent, start_server, two_organizations, webhook_agent

HELLO = {"kind": "reply", "turns": [{"user": "Hello"}], "expect": {"noToolCalls": True}}


def organizations(env: dict[str, str], prompt_url: str) -> tuple[Any, Any, str, str]:
    organization, key, other, other_key = two_organizations(env)
    from realtime.agent_tests.services import agent_test_create_for

    olive = webhook_agent(organization, prompt_url, prompt_type="dynamic")
    for index in range(60):
        agent_test_create_for(agent=olive, body={**HELLO, "name": f"flood {index}"})
    ava = make_agent(other, "Ava")
    agent_test_create_for(agent=ava, body={**HELLO, "name": "hello"})
    return olive, ava, key, other_key


def database_bytes(url: str) -> int:
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_database_size(current_database())")
        return int(cursor.fetchone()[0])


def largest_attempt() -> int:
    import json

    from realtime.models import TestAttempt

    return max((len(json.dumps(result)) for result in TestAttempt.objects.values_list("result", flat=True)), default=0)


async def run_all(server: Any, olive: Any, ava: Any, ours: str, theirs: str, rounds: int, url: str) -> None:
    import httpx
    from asgiref.sync import sync_to_async

    from realtime.models import TestAttempt

    def client(key: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=server.http_url, headers={"Authorization": f"Bearer {key}"}, timeout=30)

    async def state(http: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
        return (await http.get(f"/public/v1/test-runs/{run_id}")).json()

    async def until_over(http: httpx.AsyncClient, run_id: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        body = await state(http, run_id)
        while body["status"] in ("queued", "running") and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            body = await state(http, run_id)
        return body

    before = await sync_to_async(database_bytes)(url)
    async with client(ours) as a, client(theirs) as b:
        tests = [t["id"] for t in (await a.get(f"/public/v1/agents/{olive.pk}/tests", params={"limit": 500})).json()]
        big = await a.post(f"/public/v1/agents/{olive.pk}/test-runs", json={"repeat": 5})
        print(f"A: 60 tests x 5: {big.status_code} {big.json().get('code')}: {big.json().get('error')}")
        runs: list[str] = []
        for index in range(10):  # bounded: until refused
            answer = await a.post(
                f"/public/v1/agents/{olive.pk}/test-runs",
                json={"testIds": tests[index * 5 : index * 5 + 20], "repeat": 5},
            )
            if answer.status_code != 202:
                print(
                    f"A: run {index + 1} of 20 tests x 5: {answer.status_code} {answer.json().get('code')} "
                    f"(Retry-After {answer.headers.get('Retry-After')}): {answer.json().get('error')}"
                )
                break
            runs.append(answer.json()["id"])
        print(f"A: {len(runs)} runs of 100 attempts queued")
        for round_ in range(1, rounds + 1):
            began = time.monotonic()
            created = await b.post(f"/public/v1/agents/{ava.pk}/test-runs", json={})
            body = await until_over(b, created.json()["id"], 120)
            attempts = await sync_to_async(TestAttempt.objects.filter(run_id__in=runs).count)()
            print(
                f"B: run {round_} {body['status']} (passed {body['passed']}) in {time.monotonic() - began:.2f} s; "
                f"A's runs had made {attempts} attempts"
            )
        began = time.monotonic()
        for run_id in runs:
            cancelled = await a.post(f"/public/v1/test-runs/{run_id}/cancel")
            assert cancelled.status_code == 200, cancelled.text
        states = [(await state(a, run_id))["status"] for run_id in runs]
        seen = time.monotonic() - began
        at_cancel = await sync_to_async(TestAttempt.objects.filter(run_id__in=runs).count)()
        created = await b.post(f"/public/v1/agents/{ava.pk}/test-runs", json={})
        await until_over(b, created.json()["id"], 120)
        after = await sync_to_async(TestAttempt.objects.filter(run_id__in=runs).count)()
        print(
            f"A: cancelled {len(runs)} runs ({', '.join(states)}) in {seen * 1000:.0f} ms; {at_cancel} attempts "
            f"stored at the cancel, {after} once B's next run was over"
        )
    grown = await sync_to_async(database_bytes)(url) - before
    print(
        f"largest attempt row: {await sync_to_async(largest_attempt)()} bytes of JSON; database grew {grown / 1024:.0f} KiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="B's one-test runs, one after the other")
    args = parser.parse_args()

    from testing.webhooks import LoopbackReceiver, Reply

    env = bench_env("testrun_flood")
    with LoopbackReceiver(Reply(hold=True)) as prompt_server:
        olive, ava, ours, theirs = organizations(env, prompt_server.url("/hooks/voice"))
        server = start_server(
            env,
            "testrun-flood",
            OUTBOUND_ALLOWED_NETWORKS="127.0.0.0/8",
            BACKGROUND_WORK="inprocess",
            TEST_RUNS_WORKERS="1",
        )
        try:
            asyncio.run(run_all(server, olive, ava, ours, theirs, args.rounds, os.environ["DATABASE_URL"]))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
