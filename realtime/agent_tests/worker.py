"""Where test runs are carried out. Never in the request that creates one: `test_run_create` queues it
once its transaction commits, through `test_run_queue`, which returns at once:

- TEST_RUNS_WORKER=celery (the default with REDIS_URL): the Celery task `realtime.run_agent_tests`
  (realtime/tasks.py), published from a background thread; a broker that cannot be reached leaves the
  run queued for the upkeep sweep;
- TEST_RUNS_WORKER=inprocess (the embedded default): a background thread of this process
  (TEST_RUNS_WORKERS threads; runs one after the other on each);
- TEST_RUNS_INLINE (tests): right away, in the caller's thread.

Durable: a run is queued or running in the database until it is completed, so one queued in a process
that stopped, or running in a worker that died, is resumed by `test_runs_resume`, an upkeep job
(voiceagent/apps.py) run at every server start and every CALLS_MAINTENANCE_SECONDS.
"""

from __future__ import annotations

import logging
import queue
import threading

from django.conf import settings
from django.db import close_old_connections, connections

from realtime.agent_tests.execution import test_run_execute, test_runs_resumable
from realtime.agent_tests.tasks import run_agent_tests

logger = logging.getLogger(__name__)

_pool: _Pool | None = None
_pool_lock = threading.Lock()


def test_run_queue(run_id: str) -> None:
    """Queue one run (returns at once, except TEST_RUNS_INLINE). Never raises."""
    try:
        if settings.TEST_RUNS_INLINE:
            test_run_execute(run_id=run_id)
            return
        if settings.TEST_RUNS_WORKER == "inprocess" or run_agent_tests.app.conf.task_always_eager:
            _pool_of_this_process().submit(_run, run_id)
        else:
            _pool_of_this_process().submit(_publish, run_id)
    except Exception:
        logger.exception("could not queue test run %s; the upkeep sweep will resume it", run_id)


def test_runs_resume() -> int:
    """Queue every run that is queued or running and that no live worker holds (the upkeep job)."""
    pending = test_runs_resumable()
    for run_id in pending:
        test_run_queue(run_id)
    return len(pending)


def _pool_of_this_process() -> _Pool:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = _Pool(int(settings.TEST_RUNS_WORKERS))
        return _pool


class _Pool:
    """Daemon threads taking runs from one queue (a run left behind by an exit is resumed at the next start)."""

    def __init__(self, workers: int) -> None:
        self._queue: queue.SimpleQueue[tuple[object, str]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._waiting: set[str] = set()
        for index in range(max(1, workers)):
            threading.Thread(target=self._work, name=f"agent-tests-{index}", daemon=True).start()

    def submit(self, function: object, run_id: str) -> None:
        with self._lock:
            if run_id in self._waiting:
                return
            self._waiting.add(run_id)
        self._queue.put((function, run_id))

    def _work(self) -> None:
        while True:
            function, run_id = self._queue.get()
            with self._lock:
                self._waiting.discard(run_id)
            try:
                function(run_id)  # type: ignore[operator]
            except Exception:
                logger.exception("background test run %s failed", run_id)


def _publish(run_id: str) -> None:
    try:
        run_agent_tests.apply_async(args=[run_id], retry=False)
    except Exception as exc:  # noqa: BLE001 - an outage is expected; the sweep resumes the run
        logger.warning(
            "could not queue test run %s (%s: %s); the upkeep sweep will resume it", run_id, type(exc).__name__, exc
        )


def _run(run_id: str) -> None:
    try:
        close_old_connections()
        test_run_execute(run_id=run_id)
    finally:
        connections.close_all()  # this thread's connection only
