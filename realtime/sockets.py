"""What every voice WebSocket consumer shares (the browser session, the phone media stream).

Every exit of a socket ends its conversation exactly once (`socket_gone`), with an ended reason:
- the client closed the socket (a close frame, any code): `completed`, caller-hung-up;
- the socket dropped without a close frame (1006): `failed`, connection-lost;
- the consumer itself failed (an exception in a handler, a cancel by the server, anything that
  leaves the dispatch loop): `failed`, error; server-shutdown when the server is stopping (kit.shutdown).
The ending runs at once (not at the session's idle watchdog), so the call is billed for the time
the socket lived. It runs in a task of its own, shielded: a server that cancels the consumer while
it ends (Daphne does after `application_close_timeout`) cannot leave the call record open.

A consumer that names a channel layer (the phone stream: Twilio's status callbacks reach it through
it) survives an outage of that layer (Redis restarting): a failing receive or group subscription
is logged once, retried with backoff, and the groups are joined again once it is back (a restarted
Redis without persistence has forgotten them). A consumer with `layer_beside` (the browser session:
its only layer message is an API hang-up) reads the layer in a task of its own beside the socket's
plain loop, so its audio frames never go through Channels' many-source loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass
from typing import Any

from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from channels.utils import await_many_dispatch

from calls.models import CallStatus, EndedReason
from kit import shutdown
from kit.text import unstorable_field

logger = logging.getLogger(__name__)

# RFC 6455 7.4.1: the peer went away without a closing handshake (a dropped network, a killed client).
ABNORMAL_CLOSURE = 1006
# Backoff of the channel layer's retries while it is unavailable.
LAYER_RETRY_FIRST_SECONDS = 0.2
LAYER_RETRY_MAX_SECONDS = 2.0
# How long leaving a group may take at the end of a call (a hung layer must not hold the socket).
LAYER_LEAVE_TIMEOUT_SECONDS = 2.0

BAD_JSON = object()  # what parse_json returns for a text that is not JSON
# Endings that outlive a cancelled consumer are referenced here until they have run.
_endings: set[asyncio.Task[None]] = set()


def call_control_group(call_id: Any) -> str:
    """The channel-layer group of a live browser session's call (by call record id): a hang-up asked
    for through the API (possibly in another process) is sent to it as `call.hangup`."""
    return f"call-id.{call_id}"


@dataclass(frozen=True)
class Unstorable:
    """A JSON message with a string (or key) that cannot be stored (kit.text: a lone surrogate, NUL):
    `field` is its path in the message (`text`, `start.callSid`), `reason` says why; `message` is the
    decoded value, for a consumer that names the field after the message's kind."""

    field: str
    reason: str
    message: Any

    def named(self, kind_key: str) -> str:
        """`field: reason`, the field prefixed with the message's kind (its `kind_key`: `type`, `event`)
        when that is a string that can be stored: `input_text.text: Must not contain ...`."""
        kind = self.message.get(kind_key) if isinstance(self.message, dict) else None
        field = self.field
        if isinstance(kind, str) and field not in (kind_key, "message") and unstorable_field(kind) is None:
            field = f"{kind}.{field}"
        return f"{field}: {self.reason}"


def parse_json(text: str) -> Any:
    """The JSON value of `text`; `BAD_JSON` when it is not JSON of any shape (including nesting deeper
    than the decoder's recursion limit, which raises RecursionError, not ValueError); `Unstorable` when
    a string in it cannot be stored. JSON's escapes let `"\\ud800"` and `"\\u0000"` through the
    decoder; a text frame is valid UTF-8, so without a `\\u` escape there is nothing to look for (an
    audio chunk is not walked)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return BAD_JSON
    if "\\u" in text and (found := unstorable_field(value)) is not None:
        field, reason = found
        if field == "body" and reason.startswith("A key"):  # a key of the message itself
            field = "message"
        return Unstorable(field=field, reason=reason, message=value)
    return value


class JsonSocketConsumer(AsyncWebsocketConsumer):
    """Sends JSON text messages and closes once. Sending on a socket that went away, or that this side
    closed, does nothing. Subclasses end their conversation in `socket_gone(status, reason)`, which runs once
    whatever way the socket ends."""

    _closed = False
    _ending: asyncio.Task[None] | None = None
    _layer_down = False  # the layer's last receive or group join failed
    _layer_delay = LAYER_RETRY_FIRST_SECONDS
    # Read the channel layer in a side task (the socket keeps its plain loop) instead of as a second source.
    layer_beside = False

    # --- the consumer's life ----------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        # channels.consumer.AsyncConsumer.__call__, with the layer's receive made resilient and every
        # exit of the dispatch loop ending the conversation.
        self.scope = scope
        self._layer_groups: set[str] = set()
        self._layer_tasks: set[asyncio.Task[Any]] = set()
        self.channel_layer = get_channel_layer(self.channel_layer_alias) if self.channel_layer_alias else None
        sources = [receive]
        if self.channel_layer is not None:
            self.channel_name = await self.channel_layer.new_channel()
            if self.layer_beside:
                self._track(asyncio.ensure_future(self._layer_side()))
            else:
                sources.append(self._layer_receive)
        self.base_send = send
        clean = False
        try:
            if len(sources) == 1:
                # One source (no channel layer: the browser session): a plain loop. Channels' general
                # loop makes a task and an asyncio.wait per message, for every 20 ms audio frame.
                while True:
                    await self.dispatch(await receive())
            await await_many_dispatch(sources, self.dispatch)
        except StopConsumer:
            clean = True
        finally:
            if not clean:
                # Whatever left the loop (an exception in a handler, a cancel), the call ends now, as
                # failed; the exception itself goes on to the server, which closes the socket 1011.
                reason = EndedReason.SERVER_SHUTDOWN if shutdown.under_way() else EndedReason.ERROR
                await self._end_once(CallStatus.FAILED, reason)
            await self._leave_layer()

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Channels closes the database connections of the sync thread before every message, a hop to
        # that thread each time: for a socket carrying 50 audio frames a second that hop was 28 % of a
        # loaded server's CPU (py-spy, 150 sessions). Frames never touch the database directly; what
        # the conversation writes goes through database_sync_to_async, which closes old connections
        # around each call itself. Connect and disconnect keep Channels' behaviour.
        if message.get("type") == "websocket.receive":
            await self.websocket_receive(message)
            return
        await super().dispatch(message)

    async def disconnect(self, code: int) -> None:
        if shutdown.under_way():
            await self._end_once(CallStatus.FAILED, EndedReason.SERVER_SHUTDOWN)
        elif code == ABNORMAL_CLOSURE:
            await self._end_once(CallStatus.FAILED, EndedReason.CONNECTION_LOST)
        else:
            await self._end_once(CallStatus.COMPLETED, EndedReason.CALLER_HUNG_UP)

    async def socket_gone(self, status: str, reason: str) -> None:
        """End the conversation (once): the socket is gone, or about to be (`reason`: an EndedReason)."""

    async def _end_once(self, status: str, reason: str) -> None:
        self._closed = True
        if self._ending is None:
            self._ending = asyncio.ensure_future(self.socket_gone(status, reason))
            _endings.add(self._ending)
            self._ending.add_done_callback(_endings.discard)
            self._ending.add_done_callback(_log_ending_failure)
        await asyncio.shield(self._ending)

    # --- sending ----------------------------------------------------------------------------------

    async def send_message(self, message: dict[str, Any]) -> None:
        if self._closed:
            return
        try:
            await self.send(text_data=json.dumps(message, separators=(",", ":")))
        except Exception:  # the socket went away under us
            logger.debug("send on a closed socket", exc_info=True)

    async def close_once(self, code: int, reason: str = "") -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self.close(code=code, reason=reason)
        except Exception:  # the socket is already gone
            logger.debug("close on a closed socket", exc_info=True)

    # --- the channel layer ------------------------------------------------------------------------

    async def join_group(self, group: str) -> None:
        """Subscribe to `group` for the life of the socket. A layer that is down does not fail the
        call: the subscription is retried in the background (and again after every outage)."""
        if self.channel_layer is None:
            return
        self._layer_groups.add(group)
        try:
            await self.channel_layer.group_add(group, self.channel_name)
        except Exception as exc:  # noqa: BLE001 - any failure of the layer is an outage to wait out
            self._layer_failed(exc)
            self._track(asyncio.ensure_future(self._rejoin()))

    async def _layer_receive(self) -> dict[str, Any]:
        """The next message of the channel layer; an outage is waited out, never raised."""
        assert self.channel_layer is not None
        while True:
            if self._layer_down:
                await self._layer_wait()
                if self._layer_down and self._layer_groups:
                    # Not back yet. A receive now could start just as the layer returns and block
                    # there, with the groups (forgotten by a restarted Redis) never joined again.
                    continue
            try:
                message = await self.channel_layer.receive(self.channel_name)
            except Exception as exc:  # noqa: BLE001 - any failure of the layer is an outage to wait out
                self._layer_failed(exc)
                continue
            self._layer_ok()
            return message

    async def _layer_side(self) -> None:
        """`layer_beside`: the layer's messages, dispatched as they come, until the socket ends."""
        while True:
            message = await self._layer_receive()
            try:
                await self.dispatch(message)
            except StopConsumer:
                return
            except Exception:
                logger.exception("a channel-layer message could not be handled (%s)", message.get("type"))

    async def _layer_wait(self) -> None:
        """Back off once, then join the groups again: both the sign that the layer is back and what a
        restarted Redis without persistence needs (it has forgotten them)."""
        assert self.channel_layer is not None
        await asyncio.sleep(self._layer_delay)
        self._layer_delay = min(self._layer_delay * 2, LAYER_RETRY_MAX_SECONDS)
        if not self._layer_groups:
            return  # nothing to join: the next receive tells
        try:
            for group in list(self._layer_groups):
                await self.channel_layer.group_add(group, self.channel_name)
        except Exception as exc:  # noqa: BLE001 - still down
            self._layer_failed(exc)
            return
        self._layer_ok()

    async def _rejoin(self) -> None:
        while self._layer_down:
            await self._layer_wait()

    def _layer_failed(self, exc: BaseException) -> None:
        if not self._layer_down:
            self._layer_down = True
            # One line per outage and socket, without a traceback: the layer's own error says enough.
            logger.warning("channel layer unavailable (%s: %s); retrying", type(exc).__name__, str(exc)[:200])

    def _layer_ok(self) -> None:
        self._layer_delay = LAYER_RETRY_FIRST_SECONDS
        if self._layer_down:
            self._layer_down = False
            # The groups by name (a call's names its call SID): a message sent to one before its line is lost.
            joined = ", ".join(sorted(self._layer_groups)) or "none"
            logger.warning("channel layer available again; groups joined again: %s", joined)

    def _track(self, task: asyncio.Task[Any]) -> None:
        self._layer_tasks.add(task)
        task.add_done_callback(self._layer_tasks.discard)

    async def _leave_layer(self) -> None:
        for task in list(getattr(self, "_layer_tasks", ())):
            task.cancel()
        if self.channel_layer is None:
            return
        for group in getattr(self, "_layer_groups", ()):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    self.channel_layer.group_discard(group, self.channel_name), LAYER_LEAVE_TIMEOUT_SECONDS
                )


def _log_ending_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("ending a conversation failed", exc_info=task.exception())
