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
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connections

from calls.selectors import calls_analysis_pending
from realtime.analysis.runner import analysis_run, lease
from realtime.analysis.tasks import analyze_call

logger = logging.getLogger(__name__)

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def analysis_queue(call_id: Any) -> None:
    """Queue one call's analysis (returns at once, except CALL_ANALYSIS_INLINE)."""
    call_id = str(call_id)
    if settings.CALL_ANALYSIS_INLINE:
        analysis_run(call_id=call_id)
        return
    if analyze_call.app.conf.task_always_eager:
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


def _pool_of_this_process() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=settings.CALL_ANALYSIS_WORKERS, thread_name_prefix="analysis")
        return _pool


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
