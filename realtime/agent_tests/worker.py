"""Where test runs are carried out. Never in the request that creates one: `test_run_create` queues it
once its transaction commits, through `test_run_queue`, which returns at once:

- TEST_RUNS_WORKER=celery (the default with REDIS_URL): the Celery task `realtime.run_agent_tests`
  (realtime/tasks.py), published from a background thread; a broker that cannot be reached leaves the
  run queued for the upkeep sweep;
- TEST_RUNS_WORKER=inprocess (the embedded default): TEST_RUNS_WORKERS background threads of this process,
  woken by each new run;
- TEST_RUNS_INLINE (tests): right away, in the caller's thread (that run alone, to its end).

A worker (a thread or a task) takes attempts one at a time, each time of the run that is due, fairly across
organizations, until none is left (execution.test_runs_drain).

Durable: a run is queued or running in the database until it is over, so one queued in a process that
stopped, or running in a worker that died, is resumed by `test_runs_resume`, an upkeep job
(voiceagent/apps.py) run at every server start and every CALLS_MAINTENANCE_SECONDS.
"""

from __future__ import annotations

import logging
import queue
import threading

from django.conf import settings
from django.db import close_old_connections, connections

from realtime.agent_tests.execution import test_run_execute, test_runs_drain, test_runs_resumable
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
            _pool_of_this_process().wake()
        else:
            _pool_of_this_process().publish(run_id)
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
    """Daemon threads that drain the runs when woken (a run left behind by an exit is resumed at the next
    start), and one that publishes Celery tasks (so a request never waits on the broker)."""

    def __init__(self, workers: int) -> None:
        self._changed = threading.Condition()
        self._wakes = 0  # how many times the drainers were woken: a thread that saw fewer drains again
        self._published: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._work, name=f"agent-tests-{index}", daemon=True)
            for index in range(max(1, workers))
        ]
        self._threads.append(threading.Thread(target=self._publish_all, name="agent-tests-publish", daemon=True))
        for thread in self._threads:
            thread.start()

    def wake(self) -> None:
        with self._changed:
            self._wakes += 1
            self._changed.notify_all()

    def publish(self, run_id: str) -> None:
        self._published.put(run_id)

    def _work(self) -> None:
        seen = 0
        while True:
            with self._changed:
                while self._wakes <= seen:
                    self._changed.wait()
                seen = self._wakes
            try:
                close_old_connections()
                test_runs_drain()
            except Exception:
                logger.exception("background test runs failed")
            finally:
                connections.close_all()  # this thread's connection only

    def _publish_all(self) -> None:
        while True:
            _publish(self._published.get())


def _publish(run_id: str) -> None:
    try:
        run_agent_tests.apply_async(args=[run_id], retry=False)
    except Exception as exc:  # noqa: BLE001 - an outage is expected; the sweep resumes the run
        logger.warning(
            "could not queue test run %s (%s: %s); the upkeep sweep will resume it", run_id, type(exc).__name__, exc
        )
