"""A scripted speech-to-speech provider speaking the OpenAI Realtime WebSocket protocol, on loopback,
for the VOICE_ENGINE=speech-to-speech tests (a test double: it follows the protocol, it does not think).

    provider = ProviderServer(CallTool("check_order", {"order": "42"}), Say("It shipped yesterday."))
    async with provider:                   # on the test's loop (pipeline tests)
    with provider:                         # or on a loop of its own in a thread (a Daphne process calls it)
        ... REALTIME_PROVIDER_URL = provider.url ...

Each connection (`provider.connections`) records the handshake (path, query, headers) and every client
event, and counts the caller audio appended. It sends `session.created` first. A `response.create`
whose instructions say "Say exactly ... "<text>"" is answered by saying <text>; any other
`response.create` takes the next script item (`Say`, `CallTool`, `Fail`, `HangUp`), then `fallback`.
A test plays the caller's side with `caller_turn` (speech_started, speech_stopped, committed, the
provider's own response as server VAD would create it, then the late input transcription) and
`speech_started` (a barge-in), or sends any event with `send` (through `run`, or `run_sync` from a
thread without an event loop). `response.cancel` stops the running
response (`response.done` with status cancelled). Audio is a tone of WORD_MS per word, or eSpeak NG
speech at 24 kHz (`Say(speech=True)`); `beta=True` uses the older beta event names.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from aiohttp import ClientConnectionResetError, WSMsgType, web

from testing.servers import ScriptedServer
from testing.waiting import polled

WORD_MS = 100
RATE = 24000


@dataclass(frozen=True)
class Say:
    text: str
    speech: bool = False  # eSpeak NG speech instead of a tone
    delta_ms: int = 100  # audio per delta
    pace: float = 0.0  # wall-clock seconds between deltas (0: as fast as possible)
    usage: tuple[int, int] = (120, 60)
    transcript: bool = True  # send the transcript events


@dataclass(frozen=True)
class CallTool:
    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    call_id: str = ""
    usage: tuple[int, int] = (100, 20)


@dataclass(frozen=True)
class Fail:
    message: str = "The server had an error while processing your request."
    code: str = "server_error"


@dataclass(frozen=True)
class HangUp:
    pass


Reply = Say | CallTool | Fail | HangUp


def tone(ms: int, amplitude: int = 3000) -> bytes:
    samples = np.arange(RATE * ms // 1000)
    wave = amplitude * np.sin(2 * np.pi * 440 * samples / RATE)
    return wave.astype("<i2").tobytes()


def audio_for(reply: Say) -> bytes:
    if reply.speech:
        from realtime.engine.speech.espeak import synthesize

        return synthesize(reply.text, language="en-US", voice_name="eve")
    return tone(WORD_MS * len(reply.text.split()))


class Connection:
    def __init__(self, server: ProviderServer, request: web.Request, ws: web.WebSocketResponse) -> None:
        self.server = server
        self.path = request.path
        self.query = dict(request.query)
        self.headers = {key.lower(): value for key, value in request.headers.items()}
        self.ws = ws
        self.received: list[dict[str, Any]] = []
        self.appended_bytes = 0
        self.append_times: list[float] = []  # time.monotonic() at each append's arrival (bench)
        self.append_ends: list[int] = []  # appended_bytes after each append (bench: which audio it carried)
        self.first_audio_times: list[float] = []  # time.monotonic() before each response's first delta
        self.active: asyncio.Task[None] | None = None
        self.closed = False

    # --- inspection ----------------------------------------------------------------------------
    def events(self, kind: str) -> list[dict[str, Any]]:
        return [event for event in self.received if event.get("type") == kind]

    @property
    def session(self) -> dict[str, Any]:
        """The last session.update's session."""
        updates = self.events("session.update")
        return updates[-1]["session"] if updates else {}

    # --- the caller's side, played by the test -------------------------------------------------
    async def send(self, event: dict[str, Any]) -> None:
        """Send `event` unless the service has gone: a socket it is closing (as a real provider's
        would) takes nothing more, and a response still streaming then ends quietly."""
        if not self.ws.closed:
            event.setdefault("event_id", f"event_{next(self.server.ids)}")
            with contextlib.suppress(ClientConnectionResetError):
                await self.ws.send_str(json.dumps(event))

    async def speech_started(self) -> None:
        await self.send({"type": "input_audio_buffer.speech_started", "audio_start_ms": 0, "item_id": "item_user"})

    async def caller_turn(self, transcript: str, reply: Reply | None = None) -> None:
        """The caller spoke: VAD events, the provider's own answer (started before the transcript is
        ready, as real servers do), then the input transcription."""
        item_id = f"item_user_{next(self.server.ids)}"
        await self.send({"type": "input_audio_buffer.speech_started", "audio_start_ms": 0, "item_id": item_id})
        await self.send({"type": "input_audio_buffer.speech_stopped", "audio_end_ms": 900, "item_id": item_id})
        await self.send({"type": "input_audio_buffer.committed", "item_id": item_id})
        answered = asyncio.Event()
        self._start(reply or self.server.next_reply(), created=answered)
        await answered.wait()
        await self.send(
            {
                "type": "conversation.item.input_audio_transcription.completed",
                "item_id": item_id,
                "content_index": 0,
                "transcript": transcript,
            }
        )

    async def hang_up(self) -> None:
        await self.ws.close()

    # --- the provider's answers ----------------------------------------------------------------
    def _start(self, reply: Reply, created: asyncio.Event | None = None, metadata: Any = None) -> None:
        self.active = asyncio.create_task(self._respond(reply, created or asyncio.Event(), metadata))

    async def _respond(self, reply: Reply, created: asyncio.Event, metadata: Any = None) -> None:
        names = self.server.names
        response_id = f"resp_{next(self.server.ids)}"
        if isinstance(reply, Fail):
            created.set()
            await self.send(
                {"type": "error", "error": {"type": "server_error", "code": reply.code, "message": reply.message}}
            )
            return
        if isinstance(reply, HangUp):
            created.set()
            await self.ws.close()
            return
        await self.send(
            {"type": "response.created", "response": {"id": response_id, "status": "in_progress", "metadata": metadata}}
        )
        created.set()
        status, output, usage = "completed", [], (0, 0)
        try:
            if isinstance(reply, CallTool):
                usage = reply.usage
                arguments = reply.arguments if isinstance(reply.arguments, str) else json.dumps(reply.arguments)
                call = {
                    "type": "function_call",
                    "id": f"item_{next(self.server.ids)}",
                    "call_id": reply.call_id or f"call_{next(self.server.ids)}",
                    "name": reply.name,
                    "arguments": arguments,
                }
                await self.send({"type": "response.output_item.added", "response_id": response_id, "item": call})
                await self.send(
                    {
                        "type": "response.function_call_arguments.done",
                        "response_id": response_id,
                        "item_id": call["id"],
                        "call_id": call["call_id"],
                        "name": reply.name,
                        "arguments": arguments,
                    }
                )
                output = [call]
            else:
                usage = reply.usage
                item_id = f"item_{next(self.server.ids)}"
                base = {"response_id": response_id, "item_id": item_id, "output_index": 0, "content_index": 0}
                await self.send(
                    {"type": "response.output_item.added", "response_id": response_id, "item": {"id": item_id}}
                )
                audio = audio_for(reply)
                size = RATE * 2 * reply.delta_ms // 1000
                deltas = [audio[start : start + size] for start in range(0, len(audio), size)]
                words = reply.text.split(" ")
                sent_words = 0
                self.first_audio_times.append(time.monotonic())
                for number, delta in enumerate(deltas, start=1):
                    due = len(words) * number // len(deltas)
                    if reply.transcript and due > sent_words:
                        piece = " ".join(words[sent_words:due])
                        await self.send(
                            {"type": names["transcript.delta"], **base, "delta": (" " if sent_words else "") + piece}
                        )
                        sent_words = due
                    await self.send({"type": names["audio.delta"], **base, "delta": base64.b64encode(delta).decode()})
                    if reply.pace:
                        await asyncio.sleep(reply.pace)
                await self.send({"type": names["audio.done"], **base})
                if reply.transcript:
                    await self.send({"type": names["transcript.done"], **base, "transcript": reply.text})
                output = [{"type": "message", "id": item_id, "role": "assistant"}]
        except asyncio.CancelledError:
            status = "cancelled"
        total = usage[0] + usage[1]
        await self.send(
            {
                "type": "response.done",
                "response": {
                    "id": response_id,
                    "status": status,
                    "output": output,
                    "usage": {
                        "total_tokens": total,
                        "input_tokens": usage[0],
                        "output_tokens": usage[1],
                        "input_token_details": {"text_tokens": usage[0] // 2, "audio_tokens": usage[0] - usage[0] // 2},
                        "output_token_details": {
                            "text_tokens": usage[1] // 4,
                            "audio_tokens": usage[1] - usage[1] // 4,
                        },
                    },
                },
            }
        )

    async def handle(self, event: dict[str, Any]) -> None:
        self.received.append(event)
        self.server.arrived.notify()
        kind = event.get("type")
        if kind == "input_audio_buffer.append":
            self.append_times.append(time.monotonic())
            self.appended_bytes += len(base64.b64decode(event.get("audio") or ""))
            self.append_ends.append(self.appended_bytes)
        elif kind == "session.update":
            await self.send({"type": "session.updated", "session": event.get("session")})
        elif kind == "response.create":
            if self.active is not None and not self.active.done():
                await self.send(
                    {
                        "type": "error",
                        "error": {
                            "type": "invalid_request_error",
                            "code": "conversation_already_has_active_response",
                            "message": "Conversation already has an active response in progress.",
                            "event_id": event.get("event_id"),
                        },
                    }
                )
                return
            body = event.get("response") or {}
            instructions = body.get("instructions") or ""
            quoted = re.search(r'"(.*)"', instructions, re.S)
            metadata = body.get("metadata")
            if instructions.startswith("Say exactly") and quoted:
                self._start(Say(quoted.group(1), speech=self.server.speech), metadata=metadata)
            else:
                self._start(self.server.next_reply(), metadata=metadata)
        elif kind == "response.cancel":
            if self.active is not None and not self.active.done():
                self.active.cancel()
        elif kind == "conversation.item.truncate":
            await self.send({"type": "conversation.item.truncated", **{k: v for k, v in event.items() if k != "type"}})


class ProviderServer(ScriptedServer):
    thread_name = "realtime-provider"

    def __init__(self, *script: Reply, fallback: Reply | None = None, speech: bool = False, beta: bool = False) -> None:
        super().__init__()
        self.script_items: list[Reply] = list(script)
        self.fallback = fallback or Say("Okay.")
        self.speech = speech  # scripted greetings as eSpeak NG speech
        self.connections: list[Connection] = []
        self.ids = itertools.count(1)
        prefix = "response.audio" if beta else "response.output_audio"
        self.names = {
            "audio.delta": f"{prefix}.delta",
            "audio.done": f"{prefix}.done",
            "transcript.delta": f"{prefix.replace('audio', 'audio_transcript')}.delta",
            "transcript.done": f"{prefix.replace('audio', 'audio_transcript')}.done",
        }

    @property
    def url(self) -> str:
        """The value for REALTIME_PROVIDER_URL."""
        return f"ws://127.0.0.1:{self.port}/v1/realtime"

    @property
    def last(self) -> Connection:
        return self.connections[-1]

    def script(self, *items: Reply) -> ProviderServer:
        self.script_items.extend(items)
        return self

    def next_reply(self) -> Reply:
        return self.script_items.pop(0) if self.script_items else self.fallback

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        connection = Connection(self, request, ws)
        self.connections.append(connection)
        self.arrived.notify()
        await connection.send({"type": "session.created", "session": {"id": f"sess_{next(self.ids)}"}})
        async for message in ws:
            if message.type == WSMsgType.TEXT:
                await connection.handle(json.loads(message.data))
        connection.closed = True
        self.arrived.notify()
        if connection.active is not None:
            connection.active.cancel()
        return ws

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/v1/realtime", self._socket)

    async def before_stop(self) -> None:
        for connection in self.connections:
            with contextlib.suppress(Exception):
                await connection.ws.close()


async def eventually(predicate: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    """Wait for a condition met by another task or server (network events: no clock to drive): the testing
    kit's `polled`, read often (a provider event is a few milliseconds away)."""
    await polled(predicate, what=what, timeout=timeout, every=0.005)


__all__ = ["CallTool", "Fail", "HangUp", "ProviderServer", "Say", "eventually", "tone"]
