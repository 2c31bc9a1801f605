"""Carrying out test runs, one attempt at a time (`test_run_step`: the next attempt of one run through
realtime/agent_tests/runner.py), fairly across organizations (`test_runs_drain`).

An attempt is stored as a row of its own (TestAttempt), added once when it is over: a run's rows are only
ever added, never rewritten, and its counts (`passed`, `failed`, `errored`; an attempt `skipped`, nothing
but criteria that could not be judged, counts in none) grow with each row in the same transaction.

A worker takes a run for one attempt with a lease (`claimed_at`, one conditional UPDATE) and gives it
back when the attempt is stored: two workers never run one run at once, and between two attempts the
worker looks again at what to do next. So a run stops between attempts when it is cancelled (its status
is no longer queued or running) or its agent is deleted (the run goes with it), and a worker that takes
the next attempt serves the organization it served longest ago first (round-robin by organization; within
one organization, its oldest run first): another organization's one-test run does not wait for a big run
to finish. A run whose worker died (a restart, a kill) is taken again once TEST_RUNS_LEASE_SECONDS have
passed, going on after the last attempt it stored (realtime/agent_tests/worker.py resumes them).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from kit.redaction import categories_of, redact_for_agent
from realtime.models import UNFINISHED_TEST_RUN, AgentTest, TestAttempt, TestRun, TestRunStatus

logger = logging.getLogger(__name__)

MORE = "more"  # test_run_step: the run has attempts left
# What of an attempt may hold what the caller or a tool said (an agent's redactPii applies to it; so does it to
# the values the flow collected, `flow.collected`, in _redacted: the flow's path is node ids).
_SAID = ("reasons", "transcript", "toolCalls", "criteria")
_COUNTED = {"pass": "passed", "fail": "failed", "error": "errored"}


def lease() -> timedelta:
    return timedelta(seconds=int(settings.TEST_RUNS_LEASE_SECONDS))


def _free() -> Q:
    return Q(claimed_at__isnull=True) | Q(claimed_at__lt=timezone.now() - lease())


def test_run_claim(*, run_id: Any) -> bool:
    """Take a queued run, or a running one that no live worker holds, for one attempt (one conditional UPDATE)."""
    now = timezone.now()
    taken = TestRun.objects.filter(_free(), pk=run_id, status__in=UNFINISHED_TEST_RUN).update(
        claimed_at=now, served_at=now, status=TestRunStatus.RUNNING
    )
    if taken:
        TestRun.objects.filter(pk=run_id, started_at__isnull=True).update(started_at=now)
    return taken == 1


def test_runs_resumable() -> list[str]:
    """Runs queued or running that no live worker holds."""
    return [
        str(pk) for pk in TestRun.objects.filter(_free(), status__in=UNFINISHED_TEST_RUN).values_list("pk", flat=True)
    ]


def test_run_next() -> str | None:
    """The run whose next attempt is due: of the organization served longest ago (never served first), its
    oldest run that no worker holds. None when there is nothing to do."""
    rows = list(
        TestRun.objects.filter(status__in=UNFINISHED_TEST_RUN).values_list(
            "pk", "organization_id", "served_at", "claimed_at", "created_at"
        )
    )
    never = datetime.min.replace(tzinfo=timezone.now().tzinfo)
    served: dict[Any, datetime] = {}
    for _pk, organization, served_at, _claimed, _created in rows:
        served[organization] = max(served.get(organization, never), served_at or never)
    expired = timezone.now() - lease()
    free = [row for row in rows if row[3] is None or row[3] < expired]
    if not free:
        return None
    chosen = min(free, key=lambda row: (served[row[1]], row[4], str(row[0])))
    return str(chosen[0])


def _redacted(run: TestRun, attempt: dict[str, Any]) -> dict[str, Any]:
    """With the agent's redactPii, what the caller, the agent and the tools said, and what the flow collected, is
    stored redacted (as a call's is)."""
    if not categories_of(run.agent.redact_pii):
        return attempt
    redacted = {key: redact_for_agent(run.agent, value) if key in _SAID else value for key, value in attempt.items()}
    flow = attempt.get("flow")
    if isinstance(flow, dict):
        redacted["flow"] = {**flow, "collected": redact_for_agent(run.agent, flow.get("collected") or {})}
    return redacted


def _append(run: TestRun, position: int, number: int, test: AgentTest | None, attempt: dict[str, Any]) -> bool:
    """Store one attempt (a new row, the run's counts grown by it) and give the run back; False when the
    run is gone (its agent deleted) or the attempt was stored already."""
    verdict = str(attempt.get("verdict") or "error")
    counted = _COUNTED.get(verdict)
    try:
        with transaction.atomic():
            if not TestRun.objects.filter(pk=run.pk).exists():
                return False
            TestAttempt.objects.create(
                run=run,
                position=position,
                number=number,
                test_id=run.test_ids[position],
                name=test.name if test else "",
                kind=test.kind if test else "",
                verdict=verdict,
                result=attempt,
            )
            grown: dict[str, Any] = {counted: F(counted) + 1} if counted else {}
            TestRun.objects.filter(pk=run.pk).update(claimed_at=None, **grown)
    except IntegrityError:
        return False
    return True


def _finish(run_id: Any, status: str, **fields: Any) -> bool:
    """Close a run that is still running (a cancellation that came first stands)."""
    return (
        TestRun.objects.filter(pk=run_id, status__in=UNFINISHED_TEST_RUN).update(
            status=status, finished_at=timezone.now(), claimed_at=None, **fields
        )
        == 1
    )


def test_run_step(*, run_id: Any) -> str:
    """Take the run and carry out its next attempt: MORE when it has attempts left, its final status when it
    is over, "" when it was not to be taken (cancelled, finished, deleted, or held by another worker)."""
    from realtime.agent_tests.runner import attempt_run  # the runtime: loaded only by who runs tests

    if not test_run_claim(run_id=run_id):
        return ""
    run = TestRun.objects.select_related("agent").filter(pk=run_id).first()
    if run is None:
        return ""
    try:
        done = TestAttempt.objects.filter(run=run).count()  # attempts are stored in order
        total = len(run.test_ids) * run.repeat
        if done >= total:
            return TestRunStatus.COMPLETED if _finish(run.pk, TestRunStatus.COMPLETED) else ""
        position, number = divmod(done, run.repeat)
        test = AgentTest.objects.filter(agent=run.agent, pk=run.test_ids[position]).first()
        if test is None:
            attempt: dict[str, Any] = {"verdict": "error", "reasons": ["the test was deleted"]}
        else:
            test.agent = run.agent
            try:
                attempt = attempt_run(test)
            except Exception as exc:
                logger.exception("agent test %s failed unexpectedly", test.pk)
                attempt = {"verdict": "error", "reasons": [f"unexpected error ({type(exc).__name__})"]}
        if not _append(run, position, number, test, _redacted(run, attempt)):
            return ""
        if done + 1 >= total:
            return TestRunStatus.COMPLETED if _finish(run.pk, TestRunStatus.COMPLETED) else ""
        return MORE
    except Exception as exc:
        logger.exception("test run %s failed", run_id)
        _finish(run_id, TestRunStatus.FAILED, error=f"The run failed: {type(exc).__name__}")
        return TestRunStatus.FAILED


def test_run_execute(*, run_id: Any) -> str:
    """Carry out one run to its end here (BACKGROUND_WORK=inline, `manage.py agenttest`): its final status, or ""
    when it was not to be taken or was stopped (cancelled, its agent deleted)."""
    for _ in range(int(settings.TEST_RUNS_MAX_ATTEMPTS) * 2 + 2):
        status = test_run_step(run_id=run_id)
        if status != MORE:
            return status
    return ""


def test_runs_drain(*, limit: int = 100_000) -> int:
    """Carry out attempts, each time of the run that is due (test_run_next), until none is left; how many
    steps were taken."""
    steps = 0
    while steps < limit:
        run_id = test_run_next()
        if run_id is None:
            return steps
        test_run_step(run_id=run_id)
        steps += 1
    return steps
