"""Time for the pacing stage: the event loop's monotonic clock in production, a hand-driven clock in
tests (pipeline tests advance time explicitly instead of sleeping)."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from typing import Any, Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds, monotonic."""

    async def sleep_until(self, deadline: float, wake: asyncio.Event | None = None) -> None:
        """Return at `deadline`, or earlier when `wake` is set (the caller clears it)."""


class LoopClock:
    def now(self) -> float:
        return asyncio.get_running_loop().time()

    async def sleep_until(self, deadline: float, wake: asyncio.Event | None = None) -> None:
        delay = deadline - self.now()
        if wake is None:
            await asyncio.sleep(max(0.0, delay))
            return
        if wake.is_set() or delay <= 0:
            await asyncio.sleep(0)
            return
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for returns normally when the task is
        # cancelled in the same loop turn as `wake` is set, so a stage cancelled by stop() would go on
        # forever (seen: a call left `active` after the caller hung up during the greeting).
        try:
            async with asyncio.timeout(delay if delay != float("inf") else None):
                await wake.wait()
        except TimeoutError:
            pass


class ManualClock:
    """A clock that moves only when `advance` is called; sleepers wake in deadline order."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._counter = itertools.count()

    def now(self) -> float:
        return self._now

    async def sleep_until(self, deadline: float, wake: asyncio.Event | None = None) -> None:
        if deadline <= self._now or (wake is not None and wake.is_set()):
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (deadline, next(self._counter), future))
        if wake is None:
            await future
            return
        waiter = asyncio.ensure_future(wake.wait())
        either: set[asyncio.Future[Any]] = {future, waiter}
        try:
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            if not future.done():
                future.cancel()

    async def advance(self, seconds: float, *, step: float = 0.005) -> None:
        """Move time forward in small steps, letting every woken task run at each step."""
        end = self._now + seconds
        while self._now < end - 1e-9:
            self._now = min(end, self._now + step)
            while self._sleepers and self._sleepers[0][0] <= self._now + 1e-9:
                _, _, future = heapq.heappop(self._sleepers)
                if not future.done():
                    future.set_result(None)
            await settle()


async def settle(rounds: int = 30) -> None:
    """Let ready tasks run (each queue hop between stages needs a turn of the loop)."""
    for _ in range(rounds):
        await asyncio.sleep(0)
