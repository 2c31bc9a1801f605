"""Scripted socket clients over a real WebSocket (aiohttp), for the socket tests and bench/.

`SocketClient` is the lifecycle they share (testing/twilio_stream.py's `TwilioStream` is the other);
`VoiceClient` speaks the browser protocol, streaming PCM in 20 ms chunks at real time like a
microphone; a reader task keeps every message with its arrival time. A URL under an in-process
server's `ws_url` (testing/inprocess.py, registered in `IN_PROCESS`) connects to the application in
the test's own event loop instead (the same messages, no network). `slow_client_close_code` is a
client on a slow network (a plain socket that stops reading for a while: the scenario's slow peer).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import socket
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Self

import aiohttp

from testing.voice import IN_RATE

CHUNK_MS = 20

# ws_url -> connect(url): the in-process servers running now (testing/inprocess.py). A client whose URL
# starts with one of them talks to that application in this event loop; any other URL is a real socket.
IN_PROCESS: dict[str, Callable[[str], Awaitable[Any]]] = {}


@dataclass
class Received:
    at: float  # loop time of arrival
    message: dict[str, Any]


async def first_matching(
    messages: list[Received],
    arrived: asyncio.Event,
    predicate: Callable[[dict[str, Any]], bool],
    *,
    after: int,
    timeout: float,
    ended: Callable[[], str | None],
) -> int:
    """Index of the first of `messages` from `after` on whose message matches, waiting on `arrived` (set
    by whoever appends) for more; ConnectionError with what `ended` says once the carrier has closed without
    one, TimeoutError after `timeout`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        for index in range(after, len(messages)):
            if predicate(messages[index].message):
                return index
        reason = ended()
        if reason is not None:
            raise ConnectionError(reason)
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise TimeoutError("no matching message")
        arrived.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(arrived.wait(), remaining)


class SocketClient:
    """The lifecycle every scripted socket client shares (the browser's `VoiceClient`, Twilio's
    `TwilioStream`): connect over aiohttp, a reader task that keeps every JSON message with its arrival
    time (`messages`, `on_message` for each), waiting for a message or the end, dropping the network, and
    closing. A subclass is a dataclass with `url`, `messages`, `on_message` and `close_code` fields and
    calls `__post_init__`; `arrived` is its hook on each message before `on_message`."""

    url: str
    messages: list[Received]
    on_message: Callable[[Received], None] | None
    close_code: int | None

    def __post_init__(self) -> None:
        self._arrived = asyncio.Event()
        self._session: aiohttp.ClientSession | None = None
        self._ws: Any = None  # aiohttp.ClientWebSocketResponse, or an in-process one (testing/inprocess.py)
        self._reader: asyncio.Task[None] | None = None
        self.close_error: BaseException | None = None  # why the socket ended without a close frame, if it did

    async def __aenter__(self) -> Self:
        connect = next((c for prefix, c in IN_PROCESS.items() if self.url.startswith(prefix + "/")), None)
        if connect is not None:
            self._ws = await connect(self.url)  # the aiohttp socket's interface (testing/inprocess.py)
        else:
            self._session = aiohttp.ClientSession()
            self._ws = await self._session.ws_connect(self.url, max_msg_size=0, heartbeat=None)
        self._reader = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._ws is not None and not self._ws.closed:
            await self._ws.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        await self.closed_reading()
        if self._session is not None:
            await self._session.close()

    def arrived(self, item: Received, loop: asyncio.AbstractEventLoop) -> None:
        """A subclass's own handling of each message (Twilio's playback buffer)."""

    async def closed_reading(self) -> None:
        """What a subclass ends once the reader has stopped, before the session closes."""

    async def _read(self) -> None:
        assert self._ws is not None
        loop = asyncio.get_running_loop()
        async for raw in self._ws:
            if raw.type != aiohttp.WSMsgType.TEXT:
                continue
            item = Received(at=loop.time(), message=json.loads(raw.data))
            self.messages.append(item)
            self.arrived(item, loop)
            if self.on_message is not None:
                self.on_message(item)
            self._arrived.set()
        self.close_code = self._ws.close_code
        self.close_error = self._ws.exception()
        self._arrived.set()

    @property
    def closed(self) -> bool:
        return self._reader is not None and self._reader.done()

    async def send(self, message: dict[str, Any]) -> None:
        assert self._ws is not None
        await self._ws.send_str(json.dumps(message))

    async def send_raw(self, data: str | bytes) -> None:
        assert self._ws is not None
        if isinstance(data, bytes):
            await self._ws.send_bytes(data)
        else:
            await self._ws.send_str(data)

    async def drop(self) -> int | None:
        """The client's network goes away: the TCP connection ends without a WebSocket close frame
        (the server sees 1006). Returns once the reader has seen the end."""
        assert self._ws is not None
        if hasattr(self._ws, "drop"):  # in-process: the application is told the connection ended (1006)
            await self._ws.drop()
        sock = self._ws.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        if self._reader is not None:
            await asyncio.wait([self._reader], timeout=10)
        return self.close_code

    async def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], *, after: int = 0, timeout: float = 30
    ) -> int:
        """Index of the first message from `after` on that matches; TimeoutError otherwise."""
        return await first_matching(
            self.messages,
            self._arrived,
            predicate,
            after=after,
            timeout=timeout,
            ended=lambda: f"socket closed ({self.close_code}) while waiting" if self.closed else None,
        )

    async def wait_closed(self, timeout: float = 30) -> int | None:
        assert self._reader is not None
        await asyncio.wait_for(asyncio.shield(self._reader), timeout)
        return self.close_code


@dataclass
class VoiceClient(SocketClient):
    """A browser-like client speaking the browser protocol."""

    url: str
    messages: list[Received] = field(default_factory=list)
    close_code: int | None = None
    on_message: Callable[[Received], None] | None = None
    chunk_ms: int = CHUNK_MS

    async def send_audio(self, pcm16_16k: bytes) -> None:
        await self.send({"type": "input_audio", "audio": base64.b64encode(pcm16_16k).decode("ascii")})

    async def send_text(self, text: str) -> None:
        """A typed caller turn (docs/guides/typed-sessions.md)."""
        await self.send({"type": "input_text", "text": text})

    async def stream(self, pcm16_16k: bytes, *, stop_when: Callable[[], bool] | None = None) -> float:
        """Send audio in chunk_ms chunks (20 ms unless set) at real time, each chunk once its audio has
        been "recorded"; returns the loop time at which the last chunk's audio ends."""
        loop = asyncio.get_running_loop()
        size = IN_RATE * 2 * self.chunk_ms // 1000
        start = loop.time()
        for index, offset in enumerate(range(0, len(pcm16_16k), size)):
            if stop_when is not None and stop_when():
                return loop.time()
            delay = start + index * self.chunk_ms / 1000 - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            await self.send_audio(pcm16_16k[offset : offset + size])
        end = start + len(pcm16_16k) / (IN_RATE * 2)
        await asyncio.sleep(max(0.0, end - loop.time()))  # a microphone cannot run ahead of time
        return end

    def audio(self, start: int = 0, end: int | None = None) -> bytes:
        return b"".join(
            base64.b64decode(item.message["audio"])
            for item in self.messages[start:end]
            if item.message.get("type") == "output_audio"
        )


def is_type(kind: str, **fields: Any) -> Callable[[dict[str, Any]], bool]:
    return lambda message: message.get("type") == kind and all(message.get(k) == v for k, v in fields.items())


def slow_client_close_code(url: str, *, unread_seconds: float) -> int:
    """A client on a slow network, on a plain socket with a small receive buffer: it opens the session,
    waits for `session.started`, then reads nothing for `unread_seconds` while the greeting's audio
    queues up on the server's side of the connection, sends `stop`, reads nothing for `unread_seconds`
    more, then reads on to the close frame; returns the close code it read (ConnectionError when the
    server reset the connection before the close frame reached it)."""
    parts = urllib.parse.urlsplit(url)
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(60)
        sock.connect((parts.hostname, parts.port))
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall(
            f"GET {parts.path}?{parts.query} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        stream = sock.makefile("rb")
        assert b" 101 " in stream.readline()
        while stream.readline() not in (b"\r\n", b""):
            pass

        def frame() -> tuple[int, bytes]:
            head = stream.read(2)
            if len(head) < 2:
                raise ConnectionError("the connection ended without a close frame")
            length = head[1] & 0x7F
            if length >= 126:
                length = int.from_bytes(stream.read(2 if length == 126 else 8), "big")
            return head[0] & 0x0F, stream.read(length)

        while b"session.started" not in frame()[1]:
            pass
        time.sleep(unread_seconds)
        stop = json.dumps({"type": "stop"}).encode()
        mask = os.urandom(4)
        sock.sendall(bytes([0x81, 0x80 | len(stop)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(stop)))
        time.sleep(unread_seconds)
        while (opcode_payload := frame())[0] != 8:
            pass
        return int.from_bytes(opcode_payload[1][:2], "big")
