"""Celery tasks of the calls app, scheduled by CELERY_BEAT_SCHEDULE (see calls.maintenance)."""

from __future__ import annotations

from celery import shared_task

from calls.maintenance import run_maintenance
from calls.services import agent_log_purge, call_close_stale, recording_purge
from calls.webhooks import events


@shared_task(name="calls.run_upkeep")
def run_upkeep() -> dict[str, int]:
    """Every upkeep job once (stale calls, stuck documents, spent session tokens, old agent logs): the
    same sweep the serving processes run at start-up and on their timer."""
    return run_maintenance()


@shared_task(name="calls.close_stale_calls")
def close_stale_calls() -> int:
    return call_close_stale()


@shared_task(name="calls.purge_agent_logs")
def purge_agent_logs() -> int:
    return agent_log_purge()


@shared_task(name="calls.deliver_event")
def deliver_event(delivery_id: str) -> bool:
    """One attempt of a new or redelivered call event (BACKGROUND_WORK=celery); False when not due or taken."""
    return events.deliver_one(delivery_id)


@shared_task(name="calls.deliver_due_events")
def deliver_due_events() -> int:
    """Every due attempt (the retries, and what could not be queued): Celery beat runs it every 10 s."""
    return events.deliver_due()


@shared_task(name="calls.purge_recordings")
def purge_recordings() -> int:
    """Recordings past RECORDING_RETENTION_DAYS (also part of the upkeep sweep)."""
    return recording_purge()
