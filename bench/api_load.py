"""API load benchmark (not a test): GET/POST /public/v1/agents against a minimal JSON view.

Starts a real Daphne server on a free loopback port against its own database (a fresh SQLite file
under var/, or the PostgreSQL named by DATABASE_URL with `_bench` appended to the database name),
seeds an organization with 1,000 agents, and measures latency (sequential requests) and throughput
(concurrent clients) of:
  - GET /livez                 the minimal Django JSON view (baseline, no database)
  - GET /public/v1/agents      list of 1,000 agents (a third of them with three calls today), read again
                               while nothing changes; then read right after each change (PATCH of an agent)
  - GET /public/v1/agents/{id}/tools
                               an agent with no tools: what any authenticated read costs
  - POST /public/v1/agents     create an agent
  - GET /public/v1/calls?agentId=...&limit=100
                               the 100 newest calls of an agent with 100,000 calls (seeded by
                               bench/calls_bench.py in a second organization; --skip-calls leaves it out)
It prints p50/p95 latency, requests/s, the ratio to the baseline, and the SQL queries one list takes.

--saturate: instead, each endpoint is driven by 1, 2, 4, 8... concurrent clients (keep-alive
connections, each sending its next request as soon as the last is answered) for --seconds per step,
until throughput stops rising (two steps in a row under 5 % above the best so far) or --max-clients;
each step prints requests/s, p50/p99 latency and errors (any response but 2xx, or a transport error:
must be 0). The saturation row is the step with the most requests/s. Both bench organizations are on
the "agency" plan, and per-plan API rate limits, where the plan has them, are lifted for them in the
bench's own database (lift_rate_limits): the bench measures the service, not the limiter.

Usage: .venv/bin/python bench/api_load.py [--agents 1000] [--requests 200] [--concurrency 8] [--calls 100000]
       .venv/bin/python bench/api_load.py --saturate [--seconds 5] [--max-clients 128] [--calls 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from testing.figures import percentile  # noqa: E402 - after the repository root is put on sys.path
from testing.servers import free_port  # noqa: E402 - after the repository root is put on sys.path
from testing.stores import bench_database_url  # noqa: E402 - after the repository root is put on sys.path


def bench_env() -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": bench_database_url("bench", ROOT / "var")}
    env.setdefault("LOG_LEVEL", "WARNING")
    return env


def seed(n_agents: int) -> str:
    """Create the organization and its agents directly in the database; returns the API key."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "voiceagent.settings")
    django.setup()
    from django.utils import timezone

    from accounts.services import organization_create
    from agents.models import Agent

    organization, issued = organization_create(name="Bench", plan_code="agency")
    lift_rate_limits()
    now = timezone.now()
    Agent.objects.bulk_create(
        [
            Agent(
                organization=organization,
                name=f"Agent {i}",
                instructions="Answer questions about opening hours and orders.",
                server_url="https://hooks.example.com/agent" if i % 2 else None,
                server_secret=f"secret-{i}" if i % 2 else None,
                server_headers={"X-Tenant": "bench"},
                status="active" if i % 3 == 0 else "draft",
                updated_at=now,
            )
            for i in range(n_agents)
        ],
        batch_size=500,
    )
    seed_todays_calls(organization)
    return issued.raw_key


def seed_todays_calls(organization: Any) -> None:
    """Three calls started within the last hour (two completed, one failed) for every third agent: the list
    shows callsToday and successRate, read for each request."""
    from datetime import timedelta

    from django.utils import timezone

    from calls.models import Call
    from testing.factories import CallFactory  # needs Django set up: imported here

    now = timezone.now()
    agents = list(organization.agents.order_by("created_at", "id"))[::3]
    Call.objects.bulk_create(
        [
            CallFactory.build(
                agent=agent,
                status="failed" if n == 2 else "completed",
                started_at=now - timedelta(minutes=10 + n),
                ended_at=now - timedelta(minutes=9 + n),
                duration_seconds=60,
            )
            for agent in agents
            for n in range(3)
        ],
        batch_size=1000,
    )


def bench_organization(env: dict[str, str], name: str, *, lift_limits: bool = True) -> tuple[Any, str]:
    """In this process: Django set up on `env` (the bench's own database, bench_database()) and that
    database migrated; then an organization named `name` on the agency plan, with the rate limits lifted
    unless `lift_limits` is false. Returns the organization and its API key."""
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "voiceagent.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from accounts.services import organization_create

    call_command("migrate", verbosity=0)
    organization, issued = organization_create(name=name, plan_code="agency")
    if lift_limits:
        lift_rate_limits()
    return organization, issued.raw_key


def lift_rate_limits() -> None:
    """The benches measure the service, not its limits: the bench database's plans allow a million
    requests a second per key and any number of live calls (the limits are still checked on every
    request and session, docs/operations/limits.md). Only the bench's own database is changed."""
    from accounts.models import Plan

    Plan.objects.update(api_requests_per_second=1_000_000, api_burst=1_000_000, max_concurrent_calls=None)


def list_query_count() -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from accounts.models import Organization
    from api.agents.selectors import agent_list

    organization = Organization.objects.get(name="Bench")
    with CaptureQueriesContext(connection) as queries:
        agent_list(organization=organization)
    return len(queries) + 1  # + the API key lookup of the request


async def measure(
    client: httpx.AsyncClient,
    method: str,
    path: str,
    body: dict | None,
    n: int,
    conc: int,
    headers: dict[str, str] | None = None,
) -> dict:
    latencies: list[float] = []
    for _ in range(n):  # sequential: latency without queueing
        start = time.perf_counter()
        response = await client.request(method, path, json=body, headers=headers)
        latencies.append((time.perf_counter() - start) * 1000)
        assert response.status_code < 300, (path, response.status_code, response.text[:200])
    done = 0

    async def worker() -> None:
        nonlocal done
        while done < n:
            done += 1
            response = await client.request(method, path, json=body, headers=headers)
            assert response.status_code < 300

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(conc)))
    elapsed = time.perf_counter() - start
    return {"p50": statistics.median(latencies), "p95": percentile(latencies, 95), "rps": n / elapsed}


async def list_after_change(client: httpx.AsyncClient, n: int) -> dict:
    """The list read right after each change to an agent (a PATCH of its name), when it is rendered again
    (telephony/agent_list.py): sequential latency of the GET alone; requests/s of the pairs."""
    agent = (await client.get("/public/v1/agents")).json()[0]
    latencies: list[float] = []
    started = time.perf_counter()
    for i in range(n):
        patched = await client.patch(
            f"/public/v1/agents/{agent['id']}", json={"name": f"Agent 0 ({i})", "expectedUpdatedAt": agent["updatedAt"]}
        )
        assert patched.status_code == 200, patched.text[:200]
        agent["updatedAt"] = patched.json()["updatedAt"]
        start = time.perf_counter()
        listed = await client.get("/public/v1/agents")
        latencies.append((time.perf_counter() - start) * 1000)
        assert listed.json()[0]["name"] == f"Agent 0 ({i})"
    return {
        "p50": statistics.median(latencies),
        "p95": percentile(latencies, 95),
        "rps": n / (time.perf_counter() - started),
    }


async def run_http(port: int, key: str, n: int, conc: int, calls: tuple[str, str] | None) -> dict[str, dict]:
    """`calls`: (API key of the calls organization, its busy agent's id), or None to skip that endpoint."""
    headers = {"Authorization": f"Bearer {key}"}
    limits = httpx.Limits(max_connections=conc, max_keepalive_connections=conc)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, limits=limits, timeout=60) as c:
        for _ in range(20):  # warm-up (imports, connection pool)
            await c.get("/public/v1/agents")
        results = {"GET /livez": await measure(c, "GET", "/livez", None, n, conc)}
        results["GET /public/v1/agents"] = await measure(c, "GET", "/public/v1/agents", None, n, conc)
        results["GET agents after a change"] = await list_after_change(c, max(n // 4, 10))
        first = (await c.get("/public/v1/agents")).json()[0]["id"]  # no tools: an authenticated read's floor
        results["GET .../agents/{id}/tools"] = await measure(
            c, "GET", f"/public/v1/agents/{first}/tools", None, n, conc
        )
        body = {"name": "Bench agent", "instructions": "Answer questions."}
        results["POST /public/v1/agents"] = await measure(c, "POST", "/public/v1/agents", body, n, conc)
        if calls is not None:
            calls_key, agent_id = calls
            path = f"/public/v1/calls?agentId={agent_id}&limit=100"
            auth = {"Authorization": f"Bearer {calls_key}"}
            for _ in range(20):  # warm-up of this endpoint
                listed_calls = (await c.get(path, headers=auth)).json()
            assert len(listed_calls) == 100 and listed_calls[0]["startedAt"] > listed_calls[-1]["startedAt"]
            results["GET /public/v1/calls (100)"] = await measure(c, "GET", path, None, n, conc, headers=auth)
        listed = (await c.get("/public/v1/agents")).json()
        results["_listed"] = {"count": len(listed)}
    return results


async def saturate_step(
    base_url: str, method: str, path: str, body: dict | None, headers: dict[str, str], clients: int, seconds: float
) -> dict:
    """`clients` keep-alive connections, each sending its next request as soon as the last is answered,
    for `seconds`: requests/s, latencies and errors."""
    latencies: list[float] = []
    errors: dict[str, int] = {}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base_url, headers=headers, limits=limits, timeout=60) as client:
        await asyncio.gather(*(client.get("/livez") for _ in range(clients)))  # open the connections
        stop = time.perf_counter() + seconds

        async def worker() -> None:
            while time.perf_counter() < stop:
                start = time.perf_counter()
                try:
                    response = await client.request(method, path, json=body)
                    outcome = None if response.is_success else f"HTTP {response.status_code}"
                except httpx.HTTPError as exc:
                    outcome = type(exc).__name__
                latencies.append((time.perf_counter() - start) * 1000)
                if outcome is not None:
                    errors[outcome] = errors.get(outcome, 0) + 1

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        elapsed = time.perf_counter() - start
    return {
        "clients": clients,
        "rps": len(latencies) / elapsed,
        "p50": statistics.median(latencies),
        "p99": percentile(latencies, 99),
        "requests": len(latencies),
        "errors": errors,
    }


def saturate(port: int, endpoints: list[tuple[str, str, str, dict | None, str]], seconds: float, max_clients: int):
    """endpoints: (label, method, path, body, API key). Prints every step and the saturation row."""
    base_url = f"http://127.0.0.1:{port}"
    summary = []
    for label, method, path, body, key in endpoints:
        headers = {"Authorization": f"Bearer {key}"}
        asyncio.run(saturate_step(base_url, method, path, body, headers, 2, 1.0))  # warm-up
        print(f"{label}: {'clients':>7} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'requests':>9} errors")
        steps, clients, flat = [], 1, 0
        while clients <= max_clients:
            step = asyncio.run(saturate_step(base_url, method, path, body, headers, clients, seconds))
            steps.append(step)
            errors = ", ".join(f"{n} x {kind}" for kind, n in step["errors"].items()) or "0"
            print(
                f"{'':{len(label) + 1}} {clients:7d} {step['rps']:8.0f} {step['p50']:8.1f} {step['p99']:8.1f} "
                f"{step['requests']:9d} {errors}"
            )
            best = max(s["rps"] for s in steps[:-1]) if len(steps) > 1 else 0.0
            flat = flat + 1 if step["rps"] < 1.05 * best else 0
            if flat >= 2:
                break
            clients *= 2
        top = max(steps, key=lambda s: s["rps"])
        summary.append((label, top, sum(sum(s["errors"].values()) for s in steps)))
    print("at saturation (the step with the most requests/s):")
    print(f"{'endpoint':34} {'clients':>7} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors (all steps)':>19}")
    for label, top, errors in summary:
        print(f"{label:34} {top['clients']:7d} {top['rps']:8.0f} {top['p50']:8.1f} {top['p99']:8.1f} {errors:19d}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--calls", type=int, default=100_000, help="calls of the agent whose calls are listed")
    parser.add_argument("--skip-calls", action="store_true", help="skip the calls listing benchmark")
    parser.add_argument("--saturate", action="store_true", help="raise the concurrency until throughput stops rising")
    parser.add_argument("--seconds", type=float, default=5.0, help="--saturate: seconds per step")
    parser.add_argument("--max-clients", type=int, default=128, help="--saturate: most concurrent clients")
    args = parser.parse_args()

    env = bench_env()
    os.environ.update(env)
    python = sys.executable
    subprocess.run([python, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    key = seed(args.agents)
    queries = list_query_count()
    calls = None
    if not args.skip_calls:
        import calls_bench  # bench/ is on sys.path: this script's folder

        calls_key, calls_agent_id, seed_seconds = calls_bench.seed(args.calls)
        calls = (calls_key, calls_agent_id)
        print(f"seeded {args.calls + 1000:,} calls ({args.calls:,} of the listed agent) in {seed_seconds:.0f} s")

    port = free_port()
    server = subprocess.Popen(
        [python, "-m", "voiceagent.server", "-b", "127.0.0.1", "-p", str(port), "voiceagent.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                httpx.get(f"http://127.0.0.1:{port}/livez", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        if args.saturate:
            engine = "PostgreSQL" if env["DATABASE_URL"].startswith("postgres") else "SQLite"
            print(f"REST at saturation on one Daphne process ({engine}), {args.agents} agents, {os.cpu_count()} CPUs")
            endpoints = [
                ("GET /livez", "GET", "/livez", None, key),
                ("GET /public/v1/agents", "GET", "/public/v1/agents", None, key),
                (
                    "POST /public/v1/agents",
                    "POST",
                    "/public/v1/agents",
                    {"name": "Bench agent", "instructions": "Hi."},
                    key,
                ),
            ]
            if calls is not None:
                path = f"/public/v1/calls?agentId={calls[1]}&limit=100"
                endpoints.insert(2, ("GET /public/v1/calls (100)", "GET", path, None, calls[0]))
            saturate(port, endpoints, args.seconds, args.max_clients)
            return
        results = asyncio.run(run_http(port, key, args.requests, args.concurrency, calls))
    finally:
        server.terminate()
        server.wait(timeout=10)

    engine = "PostgreSQL" if env["DATABASE_URL"].startswith("postgres") else "SQLite"
    print(
        f"API load on Daphne ({engine}), {args.agents} agents, {args.requests} requests, concurrency {args.concurrency}"
    )
    base = results["GET /livez"]
    print(f"{'endpoint':30} {'p50 ms':>8} {'p95 ms':>8} {'req/s':>8} {'p50 x livez':>12} {'req/s / livez':>14}")
    for name, r in results.items():
        if name.startswith("_"):
            continue
        print(
            f"{name:30} {r['p50']:8.1f} {r['p95']:8.1f} {r['rps']:8.0f} {r['p50'] / base['p50']:12.1f} "
            f"{r['rps'] / base['rps']:14.2f}"
        )
    print(
        f"SQL queries per list request: {queries} (target <= 5); agents listed at the end: {results['_listed']['count']}"
    )
    list_p50 = results["GET /public/v1/agents"]["p50"]
    print(
        f"list of {args.agents} agents p50 {list_p50:.1f} ms (target < 50 ms): {'met' if list_p50 < 50 else 'NOT met'}"
    )
    if calls is not None:
        calls_p50 = results["GET /public/v1/calls (100)"]["p50"]
        print(
            f"100 newest of {args.calls:,} calls of an agent p50 {calls_p50:.1f} ms (target < 30 ms): "
            f"{'met' if calls_p50 < 30 else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
