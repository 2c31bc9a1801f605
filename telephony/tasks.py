"""Celery tasks of the telephony app (OUTBOUND_WORKER=celery; Celery's autodiscovery imports this module)."""

from __future__ import annotations

from celery import shared_task

from telephony.outbound import outbound_dispatch


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
