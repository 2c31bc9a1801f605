"""Logging filters (configured in settings.LOGGING; this module imports no app, as logging is set up
before the apps are)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any


class UnauthorizedLogThrottle(logging.Filter):
    """At most one `django.request` line per client address per interval for 401 answers.

    Each refused API key used to write a WARNING line, so an unauthenticated flood grew the log by one
    line per request. The line that passes carries the count of 401s from that address left out since
    the previous one. Past `max_addresses` addresses in one interval, the others share one line (a
    flood from many addresses stays bounded too). Other records pass untouched.
    """

    OTHERS = "other addresses"

    def __init__(self, interval_seconds: float = 60.0, max_addresses: int = 50) -> None:
        super().__init__()
        self.interval = float(interval_seconds)
        self.max_addresses = int(max_addresses)
        self._lock = threading.Lock()
        # address -> [time of its last logged line, 401s left out since]
        self._seen: dict[str, list[float]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) != 401:
            return True
        address = _client_address(getattr(record, "request", None))
        now = time.monotonic()
        with self._lock:
            self._forget_before(now - self.interval)
            key = address
            if key not in self._seen and len(self._seen) >= self.max_addresses:
                key = self.OTHERS
            entry = self._seen.get(key)
            if entry is not None and now - entry[0] < self.interval:
                entry[1] += 1
                return False
            left_out = int(entry[1]) if entry else 0
            self._seen[key] = [now, 0]
        record.msg = f"{record.msg} from %s"
        record.args = (*_as_tuple(record.args), address if key != self.OTHERS else f"{address} (and {self.OTHERS})")
        if left_out:
            record.msg += " (%d more 401s from there not logged since the previous line)"
            record.args = (*record.args, left_out)
        return True

    def _forget_before(self, cutoff: float) -> None:
        # Entries whose window has passed are dropped when the table is full; one still holding a count
        # to report is kept for ten intervals (its address usually comes back and gets the count).
        if len(self._seen) < self.max_addresses:
            return
        long_ago = cutoff - 9 * self.interval
        for key in [k for k, (t, left_out) in self._seen.items() if t < long_ago or (t < cutoff and not left_out)]:
            del self._seen[key]


def _as_tuple(args: Any) -> tuple[Any, ...]:
    if args is None:
        return ()
    return args if isinstance(args, tuple) else (args,)


def _client_address(request: Any) -> str:
    if request is None:
        return "unknown"
    from kit.client_address import client_address  # reads settings: not while logging is configured

    return client_address(request)
