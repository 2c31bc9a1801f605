"""Upkeep of what a crashed or restarted process leaves half-done: stale `active` calls, knowledge
documents stuck in `processing`, spent session tokens past their expiry, and agent logs past retention.

Every serving process starts it with itself (voiceagent/asgi.py calls `start_upkeep`, as Daphne imports
the application; Daphne's ASGI lifespan support is not relied on): one sweep at start-up, so a restart
after a crash cleans up without waiting for a new call, then, with BACKGROUND_WORK=inprocess, one every
CALLS_MAINTENANCE_SECONDS (0: no timer), a loop of kit/background.py; with BACKGROUND_WORK=celery Celery
beat runs `calls.run_upkeep` from CELERY_BEAT_SCHEDULE instead. `manage.py calls_maintenance` runs one
sweep, e.g. from cron (BACKGROUND_WORK=off).

One bad row never stops the upkeep of the others: a job that goes through rows handles each in its own
transaction (`rows_one_by_one`), and a row that fails (text stored before the edge refused what cannot be
stored, a constraint) is logged in one line with its id and left for the next sweep, while the job goes on
with the rows of every other organization; a job that fails as a whole is logged and the sweep goes on
with the next job.

Several processes may sweep at once: every job is a conditional write that a second sweep repeats
harmlessly (a call is closed under a row lock only while still `active`, a document is failed only while
still `processing`). The jobs are registered by the project shell (voiceagent/apps.py), as they belong
to several apps. A call live on another process is never closed: staleness is judged by the call's
last recorded activity (CALLS_STALE_AFTER_SECONDS, at least 60), not by which process owns it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from django.conf import settings
from django.db import transaction

from kit import background
from kit.text import storable

logger = logging.getLogger(__name__)

_jobs: dict[str, Callable[[], int]] = {}

Row = TypeVar("Row")


def register_job(name: str, job: Callable[[], int]) -> None:
    """Add an upkeep job (it returns how many rows it fixed, reported under `name`). The jobs belong to
    several apps, some above this one (knowledge, realtime): the project shell registers them all once
    (voiceagent/apps.py), so this module, which calls.services starts, imports none of them."""
    _jobs[name] = job


def run_maintenance(*, strict: bool = False) -> dict[str, int]:
    """One sweep of every registered job, in the order registered; a failing job is logged and does not
    stop the others (`strict`: the first failure is raised after the others ran, for `manage.py
    calls_maintenance`)."""
    done: dict[str, int] = {}
    failure: Exception | None = None
    for name, job in list(_jobs.items()):
        try:
            done[name] = job()
        except Exception as exc:
            logger.warning("upkeep job %s failed", name, exc_info=not strict)
            done[name] = 0
            failure = failure or exc
    if strict and failure is not None:
        raise failure
    return done


def rows_one_by_one(
    job: str, rows: Iterable[Row], handle: Callable[[Row], Any], *, row_id: Callable[[Row], Any] = str
) -> int:
    """Run `handle` on each of `rows` (ids, or tuples `row_id` names) in a transaction of its own: a row
    that raises is rolled back, logged in one ERROR line naming `job` and the row, and skipped, so the
    others (another organization's) are still handled. Returns how many calls of `handle` returned a
    true value."""
    done = 0
    for row in rows:
        try:
            with transaction.atomic():
                done += bool(handle(row))
        except Exception as exc:  # noqa: BLE001 - one bad row must not stop the others; logged below
            reason = storable(" ".join(str(exc).split()))[:300]
            logger.error(
                "upkeep job %s: row %s failed, left for the next sweep: %s: %s",
                job,
                row_id(row),
                type(exc).__name__,
                reason,
            )
    return done


def start_upkeep() -> None:
    """At process start-up: sweep once now (in the background, so start-up does not wait on the
    database; CALLS_MAINTENANCE_AT_START, where BACKGROUND_WORK is inprocess or celery), then every
    CALLS_MAINTENANCE_SECONDS where it is inprocess. Never raises."""
    try:
        sweep_first = bool(settings.CALLS_MAINTENANCE_AT_START) and background.mode() in ("inprocess", "celery")
        if _loop.start(first=sweep_first):
            return
        if sweep_first:
            background.in_thread("upkeep", _sweep)
    except Exception:
        logger.warning("could not start the upkeep timer", exc_info=True)


def ensure_inprocess_maintenance() -> None:
    """Start the periodic timer once per process when it runs here (never raises). Processes that did not
    start through voiceagent/asgi.py (e.g. `runserver` on WSGI) get it with their first call."""
    _loop.start(first=False)


def _sweep() -> None:
    done = run_maintenance()
    if any(done.values()):
        logger.info("upkeep: %s", ", ".join(f"{name} {count}" for name, count in done.items()))


# The sweep of BACKGROUND_WORK=inprocess (with celery, beat runs calls.run_upkeep).
_loop = background.Loop(
    "upkeep",
    _sweep,
    every=lambda: float(settings.CALLS_MAINTENANCE_SECONDS),
    feature="upkeep",
    first=False,
    failure="upkeep sweep failed",
)
