"""The JSON messages of a browser session, both ways, whatever carries them: the browser socket's text
frames (realtime/consumers.py) or a WebRTC session's `events` data channel (realtime/webrtc/).

- `ClientMessages`: what the client sends (`input_text` within the typed-input budget, `stop`, and on the
  socket `input_audio`), one rule for both carriers: the same `error` codes and messages for a message that
  is too long, not JSON, holds a string that cannot be stored (realtime.sockets.parse_json) or is of an
  unknown kind, and the same flood rule (realtime.typed_input; docs/reference/realtime-protocol.md,
  "Typed input budget").
- `MessageTransport`: the engine's Transport as the messages the client is sent (`session.started`,
  `transcript`, `clear`, tool events, `transfer`, the shell's extra events); a carrier adds how agent audio
  travels (`send_audio`) and how the connection ends (`hang_up`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from calls.models import CallChannel, CallModality, CallStatus, EndedReason
from realtime.engine.audio import IN_BYTES_PER_SECOND
from realtime.engine.contracts import ToolCall, ToolOutcome, Transport
from realtime.engine.session.shell import Session, open_session
from realtime.services import OpenedSession
from realtime.sockets import BAD_JSON, Unstorable, parse_json
from realtime.typed_input import FLOOD_WINDOW_SECONDS, Refusal, TypedBudget, TypedLimits

# Largest decoded input_audio chunk (10 s of 16 kHz PCM16); larger ones get an `error`.
MAX_INPUT_CHUNK_BYTES = 10 * IN_BYTES_PER_SECOND
MAX_MESSAGE_CHARS = MAX_INPUT_CHUNK_BYTES * 4 // 3 + 1024
# A client that keeps flooding typed input past its refusals (realtime.typed_input) is closed with this.
CLOSE_TEXT_FLOOD = 4429

Send = Callable[[dict[str, Any]], Awaitable[None]]


class ClientMessages:
    """The messages one client sends during its session. `send` sends a message back (an `error`);
    `close(code, reason)` ends the connection (after `stop`, or a typed-input flood: the codes are the
    socket's close codes, which a carrier without them ignores); `audio` takes an `input_audio` message's
    `audio` value, None where audio travels otherwise (WebRTC's media track: `input_audio` is then an
    unknown kind); `text_only`: a typed session (modality text), which takes no audio."""

    def __init__(
        self,
        conversation: Session,
        *,
        send: Send,
        close: Callable[[int, str], Awaitable[None]],
        audio: Callable[[Any], Awaitable[None]] | None = None,
        text_only: bool = False,
    ) -> None:
        self.conversation = conversation
        self.send = send
        self.close = close
        self.audio = audio
        self.text_only = text_only
        self.typed = TypedBudget(TypedLimits.from_settings(), conversation.clock)  # what it may still type

    @classmethod
    def open(
        cls,
        opened: OpenedSession,
        transport: Transport,
        *,
        send: Send,
        close: Callable[[int, str], Awaitable[None]],
        audio: Callable[[Any], Awaitable[None]] | None = None,
    ) -> ClientMessages:
        """The conversation a spent session token opens over `transport` (a browser session: channel web,
        the variables, metadata and modality kept with the token), and the messages of its client."""
        conversation = open_session(
            agent=opened.agent,
            transport=transport,
            channel=CallChannel.WEB,
            variables=opened.variables,
            metadata=opened.metadata,
            modality=opened.modality,
        )
        text_only = opened.modality == CallModality.TEXT
        return cls(conversation, send=send, close=close, audio=audio, text_only=text_only)

    async def receive(self, text: str) -> None:
        """One text message of the client."""
        if len(text) > MAX_MESSAGE_CHARS:
            await self.error("bad_message", f"Messages are limited to {MAX_MESSAGE_CHARS} characters")
            return
        message = parse_json(text)
        if message is BAD_JSON:
            await self.error("bad_message", "Messages must be JSON objects")
            return
        if isinstance(message, Unstorable):  # a lone surrogate or NUL: nothing of it reaches the call
            await self.error("bad_message", message.named("type"))
            return
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "input_audio" and self.audio is not None:
            if self.text_only:
                await self.error("bad_message", "This is a text session: send input_text messages, not audio")
                return
            await self.audio(message.get("audio"))
        elif kind == "input_text":
            await self._input_text(message.get("text"))
        elif kind == "stop":
            await self.conversation.stop(CallStatus.COMPLETED, EndedReason.CALLER_HUNG_UP)
            await self.close(1000, "conversation ended")
        elif self.audio is None:
            await self.error("bad_message", "Unknown message type; expected input_text or stop (audio is on the track)")
        else:
            await self.error("bad_message", "Unknown message type; expected input_audio, input_text or stop")

    async def error(self, code: str, message: str) -> None:
        await self.send({"type": "error", "code": code, "message": message})

    async def _input_text(self, text: Any) -> None:
        """A typed caller turn (text and audio sessions alike): taken like a spoken one, once the session
        has started; it interrupts the agent like a barge-in. Within the budget only
        (realtime.typed_input): a turn over it is refused and the call goes on, and a client that keeps
        flooding is closed."""
        taken = self.typed.admit(text)
        if isinstance(taken, Refusal):
            await self.error(taken.code, taken.message)
            if taken.flooding:
                await self._flooded()
            return
        if await self.conversation.ready():
            await self.conversation.caller_text(taken)

    async def _flooded(self) -> None:
        """The client keeps sending typed turns past their refusals: the call ends (the client's doing,
        so completed, caller-hung-up) and the connection is closed with CLOSE_TEXT_FLOOD."""
        limits = self.typed.limits
        self.conversation.recorder.log(
            "warning", "typed input flood: the socket was closed", refused=self.typed.refused
        )
        await self.error(
            "text_flood",
            f"Too many refused input_text messages ({limits.flood_close} within "
            f"{FLOOD_WINDOW_SECONDS:g} s): the session is closed",
        )
        await self.conversation.stop(CallStatus.COMPLETED, EndedReason.CALLER_HUNG_UP)
        await self.close(CLOSE_TEXT_FLOOD, "typed input flood")


class MessageTransport:
    """The engine's Transport as the client's JSON messages, sent with `send`. `tool_events`: the session
    asked for events ["tool"] (tool.call / tool.result). A carrier adds `send_audio` and `hang_up`, and
    may do more when the session starts (join the call's control group)."""

    def __init__(self, send: Send, *, tool_events: bool = False) -> None:
        self.send = send
        self.tool_events = tool_events

    async def started(self, call_id: str) -> None:
        await self.send({"type": "session.started", "callId": call_id})

    async def clear(self) -> None:
        await self.send({"type": "clear"})

    async def send_transcript(self, role: str, text: str) -> None:
        await self.send({"type": "transcript", "role": role, "text": text})

    async def send_event(self, event: dict[str, Any]) -> None:
        await self.send(event)

    async def tool_called(self, call: ToolCall) -> None:
        if self.tool_events:
            await self.send({"type": "tool.call", "id": call.id, "name": call.name, "arguments": call.arguments})

    async def tool_returned(self, call: ToolCall, outcome: ToolOutcome, duration_ms: int) -> None:
        if not self.tool_events:
            return
        try:
            result: Any = json.loads(outcome.result)
        except ValueError:
            result = outcome.result
        await self.send(
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
        # (its page may offer to dial the number); hang_up(TRANSFERRED) ends the connection next.
        await self.send({"type": "transfer", "phoneNumber": destination})
