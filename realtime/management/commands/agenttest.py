"""manage.py agenttest --agent ID [--tag T] [--repeat N] [--junit report.xml]: run an agent's tests here and
now (in this process, through the real runtime, like a background run), print a summary, optionally write
a JUnit XML report, and exit 1 when any attempt failed or had an error (docs/guides/agent-test-runs.md)."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.models import Agent
from kit.errors import ApiError
from realtime.agent_tests.execution import test_run_execute
from realtime.agent_tests.runs import test_run_create
from realtime.agent_tests.selectors import test_run_results
from realtime.models import TestRun


def _testcase_outcome(attempts: list[dict[str, Any]]) -> tuple[str, str]:
    """("error" | "failure" | "skipped" | "", its message) for one test over its attempts."""
    for verdict, kind in (("error", "error"), ("fail", "failure")):
        bad = [attempt for attempt in attempts if attempt.get("verdict") == verdict]
        if bad:
            reasons = "; ".join(bad[0].get("reasons") or [])
            return kind, f"{len(bad)} of {len(attempts)} attempts: {reasons}"
    if attempts and all(attempt.get("verdict") == "skipped" for attempt in attempts):
        return "skipped", "criteria need a language model (LLM_PROVIDER=openai)"
    return "", ""


def junit_report(run: TestRun, agent_name: str) -> ElementTree.ElementTree:
    """One testsuite (the run), one testcase per test; failure, error or skipped children."""
    suite = ElementTree.Element("testsuite", name=f"agent tests: {agent_name}")
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total_seconds = 0.0
    for result in test_run_results(run):
        attempts = result.get("attempts") or []
        seconds = sum(attempt.get("durationMs") or 0 for attempt in attempts) / 1000
        total_seconds += seconds
        case = ElementTree.SubElement(
            suite, "testcase", name=result.get("name") or result["testId"], classname=f"agent.{run.agent_id}"
        )
        case.set("time", f"{seconds:.3f}")
        counts["tests"] += 1
        outcome, message = _testcase_outcome(attempts)
        if outcome:
            child = ElementTree.SubElement(case, outcome, message=message[:500])
            child.text = message
            counts[{"error": "errors", "failure": "failures", "skipped": "skipped"}[outcome]] += 1
        if result.get("passRate") is not None:
            ElementTree.SubElement(case, "system-out").text = f"passRate {result['passRate']}"
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("time", f"{total_seconds:.3f}")
    return ElementTree.ElementTree(suite)


class Command(BaseCommand):
    help = "Run an agent's tests through the real runtime; exit 1 on any failure or error."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--agent", required=True, help="The agent's id.")
        parser.add_argument("--tag", default="", help="Only the tests with this tag.")
        parser.add_argument("--repeat", type=int, default=1, help="Attempts per test (1-5, default 1).")
        parser.add_argument("--junit", default="", help="Write a JUnit XML report to this file.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            agent = Agent.objects.filter(pk=uuid.UUID(str(options["agent"]))).first()
        except ValueError:
            raise CommandError(f"Invalid agent ID: {options['agent']!r} is not a UUID") from None
        if agent is None:
            raise CommandError(f"Agent {options['agent']} not found")
        try:
            run = test_run_create(agent=agent, tag=options["tag"], repeat=options["repeat"], queue=False)
        except ApiError as exc:
            raise CommandError(exc.message) from None
        test_run_execute(run_id=run.pk)
        run.refresh_from_db()
        for result in test_run_results(run):
            verdicts = [attempt.get("verdict", "error") for attempt in result.get("attempts") or []]
            self.stdout.write(f"{'/'.join(verdicts):<12} {result.get('name')}")
            for attempt in result.get("attempts") or []:
                for reason in attempt.get("reasons") or []:
                    self.stdout.write(f"             - {reason}")
        self.stdout.write(
            f"{run.passed} passed, {run.failed} failed, {run.errored} errors ({run.status}; test run {run.pk})"
        )
        if options["junit"]:
            report = junit_report(run, agent.name)
            ElementTree.indent(report)
            report.write(Path(options["junit"]), encoding="utf-8", xml_declaration=True)
        if run.status != "completed" or run.failed or run.errored:
            sys.exit(1)
