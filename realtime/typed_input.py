"""The budget of typed input on one browser socket (docs/reference/realtime-protocol.md, "Typed input budget").

A typed turn (`input_text`) costs the service far more than it costs the client: a row of the call
record, a brain answer, a line in every call event sent to the organization's webhooks. Without a
bound one socket stored 3,000 turns of 2,000 characters in a second (4.5 MB call events). So a socket
takes turns of at most `max_chars` characters, at `per_second` after a burst of `burst` (a token
bucket on the session's clock, so tests drive it by hand), and a call at most `max_messages` turns and
`max_bytes` bytes of them. What is over is refused (`Refusal`) and the call goes on; a client whose
refused turns reach `flood_close` within FLOOD_WINDOW_SECONDS keeps flooding past every refusal, and
its socket is closed. Pure rules: no socket, no database.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from django.conf import settings

from realtime.engine.clock import Clock

FLOOD_WINDOW_SECONDS = 10.0  # refused turns counted towards `flood_close` within this long


@dataclass(frozen=True)
class TypedLimits:
    max_chars: int  # one turn
    per_second: float  # turns a second, sustained
    burst: int  # turns at once after a pause
    max_messages: int  # turns per call
    max_bytes: int  # UTF-8 bytes of the turns per call
    flood_close: int  # refused turns within FLOOD_WINDOW_SECONDS that close the socket

    @classmethod
    def from_settings(cls) -> TypedLimits:
        return cls(
            max_chars=int(settings.REALTIME_TEXT_MAX_CHARS),
            per_second=float(settings.REALTIME_TEXT_PER_SECOND),
            burst=int(settings.REALTIME_TEXT_BURST),
            max_messages=int(settings.REALTIME_TEXT_MAX_MESSAGES_PER_CALL),
            max_bytes=int(settings.REALTIME_TEXT_MAX_BYTES_PER_CALL),
            flood_close=int(settings.REALTIME_TEXT_FLOOD_CLOSE),
        )


@dataclass(frozen=True)
class Refusal:
    """A typed turn that is not taken: the socket's `error` (`code`, `message`), and whether the client
    has refused turns enough to be closed (`flooding`)."""

    code: str
    message: str
    flooding: bool = False


class TypedBudget:
    """What one socket may still type. `admit(text)` takes a turn (its stripped text) or refuses it."""

    def __init__(self, limits: TypedLimits, clock: Clock) -> None:
        self.limits = limits
        self.clock = clock
        self._tokens = float(limits.burst)
        self._filled_at: float | None = None
        self.messages = 0  # turns taken in this call
        self.bytes = 0
        self.refused = 0  # turns refused in this call
        self._refusals: deque[float] = deque(maxlen=limits.flood_close)  # clock times of the latest refusals

    def admit(self, text: object) -> str | Refusal:
        limits = self.limits
        if not isinstance(text, str) or not text.strip():
            return self._refuse("bad_text", "input_text.text must be a non-empty string")
        if len(text) > limits.max_chars:
            return self._refuse("bad_text", f"input_text.text is limited to {limits.max_chars} characters")
        text = text.strip()
        size = len(text.encode("utf-8"))
        if self.messages >= limits.max_messages or self.bytes + size > limits.max_bytes:
            return self._refuse(
                "text_limit",
                f"This call has taken its typed input: at most {limits.max_messages} input_text messages and "
                f"{limits.max_bytes} bytes of text per call; this one was refused",
            )
        now = self.clock.now()
        if self._filled_at is not None:
            self._tokens = min(float(limits.burst), self._tokens + (now - self._filled_at) * limits.per_second)
        self._filled_at = now
        if self._tokens < 1 - 1e-9:  # a whole token, give or take the float error of the clock
            return self._refuse(
                "text_too_fast",
                f"input_text is limited to {limits.per_second:g} messages a second (bursts of {limits.burst}); "
                "this one was refused",
            )
        self._tokens -= 1
        self.messages += 1
        self.bytes += size
        return text

    def _refuse(self, code: str, message: str) -> Refusal:
        now = self.clock.now()
        self.refused += 1
        self._refusals.append(now)
        window = self._refusals
        flooding = len(window) == window.maxlen and now - window[0] <= FLOOD_WINDOW_SECONDS
        return Refusal(code, message, flooding=flooding)
