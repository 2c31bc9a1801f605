"""The typed-input budget alone (realtime/typed_input.py), on a hand-driven clock: the rate refills with
the session's time, the call's caps hold whatever the rate, and only refusals close together are a flood.
Over a real server: test_typed_input_e2e.py."""

from __future__ import annotations

from realtime.engine.clock import ManualClock
from realtime.typed_input import FLOOD_WINDOW_SECONDS, Refusal, TypedBudget, TypedLimits

LIMITS = TypedLimits(max_chars=20, per_second=2.0, burst=3, max_messages=8, max_bytes=60, flood_close=4)


def codes(budget: TypedBudget, *texts: object) -> list[str]:
    return [taken.code if isinstance(taken, Refusal) else "taken" for taken in map(budget.admit, texts)]


async def test_a_burst_then_the_rate_refilled_by_the_session_clock():
    clock = ManualClock()
    budget = TypedBudget(LIMITS, clock)
    assert budget.admit("  hello  ") == "hello"
    assert codes(budget, "a", "b", "c") == ["taken", "taken", "text_too_fast"]
    await clock.advance(0.5)  # one turn at 2 a second
    assert codes(budget, "d", "e") == ["taken", "text_too_fast"]
    await clock.advance(60)  # a long pause refills the burst, no more
    assert codes(budget, "f", "g", "h", "i") == ["taken", "taken", "taken", "text_too_fast"]


async def test_the_call_caps_messages_and_bytes_and_a_turn_its_characters():
    clock = ManualClock()
    budget = TypedBudget(LIMITS, clock)
    assert codes(budget, "", "   ", 7, None, "x" * 21) == ["bad_text"] * 5
    for _ in range(3):
        assert codes(budget, "é" * 10) == ["taken"]  # 20 bytes each
        await clock.advance(1)
    refused = budget.admit("more")
    assert isinstance(refused, Refusal) and refused.code == "text_limit" and "60 bytes" in refused.message
    many = TypedBudget(LIMITS, clock)
    for _ in range(LIMITS.max_messages):
        assert codes(many, "ok") == ["taken"]
        await clock.advance(1)
    assert codes(many, "one more") == ["text_limit"]


async def test_only_refusals_close_together_are_a_flood():
    clock = ManualClock()
    spread = TypedBudget(LIMITS, clock)
    codes(spread, "a", "b", "c")
    for _ in range(3 * LIMITS.flood_close):  # refused, but slower than flood_close in the window
        refused = spread.admit("")
        assert isinstance(refused, Refusal) and not refused.flooding
        await clock.advance(FLOOD_WINDOW_SECONDS / (LIMITS.flood_close - 1) + 0.01)
    flood = TypedBudget(LIMITS, clock)
    refusals = [flood.admit("") for _ in range(LIMITS.flood_close)]
    assert [isinstance(r, Refusal) and r.flooding for r in refusals] == [False] * (LIMITS.flood_close - 1) + [True]
