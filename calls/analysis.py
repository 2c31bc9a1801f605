"""The seam between the end of a call and its post-call analysis.

A call's analysis is marked `pending` inside the transaction that ends the call (calls.services._finish)
and queued once that transaction commits. The analysis itself runs code of the engine, a floor up
(realtime/analysis/), so this app does not import it: the realtime app registers its queue here when it
starts (realtime/apps.py), and calls only stores the result (calls.services.call_analysis_save). A
queue that is missing or fails leaves the analysis pending: the upkeep sweep resumes it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

_queue: Callable[[Any], None] | None = None


def register_queue(queue: Callable[[Any], None]) -> None:
    """Set the function that queues one call's analysis (given the call id; it must return at once)."""
    global _queue
    _queue = queue


def queue_analysis(call_id: Any) -> None:
    """Queue the analysis of an ended call (after the commit that marked it pending). Never raises."""
    if _queue is None:
        return
    try:
        _queue(call_id)
    except Exception as exc:  # noqa: BLE001 - never raises: the sweep resumes what was not queued
        # No traceback: a broker outage is expected here (the call ended fine; the analysis waits for the sweep).
        logger.warning(
            "could not queue the analysis of call %s (%s: %s); the upkeep sweep will resume it",
            call_id,
            type(exc).__name__,
            exc,
        )
