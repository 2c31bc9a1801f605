"""The browser transport: a WebSocket speaking the JSON messages of the spec, in front of the engine.

The consumer only translates: it checks the session token, turns `input_audio` into PCM for the
engine (and `input_text` into a typed caller turn) and the engine's calls (`send_audio`, `clear`,
`send_transcript`, tool events) into JSON messages. A session opened with `"modality": "text"` (docs/guides/typed-sessions.md) takes only `input_text` and sends no audio. A message with a string that cannot be stored
(a lone surrogate, NUL: realtime.sockets.parse_json) is a `bad_message` naming the field, and typed turns
are taken within the socket's budget (realtime.typed_input; docs/reference/realtime-protocol.md, "Typed input budget").
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async

from calls.models import CallStatus, EndedReason
from realtime import tokens
from realtime.engine.audio import OUT_RATE
from realtime.engine.contracts import Ending
from realtime.engine.session.shell import Session
from realtime.services import realtime_session_open
from realtime.session_messages import MAX_INPUT_CHUNK_BYTES, ClientMessages, MessageTransport
from realtime.sockets import JsonSocketConsumer, call_control_group

logger = logging.getLogger(__name__)


class BrowserSession(JsonSocketConsumer):
    # The channel layer carries only an API hang-up (POST /calls/{id}/hang-up, possibly from another
    # process) to the call's group: read beside the socket's plain loop, and an outage of the layer is
    # waited out (realtime.sockets), never closing the session.
    layer_beside = True
    conversation: Session | None = None
    _run: asyncio.Task[None] | None = None
    messages: ClientMessages | None = None  # what the client sends (realtime.session_messages)

    async def connect(self) -> None:
        # Accept first: a close code (and the `error` message before it) can only be sent on an open socket.
        await self.accept()
        agent_id = self.scope["url_route"]["kwargs"]["agent_id"]
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        token = (query.get("token") or [None])[0]
        try:
            opened = await database_sync_to_async(realtime_session_open)(token=token, agent_id=agent_id)
        except tokens.TokenError as exc:
            await self.send_message(
                {"type": "error", "code": _TOKEN_ERROR_CODES[exc.close_code], "message": exc.message}
            )
            await self.close(code=exc.close_code, reason=exc.message)
            self._closed = True
            return
        except Exception:
            logger.exception("could not open a realtime session")
            await self._error("server_error", "The session could not be opened")
            await self.close_once(tokens.CLOSE_ENGINE_ERROR, "server error")
            return
        self.messages = ClientMessages.open(
            opened,
            _BrowserTransport(self, tool_events="tool" in opened.events),
            send=self.send_message,
            close=self.close_once,
            audio=self._input_audio,
        )
        self.conversation = self.messages.conversation
        self._run = asyncio.create_task(
            self.conversation.run(), name=f"conversation-{self.conversation.recorder.session_id}"
        )

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.messages is None or self._closed:
            return
        if text_data is None:
            await self._error("bad_message", "Binary frames are not supported; send JSON text messages")
            return
        await self.messages.receive(text_data)

    async def _input_audio(self, audio: Any) -> None:
        if not isinstance(audio, str):
            await self._error("bad_audio", "input_audio.audio must be a base64 string")
            return
        if len(audio) > MAX_INPUT_CHUNK_BYTES * 4 // 3 + 4:
            await self._error("bad_audio", f"input_audio chunks are limited to {MAX_INPUT_CHUNK_BYTES} bytes")
            return
        try:
            pcm = base64.b64decode(audio, validate=True)
        except (binascii.Error, ValueError):
            await self._error("bad_audio", "input_audio.audio is not valid base64")
            return
        if len(pcm) % 2:
            await self._error("bad_audio", "input_audio must be whole PCM16 samples (an even number of bytes)")
            return
        assert self.conversation is not None
        if not self.conversation.push_audio(pcm):
            await self._error("input_too_fast", "input_audio arrives faster than real time; chunk dropped")

    async def socket_gone(self, status: str, reason: str) -> None:
        if self.conversation is not None:
            await self.conversation.stop(status, reason)
        if self._run is not None:
            await asyncio.gather(self._run, return_exceptions=True)

    async def call_hangup(self, event: dict[str, Any]) -> None:
        """A hang-up asked for through the API (telephony.outbound.services.call_hang_up): the service ends the
        call, so agent-ended-call."""
        if self.conversation is not None:
            await self.conversation.stop(CallStatus.COMPLETED, EndedReason.AGENT_ENDED_CALL)
        await self.close_once(1000, "call ended")

    async def _error(self, code: str, message: str) -> None:
        await self.send_message({"type": "error", "code": code, "message": message})


_TOKEN_ERROR_CODES = {
    tokens.CLOSE_INVALID_TOKEN: "invalid_token",
    tokens.CLOSE_WRONG_AGENT: "wrong_agent",
    tokens.CLOSE_NOT_FOUND: "agent_not_found",
    tokens.CLOSE_CONFLICT: "conflict",
    tokens.CLOSE_NOT_CONFIGURED: "not_configured",
}


class _BrowserTransport(MessageTransport):
    """The engine's Transport over the browser socket: the session's messages (realtime.session_messages),
    agent audio as `output_audio` messages, endings as close codes."""

    def __init__(self, consumer: BrowserSession, *, tool_events: bool = False) -> None:
        super().__init__(consumer.send_message, tool_events=tool_events)
        self.consumer = consumer

    async def started(self, call_id: str) -> None:
        await super().started(call_id)
        await self.consumer.join_group(call_control_group(call_id))  # an API hang-up reaches it there

    async def send_audio(self, pcm16_24k: bytes) -> None:
        await self.consumer.send_message(
            {
                "type": "output_audio",
                "audio": base64.b64encode(pcm16_24k).decode("ascii"),
                "encoding": "pcm16",
                "sampleRate": OUT_RATE,
            }
        )

    async def hang_up(self, ending: Ending, message: str = "") -> None:
        if ending == Ending.FAILED:
            await self.consumer._error("engine_error", message or "The conversation engine failed")
        code, reason = _CLOSE_CODES[ending]
        await self.consumer.close_once(code, reason)


# How each ending of a conversation closes the browser socket.
_CLOSE_CODES = {
    Ending.COMPLETED: (1000, "conversation ended"),
    Ending.TRANSFERRED: (1000, "transferred"),
    Ending.IDLE: (4408, "no caller audio"),
    Ending.FAILED: (tokens.CLOSE_ENGINE_ERROR, "engine error"),
}
