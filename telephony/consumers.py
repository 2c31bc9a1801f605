"""The phone transport: a carrier's bidirectional media stream in front of the engine, in one of two wire
dialects (telephony/stream_messages.py): Twilio's Media Streams (`<Connect><Stream>`, TwilioMediaStream)
and Telnyx's media streaming (`stream_bidirectional_mode: rtp`, TelnyxMediaStream).

The consumer only translates (the messages are read and written by the pure functions of
telephony/stream_messages.py):
- `connected` is noted; `start` must carry the stream token (Twilio: `customParameters.token`; Telnyx: the
  call's `client_state`), a single-use token issued
  by the voice webhook (telephony.streams), or by the outbound dispatcher for an outbound call: that
  token names the call record (queued or ringing), which the session makes `active` instead of
  opening a new one; a call canceled or ended meanwhile is refused and its line hung up. A missing, bad, expired or reused token, or an agent that
  is gone or not active, closes the socket at once: no session, one log line. Nothing else on the
  socket is read before a valid `start`, and a socket without one is closed after
  START_TIMEOUT_SECONDS.
- `media` (base64 mu-law 8 kHz, inbound track) -> PCM16 16 kHz -> `session.push_audio`.
- `dtmf`: each key goes to the agent log and to the agent's keypad gathering (telephony/keypad.py):
  consecutive keys up to `timeoutMs` without a key or the terminator reach the brain as one caller turn,
  "the caller entered 4 5 6 7" (a disabled keypad: "the caller pressed 4" per key; `session.caller_text`).
- `mark`: the echo of a mark sent after each audio chunk; it tells how far the caller has really
  heard the agent (`MediaStreamTransport.playback_lag`, which the session uses on barge-in).
- `stop` ends the session (completed) and closes the socket.
Bad messages (not JSON, unknown events, another stream, bad base64, a string that cannot be stored:
a lone surrogate or NUL, even in a `start`) are logged and ignored.

The consumer joins `call_group(callSid)` for the life of the call: `call.ended` (Twilio's status
callback, received by any process) and `call.hangup` (a hang-up asked for elsewhere) end the session.
An outage of the channel layer (Redis restarting) keeps the call: the subscription is retried with
backoff and joined again once the layer is back (realtime.sockets).

The stream ends its call exactly once however it ends (realtime.sockets): `stop`, a status callback
or a hang-up as told; a stream dropped without a close frame, or a consumer that failed, at once as
`failed`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async

from calls.models import CallChannel, CallStatus, EndedReason
from kit.providers import ProviderError
from realtime.engine.audio import FRAME_SECONDS
from realtime.engine.clock import Clock, LoopClock
from realtime.engine.contracts import Ending
from realtime.engine.session.shell import Session, open_session
from realtime.sockets import JsonSocketConsumer
from realtime.tokens import CLOSE_CONFLICT, CLOSE_ENGINE_ERROR, CLOSE_INVALID_TOKEN, TokenError
from telephony import audio, warm_transfer
from telephony.groups import call_group
from telephony.keypad import KeypadTurns
from telephony.providers import PhoneProvider
from telephony.services.calls import CALL_ENDED_REASONS
from telephony.stream_messages import (
    TELNYX,
    TWILIO,
    Dialect,
    Malformed,
    read_dtmf,
    read_mark,
    read_media,
    read_message,
)
from telephony.streams import outbound_call_waiting, phone_call_get, stream_token_redeem

logger = logging.getLogger(__name__)

START_TIMEOUT_SECONDS = 10.0  # a socket that does not present a valid `start` by then is closed
MAX_BAD_MESSAGE_LOGS = 20  # per stream: a broken peer cannot flood the log
TRANSFER_STOP_WAIT_SECONDS = 3.0  # after a transfer, how long to wait for Twilio's `stop` before closing
# A warm transfer waits for the person's answer up to its ring time, the key press time and this (the briefing).
TRANSFER_BRIEFING_SECONDS = 30
# Close codes (Twilio ignores them; they are for logs and tests): a refused stream token keeps the
# token's own code (realtime.tokens: 4401 invalid or expired, 4409 already used).
CLOSE_AGENT_UNAVAILABLE = CLOSE_CONFLICT
CLOSE_NO_START = 4408
# Twilio call statuses that end a call as failed (anything else ends it completed).
_FAILED_STATUSES = frozenset({"failed"})


class MediaStream(JsonSocketConsumer):
    dialect: Dialect = TWILIO
    conversation: Session | None = None
    transport: MediaStreamTransport | None = None
    _keys: KeypadTurns | None = None
    stream_sid: str | None = None
    call_sid: str | None = None
    _run: asyncio.Task[None] | None = None
    _starting = False
    _bad_logged = 0
    _too_fast_logged = False

    async def connect(self) -> None:
        await self.accept()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._keys: KeypadTurns | None = None
        self._clock: Clock = LoopClock()
        self._upsampler = audio.Upsampler()
        self._stopped = asyncio.Event()  # the carrier's `stop` arrived
        self._over = False  # the carrier's call ended, or a hang-up was asked for elsewhere
        self.transfers: dict[str, asyncio.Future[str]] = {}  # warm transfers waiting for their outcome, by id
        self._spawn(self._start_deadline(), "stream-start-deadline")

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self._closed:
            return
        message = read_message(text_data)
        if isinstance(message, Malformed):
            self._bad(message.reason)
            return
        event: Any = message.get("event")  # any JSON value
        if event == "connected":
            return
        if event == "start":
            try:
                await self._start(message)
            except Exception:
                logger.exception("media stream (call %s): could not open the session", _short(self.call_sid))
                await self.close_once(CLOSE_ENGINE_ERROR, "server error")
            return
        if self.conversation is None:
            # Nothing is trusted before a valid `start`.
            self._bad(f"{event!r} before a valid start")
            return
        if message.get(self.dialect.stream_key) != self.stream_sid:
            self._bad(f"{event!r} for another stream")
            return
        handler = _HANDLERS.get(event)
        if handler is None:
            self._bad(f"unknown event {event!r}")
            return
        try:
            await handler(self, message)
        except Exception:  # a message that breaks a handler is dropped; the call goes on
            logger.exception("media stream (call %s): could not handle a %r message", _short(self.call_sid), event)

    # --- the carrier's messages ------------------------------------------------------------------

    async def _start(self, message: dict[str, Any]) -> None:
        if self.conversation is not None or self._starting:
            self._bad("a second start")
            return
        self._starting = True
        start = self.dialect.read_start(message)
        stream_sid, call_sid = start.stream_sid, start.call_sid
        try:
            grant = await database_sync_to_async(stream_token_redeem)(start.token)
        except TokenError as exc:
            logger.warning("media stream refused (call %s): %s", _short(call_sid), exc.message)
            await self.close_once(exc.close_code, "invalid stream token")
            return
        # An outbound call's token is issued before the carrier names the call (its record does, once
        # placed: call_activate refuses another callSid); an inbound call's token names its CallSid.
        outbound = grant.call_id is not None
        if (
            not isinstance(stream_sid, str)
            or not stream_sid
            or not isinstance(call_sid, str)
            or not call_sid
            or (not outbound and call_sid != grant.call_sid)
        ):
            logger.warning("media stream refused: its callSid is not the call the token was issued for")
            await self.close_once(CLOSE_INVALID_TOKEN, "invalid stream token")
            return
        call = await database_sync_to_async(phone_call_get)(grant)
        if call is None:
            logger.warning("media stream refused (call %s): the agent is gone or not active", _short(call_sid))
            await self.close_once(CLOSE_AGENT_UNAVAILABLE, "agent not available")
            return
        if outbound and not await database_sync_to_async(outbound_call_waiting)(grant.call_id):
            logger.warning("media stream refused (call %s): the outbound call was canceled or ended", _short(call_sid))
            if call.provider is not None:  # the person who just answered is not left in silence
                with contextlib.suppress(ProviderError):
                    await call.provider.hang_up(call_sid=call_sid)
            await self.close_once(CLOSE_AGENT_UNAVAILABLE, "call not waiting")
            return
        if start.problem:
            logger.warning("media stream refused (call %s): %s", _short(call_sid), start.problem)
            if call.provider is not None:  # the caller is not left in silence
                with contextlib.suppress(ProviderError):
                    await call.provider.hang_up(call_sid=call_sid)
            await self.close_once(CLOSE_ENGINE_ERROR, "unsupported media")
            return
        self.stream_sid, self.call_sid = stream_sid, call_sid
        clock = self._clock  # one clock for the session, the transport's mark timings and the keypad
        self.transport = MediaStreamTransport(
            self,
            dialect=self.dialect,
            stream_sid=stream_sid,
            call_sid=call_sid,
            # A transfer presents the organization's own number: the called one, or an outbound call's from.
            caller_id=grant.from_number if outbound else grant.to_number,
            provider=call.provider,
            clock=clock,
        )
        self.conversation = open_session(
            agent=call.agent,
            transport=self.transport,
            channel=CallChannel.PHONE,
            from_number=grant.from_number,
            to_number=grant.to_number,
            provider_call_id=call_sid,
            carrier=call.provider.name if call.provider is not None else self.dialect.carrier.lower(),
            clock=clock,
            call_id=grant.call_id,  # an outbound call: its record (queued or ringing) becomes active
        )
        self._keys = KeypadTurns(self.conversation, call.agent.keypad, clock)
        # A channel layer that is down (Redis restarting) does not fail the call: the subscription is
        # retried until it is back (realtime.sockets).
        await self.join_group(call_group(call_sid))
        self._run = asyncio.create_task(
            self.conversation.run(), name=f"conversation-{self.conversation.recorder.session_id}"
        )

    async def _media(self, message: dict[str, Any]) -> None:
        ulaw = read_media(message)
        if isinstance(ulaw, Malformed):
            self._bad(ulaw.reason)
            return
        if ulaw is None:
            return  # not the caller's track
        assert self.conversation is not None
        if not self.conversation.push_audio(audio.phone_to_engine(ulaw, self._upsampler)):
            if not self._too_fast_logged:
                self._too_fast_logged = True
                logger.warning("call %s: caller audio arrives faster than real time; dropped", _short(self.call_sid))

    async def _dtmf(self, message: dict[str, Any]) -> None:
        digit = read_dtmf(message)
        if isinstance(digit, Malformed):
            self._bad(digit.reason)
            return
        assert self._keys is not None
        await self._keys.press(digit)

    async def _mark(self, message: dict[str, Any]) -> None:
        name = read_mark(message)
        if isinstance(name, Malformed):
            self._bad(name.reason)
            return
        assert self.transport is not None
        self.transport.mark_played(name)

    async def _stop(self, message: dict[str, Any]) -> None:
        self._stopped.set()
        await self._end(CallStatus.COMPLETED, EndedReason.CALLER_HUNG_UP)

    # --- the channel layer (possibly from another process) -----------------------------------

    async def call_ended(self, event: dict[str, Any]) -> None:
        """The carrier's status callback says the call is over (the caller hung up, or it failed)."""
        carrier_status = event.get("status")
        status = CallStatus.FAILED if carrier_status in _FAILED_STATUSES else CallStatus.COMPLETED
        reason = CALL_ENDED_REASONS.get(str(carrier_status), EndedReason.CALLER_HUNG_UP)
        logger.info("call %s ended (%s)", _short(self.call_sid), carrier_status)
        self._over = True
        await self._end(status, reason)

    async def call_hangup(self, event: dict[str, Any]) -> None:
        """A hang-up asked for elsewhere (an operator, another part of the service): the service ends
        the call, so agent-ended-call."""
        logger.info("call %s: hang-up requested", _short(self.call_sid))
        self._over = True
        await self._end(CallStatus.COMPLETED, EndedReason.AGENT_ENDED_CALL)

    async def call_answered_by(self, event: dict[str, Any]) -> None:
        """Twilio's answering-machine detection verdict (telephony/voicemail.py): the session acts on it."""
        if self.conversation is not None:
            duration = event.get("duration_ms")
            await self.conversation.answered_by(
                str(event.get("answered_by") or ""), detection_ms=duration if isinstance(duration, int) else None
            )

    async def call_transfer_outcome(self, event: dict[str, Any]) -> None:
        """How a warm transfer went (the person's key, or their call's status: telephony/warm_transfer.py);
        the first outcome counts."""
        waiting = self.transfers.get(str(event.get("transfer") or ""))
        if waiting is not None and not waiting.done():
            waiting.set_result(str(event.get("outcome") or warm_transfer.FAILED))

    # --- endings ----------------------------------------------------------------------------

    async def _end(self, status: str, reason: str) -> None:
        if self.conversation is not None:
            await self.conversation.stop(status, reason)
        await self.close_once(1000, "call ended")

    async def socket_gone(self, status: str, reason: str) -> None:
        if self._keys is not None:
            self._keys.close()
        if hasattr(self, "_stopped"):
            self._stopped.set()  # nothing more will come: a transfer's hang-up need not wait for `stop`
        if self.conversation is not None:
            await self.conversation.stop(status, reason)
        if self._run is not None:
            await asyncio.gather(self._run, return_exceptions=True)
        tasks = [task for task in getattr(self, "_tasks", ()) if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _start_deadline(self) -> None:
        await asyncio.sleep(START_TIMEOUT_SECONDS)
        if self.conversation is None and not self._closed:
            logger.warning("media stream closed: no valid start within %s s", START_TIMEOUT_SECONDS)
            await self.close_once(CLOSE_NO_START, "no start")

    def call_over(self) -> bool:
        """Whether the carrier's call is over or being ended elsewhere: its stream stopped, its status
        callback said so, or a hang-up was asked for (which tells the carrier itself)."""
        return self._stopped.is_set() or self._over

    async def wait_stopped(self, timeout: float) -> None:  # noqa: ASYNC109 - a bounded wait for the stop, asyncio.wait_for inside
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopped.wait(), timeout)

    # --- helpers ----------------------------------------------------------------------------

    def _spawn(self, coroutine: Any, name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coroutine, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _bad(self, what: str) -> None:
        self._bad_logged += 1
        if self._bad_logged <= MAX_BAD_MESSAGE_LOGS:
            logger.warning("media stream (call %s): ignored a bad message: %s", _short(self.call_sid), what)


_HANDLERS = {
    "media": MediaStream._media,
    "dtmf": MediaStream._dtmf,
    "mark": MediaStream._mark,
    "stop": MediaStream._stop,
}


class TwilioMediaStream(MediaStream):
    dialect = TWILIO


class TelnyxMediaStream(MediaStream):
    dialect = TELNYX


def _short(call_sid: str | None) -> str:
    """Call SIDs in process logs are shortened (enough to find the call, not to act on it)."""
    return f"{call_sid[:10]}…" if isinstance(call_sid, str) and call_sid else "?"


@dataclass
class _Mark:
    name: str
    plays_by: float  # when the session's playout expects the audio before it to have played


class MediaStreamTransport:
    """The engine's Transport over a carrier's media stream (in its `dialect`).

    Agent audio is downsampled to 8 kHz, mu-law encoded and sent as 20 ms `media` frames, followed by a
    `mark` per chunk. The session's playout assumes that the caller hears a chunk as soon as it is
    sent (after the queue ahead of it); the carrier echoes each mark when the audio before it has played,
    so the lateness of the echoes (the network and Twilio's own buffer) is measured, and on barge-in
    `playback_lag(now)` tells the session how far behind its estimate the caller really is.
    """

    def __init__(
        self,
        consumer: MediaStream,
        *,
        dialect: Dialect = TWILIO,
        stream_sid: str,
        call_sid: str,
        caller_id: str,
        provider: PhoneProvider | None,
        clock: Clock | None = None,
    ) -> None:
        self.consumer = consumer
        self.dialect = dialect
        self.stream_sid = stream_sid
        self.call_sid = call_sid
        self.caller_id = caller_id
        self.provider = provider
        self.clock: Clock = clock or LoopClock()
        self.encoder = audio.PhoneEncoder()
        self._marks: deque[_Mark] = deque()  # sent, not yet echoed, oldest first
        self._dropped: set[str] = set()  # sent before a clear: their echoes say nothing about playback
        self._sequence = 0
        self._expected_end: float | None = None  # when the session expects what was sent to have played
        self.lag = 0.0  # the latest measured lateness of an echo
        self.marks_echoed = 0

    async def started(self, call_id: str) -> None:
        logger.debug("call %s: session started (call record %s)", _short(self.call_sid), call_id)

    async def send_audio(self, pcm16_24k: bytes) -> None:
        frames = self.encoder.encode(pcm16_24k)
        if not frames:
            return
        now = self.clock.now()
        start = now if self._expected_end is None or self._expected_end < now else self._expected_end
        self._expected_end = start + len(frames) * FRAME_SECONDS
        for frame in frames:
            await self.consumer.send_message(self.dialect.media(self.stream_sid, frame))
        self._sequence += 1
        mark = _Mark(name=f"a{self._sequence}", plays_by=self._expected_end)
        self._marks.append(mark)
        await self.consumer.send_message(self.dialect.mark(self.stream_sid, mark.name))

    def mark_played(self, name: str) -> None:
        """The carrier's echo of mark `name`: the audio before it has played (or was cleared)."""
        if name in self._dropped:
            self._dropped.discard(name)
            return
        now = self.clock.now()
        while self._marks:
            mark = self._marks.popleft()
            if mark.name == name:
                self.lag = max(0.0, now - mark.plays_by)
                self.marks_echoed += 1
                return
        logger.debug("call %s: echo of an unknown mark %r", _short(self.call_sid), name)

    def playback_lag(self, now: float) -> float:
        """How many seconds the caller's playback is behind the session's estimate: the latest echo's
        lateness, or more when an expected echo is overdue (an echo takes the return trip of the
        network too, so this errs by half a round trip towards "heard less")."""
        lag = self.lag
        if self._marks and self._marks[0].plays_by < now:
            lag = max(lag, now - self._marks[0].plays_by)
        return lag

    async def clear(self) -> None:
        await self.consumer.send_message(self.dialect.clear(self.stream_sid))
        self.encoder.reset()
        self._dropped.update(mark.name for mark in self._marks)
        self._marks.clear()
        self._expected_end = None

    async def send_transcript(self, role: str, text: str) -> None:
        logger.debug("call %s: %s turn of %d words", _short(self.call_sid), role, len(text.split()))

    async def send_event(self, event: dict[str, Any]) -> None:
        logger.debug("call %s: %s", _short(self.call_sid), event.get("type"))

    async def transfer(self, destination: str) -> None:
        """The carrier moves the call to `destination` (caller id: the number that was called; Twilio
        replaces the call's instructions with a `<Dial>`, Telnyx transfers it) and stops this stream."""
        if self.provider is None:
            raise ProviderError("The organization has no telephony account to transfer the call with", permanent=True)
        await self.provider.transfer(call_sid=self.call_sid, destination=destination, caller_id=self.caller_id)

    @property
    def warm_transfers(self) -> bool:
        """Whether this call can be transferred warm (the carrier calls the person while the caller holds)."""
        return self.provider is not None and self.provider.supports_warm_transfer

    async def warm_transfer(
        self,
        destination: str,
        *,
        briefing: str,
        language: str,
        ring_timeout_seconds: int,
        on_accepted: Callable[[], None] = lambda: None,
    ) -> str:
        """Call the person at `destination` with `briefing` and a one-key menu while the caller stays on this
        stream (the session plays hold audio); on "1", move the caller into the person's conference (this
        stream then stops). The outcome: accepted, declined, no-answer or failed (telephony/warm_transfer.py)."""
        provider = self.provider
        if provider is None or not provider.supports_warm_transfer:
            return warm_transfer.FAILED
        transfer_id = uuid.uuid4().hex[:16]
        waiting: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.consumer.transfers[transfer_id] = waiting
        action_url, status_url = warm_transfer.transfer_urls(self.call_sid, transfer_id)
        leg: str | None = None
        try:
            leg = await provider.dial_person(
                to=destination,
                caller_id=self.caller_id,
                twiml=warm_transfer.briefing_twiml(briefing=briefing, action_url=action_url, language=language),
                status_callback_url=status_url,
                ring_timeout_seconds=ring_timeout_seconds,
            )
            try:
                outcome = await asyncio.wait_for(
                    waiting, ring_timeout_seconds + warm_transfer.GATHER_SECONDS + TRANSFER_BRIEFING_SECONDS
                )
            except TimeoutError:
                outcome = warm_transfer.NO_ANSWER
            if outcome == warm_transfer.ACCEPTED:
                on_accepted()  # before the caller's stream stops: that stop is the transfer, not a hang-up
                await provider.join_conference(call_sid=self.call_sid, name=warm_transfer.conference_name(transfer_id))
                return outcome
        except ProviderError as exc:
            logger.warning("call %s: the warm transfer failed: %s", _short(self.call_sid), exc)
            outcome = warm_transfer.FAILED
        except asyncio.CancelledError:  # the caller's call ended: the person's stops ringing
            if leg is not None:
                with contextlib.suppress(ProviderError):
                    await provider.hang_up(call_sid=leg)
            raise
        finally:
            self.consumer.transfers.pop(transfer_id, None)
        if leg is not None and outcome in (warm_transfer.NO_ANSWER, warm_transfer.FAILED):
            with contextlib.suppress(ProviderError):
                await provider.hang_up(call_sid=leg)  # still ringing, or joined nowhere: not left behind
        return outcome

    async def hang_up(self, ending: Ending, message: str = "") -> None:
        if ending == Ending.TRANSFERRED:
            # The stream ends with Twilio's `stop` once the <Dial> has taken over; closing before that
            # could let Twilio move on to the rest of the call's instructions.
            await self.consumer.wait_stopped(TRANSFER_STOP_WAIT_SECONDS)
        if self.provider is not None and (
            ending == Ending.FAILED
            or (ending != Ending.TRANSFERRED and not self.provider.stream_ends_call and not self.consumer.call_over())
        ):
            # Closing the stream alone would leave the caller in silence until they hang up: after a failure,
            # and whenever the agent ends a call that outlives its stream (Telnyx's).
            try:
                await self.provider.hang_up(call_sid=self.call_sid)
            except ProviderError as exc:
                logger.warning("call %s: hang-up (%s) did not go through: %s", _short(self.call_sid), ending.value, exc)
        await self.consumer.close_once(1000, ending.value)
