"""Periodic upkeep of call history and logs: close stale active calls, purge old agent logs.

With a broker (REDIS_URL) Celery beat runs the tasks of calls.tasks (CELERY_BEAT_SCHEDULE). The
embedded default has no beat process, so the first call started in a process also starts a daemon
timer thread that runs the same jobs every CALLS_MAINTENANCE_SECONDS (0 turns it off; default 300
without REDIS_URL, 0 with it). `manage.py calls_maintenance` runs them once, e.g. from cron.
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db import close_old_connections, connections

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_thread: threading.Thread | None = None


def run_maintenance() -> dict[str, int]:
    from calls.services import agent_log_purge, call_close_stale

    return {"closedCalls": call_close_stale(), "purgedLogs": agent_log_purge()}


def ensure_inprocess_maintenance() -> None:
    """Start the in-process timer once per process when it is configured (never raises)."""
    global _thread
    try:
        if float(settings.CALLS_MAINTENANCE_SECONDS) <= 0 or (_thread is not None and _thread.is_alive()):
            return
        with _lock:
            if _thread is None or not _thread.is_alive():
                _thread = threading.Thread(target=_loop, name="calls-maintenance", daemon=True)
                _thread.start()
    except Exception:
        logger.warning("could not start the calls maintenance timer", exc_info=True)


def _loop() -> None:
    stop = threading.Event()
    while True:
        interval = float(settings.CALLS_MAINTENANCE_SECONDS)
        if interval <= 0:
            return
        stop.wait(interval)
        try:
            close_old_connections()
            run_maintenance()
        except Exception:
            logger.warning("calls maintenance failed", exc_info=True)
        finally:
            connections.close_all()  # this thread's connections only
