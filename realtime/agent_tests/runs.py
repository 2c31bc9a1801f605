"""Test runs: creating one (`test_run_create`, queued once its transaction commits) within the bounds
(TEST_RUNS_MAX_ATTEMPTS attempts per run, TEST_RUNS_MAX_UNFINISHED_PER_ORGANIZATION runs queued or running
per organization), and cancelling one (`test_run_cancel`). Reading one: realtime/agent_tests/selectors.py;
carrying one out: realtime/agent_tests/execution.py."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import Organization
from agents.models import Agent
from kit.errors import ApiError
from kit.validation import parse_uuid
from realtime.agent_tests.selectors import test_run_get
from realtime.agent_tests.worker import test_run_queue
from realtime.models import UNFINISHED_TEST_RUN, AgentTest, TestRun, TestRunStatus

MAX_REPEAT = 5
MAX_TAG_LENGTH = 64
BUSY_RETRY_AFTER_SECONDS = 30  # a queued run of the organization is likely to have finished by then
TOO_MANY_ATTEMPTS = "TEST_RUN_TOO_BIG"
BUSY = "TEST_RUNS_BUSY"
FINISHED = "TEST_RUN_FINISHED"


def test_run_create(
    *,
    agent: Agent,
    test_ids: list[Any] | None = None,
    tag: str = "",
    repeat: int = 1,
    queue: bool = True,
) -> TestRun:
    """A queued run of the agent's tests: those of `test_ids` (in that order), else those tagged `tag`,
    else all of them, each `repeat` times (1..5). Queued for a worker once committed (`queue=False`: the
    caller runs it itself, like `manage.py agenttest`). 400 with a clear message otherwise."""
    if isinstance(repeat, bool) or not isinstance(repeat, int) or not 1 <= repeat <= MAX_REPEAT:
        raise ApiError.field("repeat", f"must be a whole number from 1 to {MAX_REPEAT}")
    if not isinstance(tag, str) or len(tag) > MAX_TAG_LENGTH:
        raise ApiError.field("tag", f"must be a string of at most {MAX_TAG_LENGTH} characters")
    tests = AgentTest.objects.filter(agent=agent)
    if test_ids:
        if not isinstance(test_ids, list) or not all(isinstance(value, str) for value in test_ids):
            raise ApiError.field("testIds", "must be a list of test ids")
        wanted = [str(parse_uuid(value, "test")) for value in dict.fromkeys(test_ids)]
        found = {str(pk) for pk in tests.filter(pk__in=wanted).values_list("pk", flat=True)}
        unknown = [value for value in wanted if value not in found]
        if unknown:
            raise ApiError.field("testIds", f"unknown test {unknown[0]} (not a test of this agent)")
        chosen = wanted
    else:
        ids = [str(pk) for pk, tags in tests.values_list("pk", "tags") if not tag or tag in (tags or [])]
        if not ids:
            message = f"the agent has no test tagged {tag!r}" if tag else "the agent has no tests"
            raise ApiError.invalid(f"Nothing to run: {message}.")
        chosen = ids
    attempts, most = len(chosen) * repeat, int(settings.TEST_RUNS_MAX_ATTEMPTS)
    if attempts > most:
        raise ApiError(
            f"A run makes at most {most} attempts (tests x repeat); this one would make {attempts} "
            f"({len(chosen)} tests x {repeat}): choose fewer tests (testIds or tag) or a lower repeat.",
            code=TOO_MANY_ATTEMPTS,
        )
    with transaction.atomic():
        # The organization's row lock serializes its run creations, so the cap holds under concurrent requests.
        Organization.objects.select_for_update().filter(pk=agent.organization_id).first()
        cap = int(settings.TEST_RUNS_MAX_UNFINISHED_PER_ORGANIZATION)
        unfinished = TestRun.objects.filter(organization_id=agent.organization_id, status__in=UNFINISHED_TEST_RUN)
        if unfinished.count() >= cap:
            raise ApiError.too_many(
                f"The organization has {cap} test runs queued or running, the most it may have: wait for one to "
                "finish (or cancel one) and try again.",
                code=BUSY,
                retry_after=BUSY_RETRY_AFTER_SECONDS,
            )
        run = TestRun.objects.create(
            organization_id=agent.organization_id, agent=agent, test_ids=chosen, tag=tag, repeat=repeat
        )
    if queue:
        run_id = str(run.pk)
        transaction.on_commit(lambda: test_run_queue(run_id))
    return run


def test_run_cancel(*, organization: Organization, run_id: str) -> TestRun:
    """Stop a queued or running run: it is `cancelled` at once, and its worker stops before the next attempt
    (the one under way, if any, is stored). Cancelling a cancelled run answers it again; a run already over is a 409 TEST_RUN_FINISHED; another
    organization's a 404."""
    run = test_run_get(organization=organization, run_id=run_id)
    stopped = TestRun.objects.filter(pk=run.pk, status__in=UNFINISHED_TEST_RUN).update(
        status=TestRunStatus.CANCELLED, finished_at=timezone.now()
    )
    run.refresh_from_db()
    if not stopped and run.status != TestRunStatus.CANCELLED:
        raise ApiError.conflict(
            f"The test run is already over ({run.status}): there is nothing to cancel.", code=FINISHED
        )
    return run  # cancelling again answers the same (a client may retry)
