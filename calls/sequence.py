"""The order of the rows one process writes about its calls: transcript messages, tool invocations,
model usage and agent log lines all carry `sequence`, so rows written within one clock tick still sort
in the order they were written.

Its own module, below both calls/services.py and calls/logging.py, which both number their rows with it.
"""

from __future__ import annotations

import threading
import time

_sequence_lock = threading.Lock()
_last_sequence = 0


def next_sequence() -> int:
    """A strictly increasing number (nanosecond clock based) that orders rows written by this process."""
    global _last_sequence
    with _sequence_lock:
        _last_sequence = max(time.time_ns(), _last_sequence + 1)
        return _last_sequence
