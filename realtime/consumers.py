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
import json
import logging
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async

from calls.models import CallChannel, CallModality, CallStatus, EndedReason
from realtime import tokens
from realtime.engine.audio import IN_BYTES_PER_SECOND, OUT_RATE
from realtime.engine.contracts import Ending, ToolCall, ToolOutcome
from realtime.engine.session.shell import Session, open_session
from realtime.services import realtime_session_open
from realtime.sockets import BAD_JSON, JsonSocketConsumer, Unstorable, call_control_group, parse_json
from realtime.typed_input import FLOOD_WINDOW_SECONDS, Refusal, TypedBudget, TypedLimits

logger = logging.getLogger(__name__)

# Largest decoded input_audio chunk (10 s of 16 kHz PCM16); larger ones get an `error`.
MAX_INPUT_CHUNK_BYTES = 10 * IN_BYTES_PER_SECOND
MAX_MESSAGE_CHARS = MAX_INPUT_CHUNK_BYTES * 4 // 3 + 1024
# A client that keeps flooding typed input past its refusals (realtime.typed_input) is closed with this.
CLOSE_TEXT_FLOOD = 4429


class BrowserSession(JsonSocketConsumer):
    # The channel layer carries only an API hang-up (POST /calls/{id}/hang-up, possibly from another
    # process) to the call's group: read beside the socket's plain loop, and an outage of the layer is
    # waited out (realtime.sockets), never closing the session.
    layer_beside = True
    conversation: Session | None = None
    _run: asyncio.Task[None] | None = None
    text_only = False  # a typed session (modality text)
    typed: TypedBudget | None = None  # what the socket may still type

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
        self.text_only = opened.modality == CallModality.TEXT
        self.conversation = open_session(
            agent=opened.agent,
            transport=_BrowserTransport(self, tool_events="tool" in opened.events),
            channel=CallChannel.WEB,
            variables=opened.variables,
            metadata=opened.metadata,
            modality=opened.modality,
        )
        self.typed = TypedBudget(TypedLimits.from_settings(), self.conversation.clock)
        self._run = asyncio.create_task(
            self.conversation.run(), name=f"conversation-{self.conversation.recorder.session_id}"
        )

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.conversation is None or self._closed:
            return
        if text_data is None:
            await self._error("bad_message", "Binary frames are not supported; send JSON text messages")
            return
        if len(text_data) > MAX_MESSAGE_CHARS:
            await self._error("bad_message", f"Messages are limited to {MAX_MESSAGE_CHARS} characters")
            return
        message = parse_json(text_data)
        if message is BAD_JSON:
            await self._error("bad_message", "Messages must be JSON objects")
            return
        if isinstance(message, Unstorable):  # a lone surrogate or NUL: nothing of it reaches the call
            await self._error("bad_message", message.named("type"))
            return
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "input_audio":
            if self.text_only:
                await self._error("bad_message", "This is a text session: send input_text messages, not audio")
                return
            await self._input_audio(message.get("audio"))
        elif kind == "input_text":
            await self._input_text(message.get("text"))
        elif kind == "stop":
            await self.conversation.stop(CallStatus.COMPLETED, EndedReason.CALLER_HUNG_UP)
            await self.close_once(1000, "conversation ended")
        else:
            await self._error("bad_message", "Unknown message type; expected input_audio, input_text or stop")

    async def _input_text(self, text: Any) -> None:
        """A typed caller turn (text and audio sessions alike): taken like a spoken one, once the session
        has started; it interrupts the agent like a barge-in. Within the socket's budget only
        (realtime.typed_input): a turn over it is refused and the call goes on, and a client that keeps
        flooding is closed."""
        assert self.conversation is not None and self.typed is not None
        taken = self.typed.admit(text)
        if isinstance(taken, Refusal):
            await self._error(taken.code, taken.message)
            if taken.flooding:
                await self._flooded()
            return
        if await self.conversation.ready():
            await self.conversation.caller_text(taken)

    async def _flooded(self) -> None:
        """The client keeps sending typed turns past their refusals: the call ends (the client's doing,
        so completed, caller-hung-up) and the socket is closed with CLOSE_TEXT_FLOOD."""
        assert self.conversation is not None and self.typed is not None
        limits = self.typed.limits
        self.conversation.recorder.log(
            "warning", "typed input flood: the socket was closed", refused=self.typed.refused
        )
        await self._error(
            "text_flood",
            f"Too many refused input_text messages ({limits.flood_close} within "
            f"{FLOOD_WINDOW_SECONDS:g} s): the session is closed",
        )
        await self.conversation.stop(CallStatus.COMPLETED, EndedReason.CALLER_HUNG_UP)
        await self.close_once(CLOSE_TEXT_FLOOD, "typed input flood")

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


class _BrowserTransport:
    """The engine's Transport over the browser socket."""

    def __init__(self, consumer: BrowserSession, *, tool_events: bool = False) -> None:
        self.consumer = consumer
        self.tool_events = tool_events  # the session asked for events ["tool"]: tool.call / tool.result

    async def started(self, call_id: str) -> None:
        await self.consumer.send_message({"type": "session.started", "callId": call_id})
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

    async def clear(self) -> None:
        await self.consumer.send_message({"type": "clear"})

    async def send_transcript(self, role: str, text: str) -> None:
        await self.consumer.send_message({"type": "transcript", "role": role, "text": text})

    async def send_event(self, event: dict[str, Any]) -> None:
        await self.consumer.send_message(event)

    async def tool_called(self, call: ToolCall) -> None:
        if self.tool_events:
            await self.consumer.send_message(
                {"type": "tool.call", "id": call.id, "name": call.name, "arguments": call.arguments}
            )

    async def tool_returned(self, call: ToolCall, outcome: ToolOutcome, duration_ms: int) -> None:
        if not self.tool_events:
            return
        try:
            result: Any = json.loads(outcome.result)
        except ValueError:
            result = outcome.result
        await self.consumer.send_message(
            {
                "type": "tool.result",
                "id": call.id,
                "name": call.name,
                "result": result,
                "durationMs": duration_ms,
                "status": outcome.status,
            }
        )

    async def transfer(self, destination: str) -> None:
        # A browser cannot be bridged to a phone line: the client is told where the caller is sent
        # (its page may offer to dial the number); hang_up(TRANSFERRED) closes the socket next.
        await self.consumer.send_message({"type": "transfer", "phoneNumber": destination})

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
