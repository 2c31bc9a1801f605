"""REST at saturation (not a test): how many public API requests a second one Daphne process answers,
with the p50/p99 latency, while every request still passes authentication and the per-API-key rate
limit (lifted for the bench key: a million requests a second, docs/limits.md).

Starts a real Daphne server on a free loopback port against its own database (bench/api_load.py's:
a fresh SQLite file under var/, or DATABASE_URL's PostgreSQL with `_bench` appended; REDIS_URL, when
set, puts the rate-limit buckets in Redis as in production), seeds an organization with --agents agents,
then for each --concurrency runs that many closed-loop clients for --seconds on GET /public/v1/agents
and prints requests/s, p50, p99 and the error count (any answer but 200, or a transport error).

Usage: .venv/bin/python bench/rest_saturation.py [--agents 20] [--seconds 10] [--concurrency 1 8 32 64]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import api_load  # bench/ helpers (database, seed, free port)

PATH = "/public/v1/agents"


async def saturate(port: int, key: str, concurrency: int, seconds: float) -> dict:
    headers = {"Authorization": f"Bearer {key}"}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    latencies: list[float] = []
    errors = 0
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", headers=headers, limits=limits, timeout=60
    ) as client:
        for _ in range(20):  # warm-up: imports, connection pool
            await client.get(PATH)
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal errors
            while time.perf_counter() < deadline:
                start = time.perf_counter()
                try:
                    response = await client.get(PATH)
                    ok = response.status_code == 200
                except httpx.HTTPError:
                    ok = False
                latencies.append((time.perf_counter() - start) * 1000)
                errors += not ok

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
    return {
        "requests": len(latencies),
        "rps": len(latencies) / elapsed,
        "p50": api_load.pct(latencies, 50),
        "p99": api_load.pct(latencies, 99),
        "errors": errors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 64])
    args = parser.parse_args()

    env = api_load.bench_env()
    if env["DATABASE_URL"].startswith("postgres"):
        api_load.ensure_postgres_database(env["DATABASE_URL"])
    os.environ.update(env)
    python = sys.executable
    subprocess.run([python, "manage.py", "migrate", "--noinput", "-v0"], cwd=api_load.ROOT, env=env, check=True)
    key = api_load.seed(args.agents)  # lifts the plans' rate limits in the bench database

    port = api_load.free_port()
    server = subprocess.Popen(
        [str(Path(python).parent / "daphne"), "-b", "127.0.0.1", "-p", str(port), "voiceagent.asgi:application"],
        cwd=api_load.ROOT,
        env={**env, "REALTIME_PRELOAD": "false"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(300):
            try:
                httpx.get(f"http://127.0.0.1:{port}/livez", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        results = {c: asyncio.run(saturate(port, key, c, args.seconds)) for c in args.concurrency}
    finally:
        server.terminate()
        server.wait(timeout=10)

    engine = "PostgreSQL" if env["DATABASE_URL"].startswith("postgres") else "SQLite"
    cache = "Redis" if env.get("REDIS_URL") else "local memory"
    limits = (
        f"rate limit checked, buckets in {cache}" if env.get("API_RATE_LIMITS", "true") != "false" else "no rate limit"
    )
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(
        f"REST at saturation: GET {PATH} ({args.agents} agents), one Daphne process, {engine}, {limits}, "
        f"{args.seconds:g} s per concurrency; load average {load} on {os.cpu_count()} CPUs"
    )
    print(f"{'clients':>8} {'requests':>9} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
    for concurrency, r in results.items():
        print(f"{concurrency:8d} {r['requests']:9d} {r['rps']:8.0f} {r['p50']:8.1f} {r['p99']:8.1f} {r['errors']:7d}")


if __name__ == "__main__":
    main()
