"""Agent test runs benchmark (not a test): how many test attempts per second one process carries out
through the real runtime (realtime/agent_tests/runner.py) with the embedded brain, the cost of a test run.

Runs in-process against its own database: a fresh SQLite file var/bench-atbench.sqlite3, or the
PostgreSQL named by DATABASE_URL with `_atbench` appended to the database name (dropped at the end). One
agent with a webhook tool (mocked), a knowledge document and a handoff number; four tests (a mocked tool,
a knowledge answer, a transfer, a greeting); one run of them `--repeat` times, after a warm-up attempt
(what a process builds once: the brain's indexes; attempts are typed sessions, so no speech model loads). Prints attempts per second, caller turns per
second, and the p50/p95 of one attempt and of the latency per turn.

Usage: .venv/bin/python bench/agent_tests.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from testing.figures import percentile  # noqa: E402 - after the repository root is put on sys.path
from testing.stores import bench_database, drop_bench_database  # noqa: E402 - after the repository root is put on sys.path

CLINIC = """# Riverside Clinic

## Opening hours

The clinic is open from Monday to Friday, from eight in the morning to six in the evening.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="attempts per test (1-5)")
    args = parser.parse_args()

    handle = bench_database("atbench", ROOT / "var")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "voiceagent.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    # Inline: the knowledge document is indexed inside document_create; the run is not queued (queue=False)
    # but carried out by hand below (test_run_execute), and no loop of a serving process starts.
    os.environ["BACKGROUND_WORK"] = "inline"
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from accounts.services import organization_create
    from agents.models import Agent, AgentTool
    from knowledge import services as knowledge
    from realtime.agent_tests.execution import test_run_execute
    from realtime.agent_tests.runner import attempt_run
    from realtime.agent_tests.runs import test_run_create
    from realtime.agent_tests.selectors import test_run_results
    from realtime.models import AgentTest, TestRun

    try:
        call_command("migrate", verbosity=0)
        print(f"database: {connection.vendor}; cores: {os.cpu_count()}; brain: {settings.LLM_PROVIDER}")
        organization, _ = organization_create(name="Bench", plan_code="agency")
        agent = Agent.objects.create(
            organization=organization,
            name="Olive",
            status="active",
            agent_type="webhook",
            server_url="https://hooks.example.com/voice",
            instructions="You help callers with their orders and questions about the Riverside Clinic.",
            greeting_type="static",
            static_greeting="Thanks for calling.",
            handoff_phone_number="+15557654321",
            updated_at=timezone.now(),
        )
        AgentTool.objects.create(
            agent=agent,
            name="check_order_status",
            description="Look up the delivery status of an order by its order number",
            parameter_schema={
                "type": "object",
                "properties": {"order_number": {"type": "string"}},
                "required": ["order_number"],
            },
        )
        knowledge.document_create(organization=organization, agent_id=str(agent.pk), content=CLINIC)
        specs = [
            (
                "order",
                [{"user": "What is the status of order 3561?"}],
                [{"tool": "check_order_status", "result": {"status": "shipped"}}],
                {"replyContains": ["shipped"]},
            ),
            ("hours", [{"user": "What are the opening hours of the clinic?"}], [], {"replyContains": ["Monday"]}),
            ("person", [{"user": "Can I talk to a real person please?"}], [], {"transferred": True}),
            ("hello", [{"user": "Hello"}, {"user": "Thank you"}], [], {"noToolCalls": True}),
        ]
        tests = [
            AgentTest.objects.create(
                organization=organization,
                agent=agent,
                name=name,
                kind="reply",
                turns=turns,
                tool_mocks=mocks,
                expect=expect,
            )
            for name, turns, mocks, expect in specs
        ]
        started = time.perf_counter()
        attempt_run(AgentTest.objects.select_related("agent").get(pk=tests[0].pk))
        print(f"warm-up attempt: {time.perf_counter() - started:.1f} s")

        run = test_run_create(agent=agent, repeat=args.repeat, queue=False)
        started = time.perf_counter()
        test_run_execute(run_id=run.pk)
        elapsed = time.perf_counter() - started
        run = TestRun.objects.get(pk=run.pk)
        attempts = [attempt for result in test_run_results(run) for attempt in result["attempts"]]
        durations = [attempt["durationMs"] for attempt in attempts if "durationMs" in attempt]
        latencies = [ms for attempt in attempts for ms in attempt.get("latencyMs") or [] if ms is not None]
        turns = sum(len(attempt.get("latencyMs") or []) for attempt in attempts)
        print(
            f"{len(attempts)} attempts ({run.passed} passed, {run.failed} failed, {run.errored} errors) in "
            f"{elapsed:.2f} s: {len(attempts) / elapsed:.1f} attempts/s, {turns / elapsed:.1f} caller turns/s"
        )
        print(
            f"one attempt: p50 {statistics.median(durations):.0f} ms, p95 {percentile(durations, 95):.0f} ms; "
            f"latency per turn: p50 {statistics.median(latencies):.0f} ms, p95 {percentile(latencies, 95):.0f} ms"
        )
    finally:
        drop_bench_database(handle)


if __name__ == "__main__":
    main()
