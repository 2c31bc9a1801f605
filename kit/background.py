"""Background work, one way: singleton loops and queued jobs, placed by one setting (BACKGROUND_WORK).

BACKGROUND_WORK says where the background work of this process runs (docs/operations/upkeep.md):

- `inprocess` (the default without a broker): threads of each serving process. The loops of shared work
  (the upkeep sweep, event delivery, the batch scheduler, the outbound dispatcher) run here, and queued
  jobs (knowledge ingestion, post-call analyses, agent test runs) run on a bounded pool of this process.
- `celery` (the default with REDIS_URL): Celery workers and beat. No loop of shared work runs here (beat
  runs their tasks, CELERY_BEAT_SCHEDULE); a queued job that is a registered Celery task is sent to the
  broker (one that is not, or any job while the Celery app runs tasks eagerly, runs on the pool here).
- `inline` (the test suite): queued jobs run in the caller's thread, and no loop starts, not even this
  process's own (the heartbeat, the agent-log writer): tests call what they need.
- `off`: this process runs no loop of shared work (another process or a cron job does); its queued jobs
  go to Celery when a broker is configured, to this process's pool otherwise (nobody else could take them).

Whatever the mode (except `inline`), the loops that belong to this process itself run here: the liveness
heartbeat of the rows it holds (kit/liveness.py) and the writer of its buffered agent logs.

The per-feature switches of earlier releases (OUTBOUND_WORKER, EVENTS_WORKER, BATCH_SCHEDULER,
TEST_RUNS_WORKER, CALL_ANALYSIS_WORKER, KNOWLEDGE_INGEST_INLINE, TEST_RUNS_INLINE, CALL_ANALYSIS_INLINE) are
still read for one release: when one is set it decides for its feature, and `warn_deprecated` logs a warning
at start-up.

`Loop`: one named daemon thread per process that calls `tick()` every N seconds (sooner when the tick asks,
or when `wake()` is called), logs a tick that raises and goes on, stops with the process (or `stop()` in
tests), and never starts while its interval is 0. `submit`: one queued job, run inline, on a `Pool` of this
process, or as a Celery task, as the mode says. `fan_out`: a tick's work spread over a few threads.

A kit module: it imports no domain app (features name themselves with a string).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from django.conf import settings
from django.db import close_old_connections, connections

logger = logging.getLogger(__name__)

MODES = ("inprocess", "celery", "inline", "off")

# feature -> (its old worker switch, its old inline switch): read while set, for one release.
DEPRECATED: dict[str, tuple[str | None, str | None]] = {
    "outbound": ("OUTBOUND_WORKER", None),
    "events": ("EVENTS_WORKER", None),
    "batches": ("BATCH_SCHEDULER", None),
    "test_runs": ("TEST_RUNS_WORKER", "TEST_RUNS_INLINE"),
    "analysis": ("CALL_ANALYSIS_WORKER", "CALL_ANALYSIS_INLINE"),
    "knowledge": (None, "KNOWLEDGE_INGEST_INLINE"),
}

T = TypeVar("T")
R = TypeVar("R")


# --- where --------------------------------------------------------------------------------------------


def default_mode() -> str:
    """BACKGROUND_WORK's default: `celery` with a broker (REDIS_URL, tasks not eager), `inprocess` otherwise."""
    return "celery" if settings.REDIS_URL and not settings.CELERY_TASK_ALWAYS_EAGER else "inprocess"


def mode(feature: str | None = None) -> str:
    """Where the background work of `feature` runs in this process: BACKGROUND_WORK, unless the feature's
    deprecated switch is set (an inline switch set to false means "queued, as in production")."""
    base = str(settings.BACKGROUND_WORK)
    worker_name, inline_name = DEPRECATED.get(feature or "", (None, None))
    inline = getattr(settings, inline_name, None) if inline_name else None
    if inline:
        return "inline"
    worker = getattr(settings, worker_name, None) if worker_name else None
    if worker:
        return str(worker)
    if inline is False and base == "inline":
        return default_mode()
    return base


def deprecated_in_use() -> list[str]:
    """The deprecated per-feature switches this process's settings set."""
    names = [name for pair in DEPRECATED.values() for name in pair if name]
    return [name for name in names if getattr(settings, name, None) not in (None, "")]


def warn_deprecated() -> None:
    """At start-up: one warning per deprecated switch that is set (they go in the next release)."""
    for name in deprecated_in_use():
        logger.warning(
            "%s is deprecated and will be removed in the next release: set BACKGROUND_WORK "
            "(inprocess, celery, inline or off) instead (docs/configuration.md)",
            name,
        )


def celery_broker() -> bool:
    """Whether Celery sends tasks to a broker (False when its app runs them eagerly, in this process)."""
    from celery import current_app

    return not current_app.conf.task_always_eager


def send_task(name: str, *args: Any, retry: bool = True) -> None:
    """Send the Celery task `name` to the broker (raises when the broker cannot be reached)."""
    from celery import current_app

    current_app.send_task(name, args=list(args), retry=retry)


_task_modules_imported = False


def _registered(name: str) -> bool:
    """Whether `name` is a Celery task of this project. The apps' tasks modules are imported first, once
    per process (Celery's autodiscovery otherwise waits for a worker's start): a process that has not
    imported a feature's tasks module would run that feature's jobs on its own pool. Only the imports:
    not the worker's start-up (which also runs Django's system checks)."""
    global _task_modules_imported
    from celery import current_app

    if name not in current_app.tasks and not _task_modules_imported:
        current_app.autodiscover_tasks(force=True)
        _task_modules_imported = True
    return name in current_app.tasks


# --- loops --------------------------------------------------------------------------------------------


class Loop:
    """A singleton loop: one daemon thread of this process named `name` that calls `tick()`, then waits
    `every()` seconds (or less: with `paced`, the tick returns how soon it wants the next one, or None;
    never below `floor`; `wake()` ends the wait at once) and goes on until the process stops.

    `feature`: the loop is shared work (any one process may do it), started only where that feature's
    mode is `inprocess`; `own=True`: the loop belongs to this process (its heartbeat, its log buffer) and
    starts in every mode but `inline`. Either way it never starts while `every()` is 0, and it ends once
    that is no longer so. `first`: tick at once when started (else wait first). A tick that raises is
    logged (`failure`) and the loop goes on. Each tick runs on a fresh database connection, closed after
    it (`keep_connection`: kept until the thread ends)."""

    def __init__(
        self,
        name: str,
        tick: Callable[[], Any],
        *,
        every: Callable[[], float],
        feature: str | None = None,
        own: bool = False,
        first: bool = True,
        floor: float = 0.05,
        paced: bool = False,
        failure: str | None = None,
        keep_connection: bool = False,
    ) -> None:
        if (feature is None) == (not own):
            raise ValueError("a loop is either a feature's shared work or this process's own")
        self.name = name
        self._tick = tick
        self._every = every
        self._feature = feature
        self._own = own
        self._first = first
        self._floor = floor
        self._paced = paced
        self._failure = failure or f"{name}: a tick failed"
        self._keep_connection = keep_connection
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def interval(self) -> float:
        return float(self._every())

    def enabled(self) -> bool:
        """Whether the loop may run in this process now (its mode, and an interval above 0)."""
        where = mode(self._feature)
        if self._own:
            if where == "inline":
                return False
        elif where != "inprocess":
            return False
        return self.interval() > 0

    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def start(self, *, first: bool | None = None) -> bool:
        """Start the loop once in this process (later calls do nothing); whether it runs. Never raises."""
        if self.running():
            return True
        try:
            if not self.enabled():
                return False
            with self._lock:
                if not self.running():
                    self._stopping.clear()
                    self._thread = threading.Thread(
                        target=self._run, args=(self._first if first is None else first,), name=self.name, daemon=True
                    )
                    self._thread.start()
            return True
        except Exception:
            logger.warning("could not start the %s loop", self.name, exc_info=True)
            return False

    def wake(self) -> None:
        """Tick now rather than at the end of the wait (no-op when the loop does not run here)."""
        self._wake.set()

    def stop(self, timeout: float = 30.0) -> None:
        """End the loop (no further tick) and wait for its thread: for tests and process shutdown."""
        thread = self._thread
        if thread is None:
            return
        self._stopping.set()
        self._wake.set()
        if thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self, first: bool) -> None:
        try:
            wait = None if first else self.interval()
            while True:
                if wait is not None:
                    self._wake.wait(wait)
                if self._stopping.is_set() or not self.enabled():
                    return
                self._wake.clear()
                sooner = self._tick_once()
                every = self.interval()
                wait = max(every if not (self._paced and sooner is not None) else min(every, sooner), self._floor)
        finally:
            connections.close_all()  # this thread's connections only

    def _tick_once(self) -> Any:
        try:
            close_old_connections()
            return self._tick()
        except Exception:
            logger.warning(self._failure, exc_info=True)
            return None
        finally:
            if not self._keep_connection:
                connections.close_all()  # this thread's connections only


def in_thread(name: str, function: Callable[[], Any]) -> threading.Thread:
    """Run `function` once in a named daemon thread (e.g. a sweep at start-up), logging what it raises."""

    def run() -> None:
        try:
            close_old_connections()
            function()
        except Exception:
            logger.warning("%s failed", name, exc_info=True)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


def fan_out(function: Callable[[T], R], items: Iterable[T], *, threads: int, name: str) -> list[R]:
    """`function` over `items` on up to `threads` threads (in this thread when one is enough), in order.
    Each thread's database connection is closed when its item is done; what `function` raises is raised."""
    items = list(items)
    if threads <= 1 or len(items) <= 1:
        return [function(item) for item in items]

    def one(item: T) -> R:
        try:
            return function(item)
        finally:
            connections.close_all()  # this pool thread's connection

    with ThreadPoolExecutor(min(threads, len(items)), thread_name_prefix=name) as pool:
        return list(pool.map(one, items))


# --- queued jobs --------------------------------------------------------------------------------------


class Pool:
    """A bounded pool of this process: `workers()` threads (started with the first job) taking jobs from
    one queue. A job submitted with a `key` that is already waiting is not queued twice. Each job runs on
    a fresh database connection, closed after it; what it raises is logged.

    `daemon=True`: the threads never hold up the process's exit (what is queued is durable and resumed by
    the upkeep sweep). `daemon=False`: at exit the running jobs finish, the waiting ones are dropped (as
    with a ThreadPoolExecutor), and a job submitted after that raises RuntimeError."""

    def __init__(self, name: str, workers: Callable[[], int], *, daemon: bool = True) -> None:
        self.name = name
        self._workers = workers
        self._daemon = daemon
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...], Hashable | None] | None] = (
            queue.SimpleQueue()
        )
        self._waiting: set[Hashable] = set()
        self._threads: list[threading.Thread] = []
        self._shut = False

    def submit(self, function: Callable[..., Any], *args: Any, key: Hashable | None = None) -> bool:
        """Queue one job; False when a job with the same key is already waiting."""
        with self._lock:
            if self._shut:
                raise RuntimeError(f"the {self.name} pool is shut down (the process is stopping)")
            if key is not None:
                if key in self._waiting:
                    return False
                self._waiting.add(key)
            if not self._threads:
                self._start()
        self._queue.put((function, args, key))
        return True

    def shutdown(self) -> None:
        """No more jobs: each thread ends once its running job is done."""
        with self._lock:
            self._shut = True
            count = len(self._threads)
        for _ in range(count):
            self._queue.put(None)

    def _start(self) -> None:
        for index in range(max(1, int(self._workers()))):
            thread = threading.Thread(target=self._work, name=f"{self.name}-{index}", daemon=self._daemon)
            self._threads.append(thread)
            thread.start()
        if not self._daemon:
            # As concurrent.futures does: before the interpreter joins its non-daemon threads.
            threading._register_atexit(self.shutdown)  # type: ignore[attr-defined]

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None or self._shut:
                return
            function, args, key = item
            if key is not None:
                with self._lock:
                    self._waiting.discard(key)
            try:
                close_old_connections()
                function(*args)
            except Exception:
                logger.exception("%s: a background job failed", self.name)
            finally:
                connections.close_all()  # this thread's connections only


_publisher = Pool("celery-publish", lambda: 1)


def submit(
    name: str,
    function: Callable[..., Any],
    *args: Any,
    pool: Pool,
    feature: str | None = None,
    key: Hashable | None = None,
    inline: Callable[..., Any] | None = None,
    publish_in_background: bool = False,
    retry: bool = True,
) -> str:
    """Run one job where the feature's mode says; returns where: "inline", "celery" or "pool".

    - `inline`: now, in the caller's thread (`inline` instead of `function` when given); what it raises
      is raised (call it after the commit when the job must see it);
    - `celery` or `off`, with a broker, when `name` is a registered Celery task: the task is sent with
      `args` (from the caller's thread, raising when the broker cannot be reached; or, with
      `publish_in_background`, from a thread of this process, logging a failure: the caller never waits
      on the broker);
    - otherwise: `function(*args)` on `pool` (not queued twice while a job of the same `key` waits)."""
    where = mode(feature)
    if where == "inline":
        (inline or function)(*args)
        return "inline"
    if where in ("celery", "off") and celery_broker() and _registered(name):
        if publish_in_background:
            _publisher.submit(_publish, name, args, retry, key=("publish", name, args))
        else:
            send_task(name, *args, retry=retry)
        return "celery"
    pool.submit(function, *args, key=key)
    return "pool"


def _publish(name: str, args: tuple[Any, ...], retry: bool) -> None:
    try:
        send_task(name, *args, retry=retry)
    except Exception as exc:  # noqa: BLE001 - an outage is expected: the work is durable, the sweep resumes it
        logger.warning(
            "could not send %s%s (%s: %s); the upkeep sweep will resume it", name, list(args), type(exc).__name__, exc
        )
