"""Metrics overhead benchmark (not a test): what the instrumentation costs the engine, and what a
scrape of GET /metrics costs, in the single-process registry and in multi-process mode
(PROMETHEUS_MULTIPROC_DIR, several processes writing).

  - record: one answered turn's metrics (5 stage observations) plus one tool call, per call of the
    functions the engine uses (kit.metrics.record_turn / record_tool_call), in microseconds;
  - scrape: the exposition the endpoint serves (size and time), after WRITERS other processes have
    each recorded TURNS turns (multi-process mode) or this process has (single process).

Usage: .venv/bin/python bench/metrics_overhead.py [--turns 10000] [--writers 4]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_CHILD = r"""
import os, sys, time, statistics, django
sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "voiceagent.settings")
django.setup()
from kit import metrics
mode, turns = sys.argv[1], int(sys.argv[2])
stages = {"end_of_turn": 310.0, "recognition": 95.0, "first_token": 2.0, "first_audio": 60.0, "total": 467.0}
if mode in ("record", "write"):
    started = time.perf_counter()
    for index in range(turns):
        metrics.record_turn(stages, engine="cascade" if index % 2 else "speech-to-speech")
        metrics.record_tool_call(kind="webhook", outcome="success", seconds=0.05)
    elapsed = time.perf_counter() - started
    if mode == "record":
        print(f"{elapsed / turns * 1e6:.1f}")
if mode in ("record", "scrape"):
    times = []
    for _ in range(20):
        started = time.perf_counter()
        body = metrics.exposition()
        times.append(time.perf_counter() - started)
    print(f"{statistics.median(times) * 1000:.2f} {len(body)}")
"""


def run(mode: str, turns: int, env: dict[str, str]) -> list[str]:
    output = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(turns)], cwd=REPO, env=env, check=True, capture_output=True
    )
    return output.stdout.decode().split()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=10000)
    parser.add_argument("--writers", type=int, default=4)
    args = parser.parse_args()
    env = {**os.environ}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    per_turn, scrape_ms, size = run("record", args.turns, env)
    print(f"single process: record one turn + one tool call {per_turn} us; scrape {scrape_ms} ms, {size} bytes")
    with tempfile.TemporaryDirectory() as folder:
        env["PROMETHEUS_MULTIPROC_DIR"] = folder
        per_turn_mp = run("record", args.turns, env)[0]
        writers = [
            subprocess.Popen([sys.executable, "-c", _CHILD, "write", str(args.turns)], cwd=REPO, env=env)
            for _ in range(args.writers)
        ]
        for writer in writers:
            writer.wait()
        scrape_ms, size = run("scrape", 0, env)
        print(
            f"multi-process: record one turn + one tool call {per_turn_mp} us; scrape of {args.writers + 1} "
            f"processes' files {scrape_ms} ms, {size} bytes"
        )
    print(f"({args.turns} turns per process; scrape time: median of 20)")


if __name__ == "__main__":
    main()
