"""Caller keypad gathering: the keys a caller presses on a phone call, as caller turns for the agent.

Per the agent's `keypad` (agents/keypad.py):
- enabled: consecutive keys are gathered into ONE turn, "the caller entered 4 5 6 7" (a spoken-style
  list, one key per word, so that a brain reads digits and not a number), ended by `timeoutMs` without
  a key or by the terminator, which is not part of the digits. The terminator pressed with nothing
  gathered is a turn of its own ("the caller pressed #": "press pound to confirm").
- disabled: each key is a turn of its own at once, "the caller pressed 4".

`KeypadGatherer` is pure: it is told the time (`press(key, now)`, `expire(now)`) and says when it next
needs to be asked (`deadline`), so tests drive it with any clock. The media-stream consumer
(telephony/consumers.py) sleeps until the deadline on the session's clock.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from agents.keypad import keypad_of

# A caller who keeps pressing keys still gets a turn: the gathering ends after this many keys.
MAX_KEYS = 64


def entered(keys: str) -> str:
    return "the caller entered " + " ".join(keys)


def pressed(key: str) -> str:
    return f"the caller pressed {key}"


@dataclass
class KeypadGatherer:
    enabled: bool = True
    timeout_s: float = 2.0
    terminator: str = "#"
    _keys: list[str] = field(default_factory=list)
    _last: float | None = None

    @classmethod
    def for_agent(cls, keypad: Any) -> KeypadGatherer:
        """From an agent's stored keypad settings (defaults for a value that is not valid)."""
        settings = keypad_of(keypad)
        return cls(
            enabled=bool(settings["enabled"]),
            timeout_s=settings["timeoutMs"] / 1000,
            terminator=str(settings["terminator"]),
        )

    @property
    def deadline(self) -> float | None:
        """When the keys gathered so far become a turn unless another key comes (None: nothing gathered)."""
        if not self._keys or self._last is None:
            return None
        return self._last + self.timeout_s

    def press(self, key: str, now: float) -> str | None:
        """A key pressed at `now`: the turn it completes, if any."""
        if not self.enabled:
            return pressed(key)
        if self.terminator and key == self.terminator:
            return self.flush() or pressed(key)
        self._keys.append(key)
        self._last = now
        if len(self._keys) >= MAX_KEYS:
            return self.flush()
        return None

    def expire(self, now: float) -> str | None:
        """The gathered turn once `timeout_s` has passed without a key (else None)."""
        deadline = self.deadline
        if deadline is None or now + 1e-6 < deadline:  # a timer may fire a hair early
            return None
        return self.flush()

    def flush(self) -> str | None:
        """The keys gathered so far as a turn (None when there are none); the gathering starts over."""
        keys, self._keys, self._last = "".join(self._keys), [], None
        return entered(keys) if keys else None


class KeypadTurns:
    """A live call's keys as caller turns of its session: each key is logged and gathered per the agent's
    keypad; a turn goes to the session when the gathering ends, at once or when `timeoutMs` has passed on
    the session's clock. Used by every phone transport (media streams, SIP)."""

    def __init__(self, session: Any, keypad: Any, clock: Any) -> None:
        self.session = session
        self.clock = clock
        self.gatherer = KeypadGatherer.for_agent(keypad)
        self._timer: asyncio.Task[None] | None = None

    async def press(self, key: str) -> None:
        self.session.recorder.log("info", "caller pressed a key", digit=key)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        turn = self.gatherer.press(key, self.clock.now())
        if turn is not None:
            await self.session.caller_text(turn)
        elif self.gatherer.deadline is not None:
            self._timer = asyncio.create_task(self._expire(self.gatherer.deadline), name="keypad")

    async def _expire(self, deadline: float) -> None:
        await self.clock.sleep_until(deadline)
        turn = self.gatherer.expire(self.clock.now())
        if turn is not None:
            await self.session.caller_text(turn)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
