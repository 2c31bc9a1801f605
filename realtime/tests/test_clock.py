"""The event-loop clock: a stage sleeping on it can always be cancelled."""

from __future__ import annotations

import asyncio

from realtime.engine.clock import LoopClock


async def test_a_sleeper_woken_and_cancelled_in_the_same_turn_stops():
    """What stop() does to the playout stage when the caller hangs up during the greeting: the wake
    event is set and the stage cancelled at once. The stage must end (a call was left `active`)."""
    clock = LoopClock()
    wake = asyncio.Event()
    rounds = 0

    async def stage() -> None:
        nonlocal rounds
        while True:
            await clock.sleep_until(clock.now() + 10, wake)
            wake.clear()
            rounds += 1

    task = asyncio.create_task(stage())
    await asyncio.sleep(0)  # one turn of the loop: the stage runs until it sleeps on the clock
    assert not task.done()
    wake.set()
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=2)
    assert task in done and task.cancelled()
    assert rounds == 0


async def test_a_sleeper_wakes_at_its_deadline_or_when_woken():
    clock = LoopClock()
    started = clock.now()
    await clock.sleep_until(started + 0.05)
    assert clock.now() - started >= 0.05
    wake = asyncio.Event()
    asyncio.get_running_loop().call_later(0.02, wake.set)
    started = clock.now()
    await clock.sleep_until(started + 5, wake)
    assert 0.015 <= clock.now() - started < 1
    started = clock.now()
    await clock.sleep_until(started + 0.03, asyncio.Event())  # never set: the deadline ends it
    assert clock.now() - started >= 0.03
