"""What this process is working on, proven alive by a heartbeat in the database.

A live call or a document being ingested lives in one process. When that process is killed (SIGKILL,
an out-of-memory kill, a lost machine) nothing of it runs any more, so the row cannot say it was left
behind: the process must keep saying it is NOT. Every LIVENESS_HEARTBEAT_SECONDS one thread per process
writes the time into the heartbeat column of every row it holds (one UPDATE per kind of row). A row
whose heartbeat is older than LIVENESS_EXPIRY_SECONDS belongs to a dead process, and the upkeep sweep
(calls/maintenance.py) closes it: several processes share one database, and none of them ever closes
what another live process holds.

`hold(model, pk)` when the work starts in this process and `release(model, pk)` when it ends (a release
in a process that does not hold the row does nothing). The model's heartbeat column is `heartbeat_at`.
The heartbeat is this process's own loop (kit/background.py): it runs whatever BACKGROUND_WORK says,
except `inline` (the test suite's in-process runs); there, or with LIVENESS_HEARTBEAT_SECONDS=0, it is off,
rows keep `heartbeat_at` empty and only the slower rules of the sweep apply to them.

A kit module: it imports no domain app (models are passed in).
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Model
from django.utils import timezone

from kit import background

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_held: dict[type[Model], set[Any]] = defaultdict(set)


def enabled() -> bool:
    return _loop.enabled()


def first_beat() -> datetime | None:
    """The heartbeat a row gets when its work starts here: now, or None with the heartbeat off."""
    return timezone.now() if enabled() else None


def hold(model: type[Model], pk: Any) -> None:
    if not enabled():
        return
    with _lock:
        _held[model].add(pk)
    _loop.start()


def release(model: type[Model], pk: Any) -> None:
    with _lock:
        _held[model].discard(pk)


def beat() -> int:
    """Write the heartbeat of every row this process holds; returns how many rows were written."""
    with _lock:
        held = {model: list(pks) for model, pks in _held.items() if pks}
    now = timezone.now()
    written = 0
    for model, pks in held.items():
        for start in range(0, len(pks), 500):
            written += model._default_manager.filter(pk__in=pks[start : start + 500]).update(heartbeat_at=now)
    return written


# A database blip is logged and the next beat comes well within the expiry (at least two beats).
_loop = background.Loop(
    "liveness",
    beat,
    every=lambda: float(settings.LIVENESS_HEARTBEAT_SECONDS),
    own=True,
    first=False,
    failure="liveness heartbeat failed",
)
