"""Where test runs are carried out. Never in the request that creates one: `test_run_create` queues it
once its transaction commits, through `test_run_queue`, which returns at once. Where is BACKGROUND_WORK's
(kit/background.py):

- `celery` with a broker (REDIS_URL): the Celery task `realtime.run_agent_tests` (realtime/tasks.py),
  published from a background thread; a broker that cannot be reached leaves the run queued for the
  upkeep sweep;
- `inprocess` (the embedded default): TEST_RUNS_WORKERS daemon threads of this process (a pool), each
  woken by each new run;
- `inline` (tests): right away, in the caller's thread (that run alone, to its end).

A worker (a thread or a task) takes attempts one at a time, each time of the run that is due, fairly across
organizations, until none is left (execution.test_runs_drain).

Durable: a run is queued or running in the database until it is over, so one queued in a process that
stopped, or running in a worker that died, is resumed by `test_runs_resume`, an upkeep job
(voiceagent/apps.py) run at every server start and every CALLS_MAINTENANCE_SECONDS.
"""

from __future__ import annotations

import logging

from django.conf import settings

from kit import background
from realtime.agent_tests.execution import test_run_execute, test_runs_drain, test_runs_resumable

logger = logging.getLogger(__name__)

TASK = "realtime.run_agent_tests"

_pool = background.Pool("agent-tests", lambda: max(1, int(settings.TEST_RUNS_WORKERS)))


def test_run_queue(run_id: str) -> None:
    """Queue one run (returns at once, except BACKGROUND_WORK=inline). Never raises."""
    try:
        # On the pool: every thread drains (each one at most once more while busy: one waiting job a thread).
        for index in range(max(1, int(settings.TEST_RUNS_WORKERS))):
            where = background.submit(
                TASK,
                _drain,
                run_id,
                pool=_pool,
                feature="test_runs",
                key=index,
                inline=lambda run_id: test_run_execute(run_id=run_id),
                publish_in_background=True,  # a request never waits on the broker
                retry=False,
            )
            if where != "pool":
                return
    except Exception:
        logger.exception("could not queue test run %s; the upkeep sweep will resume it", run_id)


def test_runs_resume() -> int:
    """Queue every run that is queued or running and that no live worker holds (the upkeep job)."""
    pending = test_runs_resumable()
    for run_id in pending:
        test_run_queue(run_id)
    return len(pending)


def _drain(run_id: str) -> None:
    """Carry out what is due, of every run (not only `run_id`'s)."""
    try:
        test_runs_drain()
    except Exception:
        logger.exception("background test runs failed")
