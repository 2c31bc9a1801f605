"""Twilio's side of a bidirectional Media Stream, scripted after Twilio's documented messages
(twilio.com/docs/voice/media-streams/websocket-messages), over a real WebSocket (aiohttp). Used by the telephony tests
and bench/voice_latency.py (`--scenario phone`).

`TwilioStream` sends `connected`, `start` (with the stream token as a custom parameter), caller audio
as 20 ms mu-law `media` frames at real time, `dtmf` and `stop`; and plays the agent's `media` like
Twilio does: a playback buffer that plays 20 ms per frame in real time, a `mark` echoed once the
audio before it has played, and `clear` dropping what is buffered (echoing the marks it drops).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from telephony import audio
from testing.clients import Received, SocketClient
from testing.waiting import Signal

FRAME_SECONDS = 0.02


def to_phone(pcm16_16k: bytes) -> bytes:
    """Caller speech (PCM16 16 kHz) as a phone line carries it: mu-law 8 kHz."""
    import soxr

    samples = soxr.resample(np.frombuffer(pcm16_16k, dtype="<i2"), 16000, 8000)
    return audio.ulaw_encode(np.asarray(samples, dtype="<i2"))


def from_phone(ulaw: bytes, rate: int = 16000) -> bytes:
    """The agent's mu-law 8 kHz back to PCM16 at `rate` (for recognition and levels)."""
    import soxr

    samples = audio.ulaw_decode(ulaw)
    if rate == 8000:
        return samples.tobytes()
    return np.asarray(soxr.resample(samples, 8000, rate), dtype="<i2").tobytes()


def sid(prefix: str) -> str:
    return prefix + secrets.token_hex(16)


@dataclass
class TwilioStream(SocketClient):
    url: str
    token: str | None
    call_sid: str = field(default_factory=lambda: sid("CA"))
    stream_sid: str = field(default_factory=lambda: sid("MZ"))
    account_sid: str = field(default_factory=lambda: sid("AC"))
    parameters: dict[str, str] | None = None  # customParameters; default {"token": token}
    messages: list[Received] = field(default_factory=list)  # everything the server sent
    echoed: list[str] = field(default_factory=list)  # marks echoed back, in order
    played: bytearray = field(default_factory=bytearray)  # agent mu-law that was played (not cleared)
    on_message: Callable[[Received], None] | None = None
    close_code: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self._sequence = 0
        self._chunk = 0
        self._buffer_end = 0.0  # loop time at which the buffered agent audio has played out
        self._pending: list[tuple[asyncio.TimerHandle, str | None, bytes]] = []  # scheduled plays/echoes
        self._tasks: set[asyncio.Task[Any]] = set()
        self._started_at = 0.0
        self.playback = Signal()  # notified each time a frame has played or a mark is echoed

    async def __aexit__(self, *exc: object) -> None:
        for handle, _, _ in self._pending:
            handle.cancel()
        await super().__aexit__(*exc)

    async def closed_reading(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # --- Twilio -> server ------------------------------------------------------------------------

    def _next(self) -> str:
        self._sequence += 1
        return str(self._sequence)

    def _frame(self, event: str, **fields: Any) -> dict[str, Any]:
        """A message of the carrier's with its sequence number and stream (Twilio's field names)."""
        return {"event": event, "sequenceNumber": self._next(), "streamSid": self.stream_sid, **fields}

    def _stop_fields(self) -> dict[str, Any]:
        return {"accountSid": self.account_sid, "callSid": self.call_sid}

    async def send(self, message: dict[str, Any]) -> None:
        assert self._ws is not None
        if not self._ws.closed:
            await self._ws.send_str(json.dumps(message))

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._started_at = loop.time()
        parameters = self.parameters if self.parameters is not None else {"token": self.token or ""}
        await self.send({"event": "connected", "protocol": "Call", "version": "1.0.0"})
        await self.send(
            {
                "event": "start",
                "sequenceNumber": self._next(),
                "streamSid": self.stream_sid,
                "start": {
                    "streamSid": self.stream_sid,
                    "accountSid": self.account_sid,
                    "callSid": self.call_sid,
                    "tracks": ["inbound"],
                    "customParameters": parameters,
                    "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
                },
            }
        )

    async def send_media(self, ulaw: bytes) -> None:
        self._chunk += 1
        elapsed = round((asyncio.get_running_loop().time() - self._started_at) * 1000)
        media = {
            "track": "inbound",
            "chunk": str(self._chunk),
            "timestamp": str(elapsed),
            "payload": base64.b64encode(ulaw).decode("ascii"),
        }
        await self.send(self._frame("media", media=media))

    async def stream(self, ulaw: bytes, *, stop_when: Callable[[], bool] | None = None) -> float:
        """Caller audio in 20 ms frames at real time, like a phone line; returns the loop time at
        which the last frame's audio ends."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        for index, offset in enumerate(range(0, len(ulaw), audio.FRAME_BYTES)):
            if stop_when is not None and stop_when():
                return loop.time()
            delay = start + index * FRAME_SECONDS - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            await self.send_media(ulaw[offset : offset + audio.FRAME_BYTES])
        end = start + len(ulaw) / 8000
        await asyncio.sleep(max(0.0, end - loop.time()))
        return end

    async def silence(self, seconds: float) -> None:
        await self.stream(bytes([audio.SILENCE_BYTE]) * int(8000 * seconds))

    async def dtmf(self, digit: str) -> None:
        await self.send(self._frame("dtmf", dtmf={"track": "inbound_track", "digit": digit}))

    async def press(self, presses: list[tuple[str, float]]) -> None:
        """Keys pressed at the caller's pace: each `(key, pause)` after its pause in seconds (real time, as
        the caller's audio is: the keypad's timeout is what such a scenario puts under test)."""
        for key, pause in presses:
            await asyncio.sleep(pause)
            await self.dtmf(key)

    async def stop(self) -> None:
        await self.send(self._frame("stop", stop=self._stop_fields()))

    # --- server -> Twilio: a playback buffer like Twilio's -----------------------------------

    def arrived(self, item: Received, loop: asyncio.AbstractEventLoop) -> None:
        self._play(item.message, loop)

    def _play(self, message: dict[str, Any], loop: asyncio.AbstractEventLoop) -> None:
        event = message.get("event")
        now = loop.time()
        if event == "media":
            frame = base64.b64decode(message["media"]["payload"])
            starts = max(now, self._buffer_end)
            self._buffer_end = starts + len(frame) / 8000
            self._schedule(loop, self._buffer_end, None, frame)
        elif event == "mark":
            self._schedule(loop, max(now, self._buffer_end), message["mark"]["name"], b"")
        elif event == "clear":
            pending, self._pending = self._pending, []
            for handle, name, _ in pending:
                handle.cancel()
                if name is not None:
                    self._echo(name)  # Twilio returns the marks a clear discards
            self._buffer_end = now

    def _schedule(self, loop: asyncio.AbstractEventLoop, at: float, name: str | None, frame: bytes) -> None:
        entry: list[Any] = []

        def due() -> None:
            with contextlib.suppress(ValueError):
                self._pending.remove(entry[0])
            if name is None:
                self.played.extend(frame)
            else:
                self._echo(name)
            self.playback.notify()

        handle = loop.call_at(at, due)
        entry.append((handle, name, frame))
        self._pending.append(entry[0])

    def _echo(self, name: str) -> None:
        self.echoed.append(name)
        message = self._frame("mark", mark={"name": name})
        task = asyncio.get_running_loop().create_task(self.send(message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- reading ------------------------------------------------------------------------------

    def audio(self, start: int = 0, end: int | None = None) -> bytes:
        """The agent's mu-law received in messages[start:end]."""
        return b"".join(
            base64.b64decode(item.message["media"]["payload"])
            for item in self.messages[start:end]
            if item.message.get("event") == "media"
        )


def is_event(kind: str) -> Callable[[dict[str, Any]], bool]:
    return lambda message: message.get("event") == kind


async def quiet(twilio: TwilioStream, *, after: int = 0, seconds: float = 1.0, timeout: float = 60) -> int:
    """Wait until the agent has sent audio after message `after` and then no more for `seconds` (the
    next media message awaited that long); the index of the first message after that audio."""
    await twilio.wait_for(is_event("media"), after=after, timeout=timeout)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise AssertionError(f"the agent kept sending audio for {timeout:g} s")
        seen = len(twilio.messages)
        try:
            await twilio.wait_for(is_event("media"), after=seen, timeout=min(seconds, remaining))
        except TimeoutError:
            return len(twilio.messages)


async def played_out(twilio: TwilioStream, timeout: float = 30) -> None:
    """Wait until the agent's audio has played on the phone: no media for a second, every mark echoed."""
    await quiet(twilio, seconds=1.0, timeout=timeout)
    marks = [item for item in twilio.messages if item.message["event"] == "mark"]
    await twilio.playback.until(lambda: len(twilio.echoed) >= len(marks), what="every mark echoed", timeout=timeout)


async def greeted(twilio: TwilioStream) -> int:
    """Stream silence (a phone line always carries audio) until the greeting has played; returns the
    index of the first message after it."""
    done = asyncio.Event()
    line = asyncio.create_task(twilio.stream(bytes([audio.SILENCE_BYTE]) * 8000 * 40, stop_when=done.is_set))
    loop = asyncio.get_running_loop()
    await twilio.wait_for(is_event("media"), timeout=60)
    # The greeting has played when media stops arriving and every mark is echoed.
    deadline = loop.time() + 60
    while loop.time() < deadline:
        last = max(item.at for item in twilio.messages if item.message["event"] == "media")
        marks = [item for item in twilio.messages if item.message["event"] == "mark"]
        if loop.time() - last > 1.0 and len(twilio.echoed) == len(marks):
            break
        await asyncio.sleep(0.1)
    done.set()
    await line
    return len(twilio.messages)


PHONE_NUMBER = "+14155550100"  # the organization's number a test's phone agent answers
PHONE_CALLER = "+14155550199"


def phone_agent(owner: Any, agent: Any, number: str = PHONE_NUMBER) -> Any:
    """`agent` answering `number` (claimed and assigned, under a Twilio account of the owner's organization);
    the number's id is kept on it as `number_id` for `phone_stream`."""
    from telephony.services.numbers import phone_number_assign, phone_number_claim
    from testing.twilio_webhooks import make_account

    make_account(owner.organization)
    claimed = phone_number_claim(organization=owner.organization, number=number)
    phone_number_assign(organization=owner.organization, agent=agent, phone_number_id=claimed.pk)
    agent.number_id = claimed.pk
    return agent


async def phone_stream(
    server: Any, agent: Any, call_sid: str, *, caller: str = PHONE_CALLER, number: str = PHONE_NUMBER
) -> TwilioStream:
    """Twilio's Media Stream of a call from `caller` to the phone agent's number (`phone_agent`), with the
    signed stream token the voice webhook would have given it."""
    from asgiref.sync import sync_to_async

    from telephony.streams import stream_token_issue

    token = await sync_to_async(stream_token_issue)(
        organization_id=agent.organization_id,
        agent_id=agent.pk,
        phone_number_id=agent.number_id,
        call_sid=call_sid,
        from_number=caller,
        to_number=number,
    )
    return TwilioStream(f"{server.ws_url}/telephony/twilio/stream", token, call_sid=call_sid)
