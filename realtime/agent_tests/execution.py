"""Carrying out a test run (`test_run_execute`: every chosen test `repeat` times through
realtime/agent_tests/runner.py).

A run is taken with a lease (`claimed_at`, renewed after every attempt): two workers never run it at
once, and a run whose worker died (a restart, a kill) is taken again once TEST_RUNS_LEASE_SECONDS have
passed, going on after the last attempt it stored (realtime/agent_tests/worker.py resumes them).

The counts are attempts: `passed`, `failed`, `errored` (an attempt `skipped`, nothing but criteria that
could not be judged, counts in none). Each test's result has its `passRate` over its judged attempts.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from realtime.models import AgentTest, TestRun, TestRunStatus

logger = logging.getLogger(__name__)


def lease() -> timedelta:
    return timedelta(seconds=int(settings.TEST_RUNS_LEASE_SECONDS))


def test_run_claim(*, run_id: Any) -> bool:
    """Take a queued run, or a running one whose lease is over, for this worker (one conditional UPDATE)."""
    now = timezone.now()
    free = Q(claimed_at__isnull=True) | Q(claimed_at__lt=now - lease())
    active = Q(status=TestRunStatus.QUEUED) | Q(status=TestRunStatus.RUNNING)
    taken = TestRun.objects.filter(free, active, pk=run_id).update(claimed_at=now, status=TestRunStatus.RUNNING)
    if taken:
        TestRun.objects.filter(pk=run_id, started_at__isnull=True).update(started_at=now)
    return taken == 1


def test_runs_resumable() -> list[str]:
    """Runs queued or running that no live worker holds."""
    free = Q(claimed_at__isnull=True) | Q(claimed_at__lt=timezone.now() - lease())
    active = Q(status=TestRunStatus.QUEUED) | Q(status=TestRunStatus.RUNNING)
    return [str(pk) for pk in TestRun.objects.filter(free, active).values_list("pk", flat=True)]


def _counts(results: list[dict[str, Any]]) -> dict[str, int]:
    verdicts = [attempt["verdict"] for result in results for attempt in result["attempts"]]
    return {
        "passed": verdicts.count("pass"),
        "failed": verdicts.count("fail"),
        "errored": verdicts.count("error"),
    }


def _pass_rate(attempts: list[dict[str, Any]]) -> float | None:
    judged = [attempt for attempt in attempts if attempt["verdict"] != "skipped"]
    if not judged:
        return None
    return round(sum(1 for attempt in judged if attempt["verdict"] == "pass") / len(judged), 4)


def _store(run_id: Any, results: list[dict[str, Any]], **fields: Any) -> None:
    TestRun.objects.filter(pk=run_id).update(results=results, claimed_at=timezone.now(), **_counts(results), **fields)


def test_run_execute(*, run_id: Any, claim: bool = True) -> str:
    """Carry out a run (after taking it, unless `claim=False`: the caller has it); its final status, or
    "" when it was not to be taken. Goes on after the attempts a dead worker stored."""
    from realtime.agent_tests.runner import attempt_run  # the runtime: loaded only by who runs tests

    if claim and not test_run_claim(run_id=run_id):
        return ""
    run = TestRun.objects.select_related("agent").filter(pk=run_id).first()
    if run is None:
        return ""
    try:
        results: list[dict[str, Any]] = list(run.results or [])
        done = {result["testId"]: result for result in results}
        tests = {str(test.pk): test for test in AgentTest.objects.filter(agent=run.agent, pk__in=run.test_ids)}
        for test_id in run.test_ids:
            test = tests.get(str(test_id))
            result = done.get(str(test_id))
            if result is None:
                result = {
                    "testId": str(test_id),
                    "name": test.name if test else "",
                    "kind": test.kind if test else "",
                    "passRate": None,
                    "attempts": [],
                }
                results.append(result)
            while len(result["attempts"]) < run.repeat:
                if test is None:
                    attempt: dict[str, Any] = {"verdict": "error", "reasons": ["the test was deleted"]}
                else:
                    test.agent = run.agent
                    try:
                        attempt = attempt_run(test)
                    except Exception as exc:
                        logger.exception("agent test %s failed unexpectedly", test_id)
                        attempt = {"verdict": "error", "reasons": [f"unexpected error ({type(exc).__name__})"]}
                result["attempts"].append(attempt)
                result["passRate"] = _pass_rate(result["attempts"])
                _store(run.pk, results)
        _store(run.pk, results, status=TestRunStatus.COMPLETED, finished_at=timezone.now())
        return TestRunStatus.COMPLETED
    except Exception as exc:
        logger.exception("test run %s failed", run_id)
        TestRun.objects.filter(pk=run_id).update(
            status=TestRunStatus.FAILED, error=f"The run failed: {type(exc).__name__}", finished_at=timezone.now()
        )
        return TestRunStatus.FAILED
