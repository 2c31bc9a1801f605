"""Waiting for something to happen, bounded, instead of sleeping on the wall clock.

- `Signal`: a test double says "something happened" (`notify()`, from any thread: a request was recorded);
  a test awaits the state it wants (`await signal.until(check, what=...)`, or `until_sync` from a thread
  without a loop). Every scripted server has one (`ScriptedServer.arrived`).
- `polled` / `polled_sync`: state that another process writes (a database row a Daphne or Celery process
  commits, a log file) sends no signal into the test: it is read again every `every` seconds.

Every wait has a bound: past `timeout` it fails the test with an AssertionError naming `what` it waited for
(and, for a check that returns something, what it saw last). None hangs.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

POLL_SECONDS = 0.05


class Signal:
    """Wakes every waiter each time `notify()` is called (from any thread, any loop)."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._count = 0
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    def notify(self) -> None:
        with self._condition:
            self._count += 1
            waiters, self._waiters = self._waiters, []
            self._condition.notify_all()
        for loop, event in waiters:
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits any more
                loop.call_soon_threadsafe(event.set)

    async def until(self, check: Callable[[], T], *, what: str, timeout: float = 30) -> T:
        """The first truthy `check()`, checked now and after each notify; AssertionError past `timeout`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            event = asyncio.Event()
            with self._condition:
                self._waiters.append((loop, event))
            result = check()
            if result:
                return result
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(f"timed out after {timeout:g} s waiting for {what} (last: {result!r})")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), remaining)

    def until_sync(self, check: Callable[[], T], *, what: str, timeout: float = 30) -> T:
        """`until` for a thread without a running loop (a blocking test)."""
        deadline = time.monotonic() + timeout
        with self._condition:
            while True:
                result = check()
                if result:
                    return result
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"timed out after {timeout:g} s waiting for {what} (last: {result!r})")
                self._condition.wait(remaining)


async def polled(
    check: Callable[[], T | Awaitable[T | None] | None], *, what: str, timeout: float = 30, every: float = POLL_SECONDS
) -> T:
    """The first truthy `check()` (a function or a coroutine function), read every `every` seconds: for
    state another process writes. AssertionError past `timeout`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what} (last: {result!r})")
        await asyncio.sleep(every)


def polled_sync(check: Callable[[], T | None], *, what: str, timeout: float = 30, every: float = POLL_SECONDS) -> T:
    """`polled` for a blocking test."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what} (last: {result!r})")
        time.sleep(every)


__all__ = ["POLL_SECONDS", "Signal", "polled", "polled_sync"]
