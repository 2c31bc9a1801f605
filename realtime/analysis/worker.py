"""Where analyses run. Never in the path that ends the call: calls.services._finish marks the analysis
pending and, once its transaction has committed, calls `analysis_queue` (registered in calls/analysis.py
by realtime/apps.py), which returns at once. Where is BACKGROUND_WORK's (kit/background.py):

- `celery` with a broker (REDIS_URL): the Celery task `realtime.analyze_call` (realtime/tasks.py), run by a
  worker (published from a background thread); a broker that cannot be reached leaves the analysis pending;
- `inprocess` (the embedded default): a background pool of this process (CALL_ANALYSIS_WORKERS daemon
  threads), running the same task through Celery's eager path;
- `inline` (tests): right away, in the caller's thread.

Durable: an analysis is pending in the database until stored, so one queued in a process that stopped
(a restart, a kill) or in a worker that died is resumed by `analysis_resume`, an upkeep job
(voiceagent/apps.py) run at every server start and every CALLS_MAINTENANCE_SECONDS (or by Celery beat's
calls.run_upkeep). The claim's lease (CALL_ANALYSIS_LEASE_SECONDS) keeps two workers off one analysis.
The pool's threads never hold up the process's exit: a queued analysis is pending in the database, and
the next start-up sweep resumes it (one that was running is taken again once its lease is over).
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings

from calls.selectors import calls_analysis_pending
from kit import background
from realtime.analysis.runner import analysis_run, lease
from realtime.analysis.tasks import analyze_call

logger = logging.getLogger(__name__)

TASK = "realtime.analyze_call"

_pool = background.Pool("analysis", lambda: int(settings.CALL_ANALYSIS_WORKERS))


def analysis_queue(call_id: Any) -> None:
    """Queue one call's analysis (returns at once, except BACKGROUND_WORK=inline). A call already waiting
    on this process's pool is not queued twice (the sweep finds it pending too)."""
    call_id = str(call_id)
    background.submit(
        TASK,
        _run,
        call_id,
        pool=_pool,
        feature="analysis",
        key=call_id,
        inline=lambda call_id: analysis_run(call_id=call_id),
        # Published from a thread of this process: a broker slow to answer never holds the thread that
        # ended the call; no retries against an unreachable broker (the sweep resumes the analysis).
        publish_in_background=True,
        retry=False,
    )


def analysis_resume() -> int:
    """Queue every pending analysis no live worker holds (the upkeep job); returns how many."""
    pending = calls_analysis_pending(lease=lease())
    for call_id in pending:
        try:
            analysis_queue(call_id)
        except Exception as exc:  # noqa: BLE001 - one failure does not stop the others
            logger.warning("could not queue the analysis of call %s (%s: %s)", call_id, type(exc).__name__, exc)
    return len(pending)


def _run(call_id: str) -> None:
    try:
        # Through Celery's eager path: the same task, signals and log lines as with a worker.
        analyze_call.apply(args=[call_id], throw=True)
    except Exception:
        logger.exception("background analysis of call %s failed", call_id)
