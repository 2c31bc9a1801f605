"""Where analyses run. Never in the path that ends the call: calls.services._finish marks the analysis
pending and, once its transaction has committed, calls `analysis_queue` (registered in calls/analysis.py
by realtime/apps.py), which returns at once:

- with a broker (REDIS_URL): the Celery task `realtime.analyze_call` (realtime/tasks.py), run by a worker
  (published from a background thread); a broker that cannot be reached leaves the analysis pending;
- without one (the embedded default): a background thread pool of this process (CALL_ANALYSIS_WORKERS
  threads), running the same task through Celery's eager path;
- CALL_ANALYSIS_INLINE (tests): right away, in the caller's thread.

Durable: an analysis is pending in the database until stored, so one queued in a process that stopped
(a restart, a kill) or in a worker that died is resumed by `analysis_resume`, an upkeep job
(voiceagent/apps.py) run at every server start and every CALLS_MAINTENANCE_SECONDS (or by Celery beat's
calls.run_upkeep). The claim's lease (CALL_ANALYSIS_LEASE_SECONDS) keeps two workers off one analysis.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connections

from calls.selectors import calls_analysis_pending
from realtime.analysis.runner import analysis_run, lease
from realtime.analysis.tasks import analyze_call

logger = logging.getLogger(__name__)

_pool: _Pool | None = None
_pool_lock = threading.Lock()


def analysis_queue(call_id: Any) -> None:
    """Queue one call's analysis (returns at once, except CALL_ANALYSIS_INLINE)."""
    call_id = str(call_id)
    if settings.CALL_ANALYSIS_INLINE:
        analysis_run(call_id=call_id)
        return
    if settings.CALL_ANALYSIS_WORKER == "inprocess" or analyze_call.app.conf.task_always_eager:
        _pool_of_this_process().submit(_run, call_id)
        return
    # Published from the pool too: a broker slow to answer never holds the thread that ended the call.
    _pool_of_this_process().submit(_publish, call_id)


def analysis_resume() -> int:
    """Queue every pending analysis no live worker holds (the upkeep job); returns how many."""
    pending = calls_analysis_pending(lease=lease())
    for call_id in pending:
        try:
            analysis_queue(call_id)
        except Exception as exc:  # noqa: BLE001 - one failure does not stop the others
            logger.warning("could not queue the analysis of call %s (%s: %s)", call_id, type(exc).__name__, exc)
    return len(pending)


def _pool_of_this_process() -> _Pool:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = _Pool(settings.CALL_ANALYSIS_WORKERS)
        return _pool


class _Pool:
    """Daemon threads taking work from one queue. Daemon threads, unlike a ThreadPoolExecutor's, do not hold
    up the process's exit until every queued analysis ran: a queued analysis is pending in the database, and
    the next start-up sweep resumes it (one that was running is taken again once its lease is over)."""

    def __init__(self, workers: int) -> None:
        self._queue: queue.SimpleQueue[tuple[Callable[[str], None], str]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._waiting: set[tuple[Callable[[str], None], str]] = set()
        for index in range(workers):
            threading.Thread(target=self._work, name=f"analysis-{index}", daemon=True).start()

    def submit(self, function: Callable[[str], None], call_id: str) -> None:
        with self._lock:  # a call already waiting here is not queued twice (the sweep finds it pending too)
            if (function, call_id) in self._waiting:
                return
            self._waiting.add((function, call_id))
        self._queue.put((function, call_id))

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            with self._lock:
                self._waiting.discard(item)
            function, call_id = item
            try:
                function(call_id)
            except Exception:
                logger.exception("background analysis work for call %s failed", call_id)


def _publish(call_id: str) -> None:
    try:
        # No retries against an unreachable broker: the analysis stays pending and the sweep resumes it.
        analyze_call.apply_async(args=[call_id], retry=False)
    except Exception as exc:  # noqa: BLE001 - logged in one line (an outage is expected); the sweep resumes it
        logger.warning(
            "could not queue the analysis of call %s (%s: %s); the upkeep sweep will resume it",
            call_id,
            type(exc).__name__,
            exc,
        )


def _run(call_id: str) -> None:
    try:
        close_old_connections()
        # Through Celery's eager path: the same task, signals and log lines as with a worker.
        analyze_call.apply(args=[call_id], throw=True)
    except Exception:
        logger.exception("background analysis of call %s failed", call_id)
    finally:
        connections.close_all()  # this thread's connection only
