"""Celery tasks of the telephony app (Celery's autodiscovery imports this module; CELERY_BEAT_SCHEDULE runs them)."""

from __future__ import annotations

from celery import shared_task

from telephony.campaigns.services import batch_tick
from telephony.outbound.dispatcher import outbound_dispatch


@shared_task(name="telephony.batch_tick")
def run_batch_tick() -> int:
    """Place the calls of call batches that are due (BACKGROUND_WORK=celery: beat runs it every
    BATCH_TICK_SECONDS). Several at once place no recipient twice."""
    return batch_tick()


@shared_task(name="telephony.dispatch_outbound")
def dispatch_outbound() -> int:
    """Place the queued outbound calls there is room for (sent on every queued call's commit and every
    ended call; Celery beat runs it every 5 s). Two workers running it at once place no call twice."""
    placed = 0
    while True:
        done = outbound_dispatch()
        placed += done
        if not done:
            return placed
