"""Celery tasks of the telephony app, scheduled by CELERY_BEAT_SCHEDULE."""

from __future__ import annotations

from celery import shared_task

from telephony.batches import batch_tick


@shared_task(name="telephony.batch_tick")
def run_batch_tick() -> int:
    """Place the calls of call batches that are due (BATCH_SCHEDULER=celery: beat runs it every
    BATCH_TICK_SECONDS). Several at once place no recipient twice."""
    return batch_tick()
