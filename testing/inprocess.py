"""The project's ASGI application served in the test's own event loop: no process, no port, no network.

`InProcessServer` has what the end-to-end tests use of a Daphne server (testing/daphne.py): `http_url`
and `ws_url`, so `socket_url`, `conversation` and `VoiceClient` work unchanged (a client whose URL starts
with `ws_url` talks to the application through Channels' `WebsocketCommunicator`, testing/clients.py);
HTTP goes through the same application (`request`/`arequest`, or `http()`/`ahttp()`: httpx clients
over ASGI). The settings a module's server would take from its environment are Django settings for the
test (pytest-django's `settings` fixture): the ones every test server has (`start_test_server`) and the
module's own (`settings_for`). Tests reach the database with transactional_db, as with a real server:
the application's database work runs in its own threads. No background worker starts (voiceagent/asgi.py
starts them, not `make_application`): as on a test server (`start_test_server`), call events are recorded
and not sent, no scheduler or dispatcher runs, and agent-log lines wait for `flush_agent_logs()` (the
tests' settings).

What it cannot stand in for: a server killed or restarted, a proxy in front, several processes, a
browser loading pages from a real port, and the server's own HTTP handling (voiceagent/server.py: large
bodies kept on disk, upload slots, the closing handshake's timeout). Those tests keep a real server.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import httpx
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator

from kit.storage import storage_from_url
from testing.clients import IN_PROCESS
from testing.daphne import SECRET

_numbers = itertools.count(1)


@dataclass
class _Frame:
    """A message as aiohttp's socket yields it (`type`, `data`)."""

    type: aiohttp.WSMsgType
    data: Any


class CommunicatorSocket:
    """The part of aiohttp's client socket that testing/clients.py uses, over a `WebsocketCommunicator`:
    what the application sends is read as it comes; a close from the application is answered with the
    disconnect Daphne would send it (its handlers run as under Daphne); a close from the client is a
    disconnect with 1000, `drop` one with 1006 (the network went away)."""

    def __init__(self, communicator: WebsocketCommunicator) -> None:
        self.communicator = communicator
        self.close_code: int | None = None
        self._ended = False
        self._error: BaseException | None = None

    @property
    def closed(self) -> bool:
        return self._ended

    def exception(self) -> BaseException | None:
        return self._error

    def get_extra_info(self, name: str) -> Any:
        return None

    async def send_str(self, data: str) -> None:
        if not self._ended:
            await self.communicator.send_input({"type": "websocket.receive", "text": data})

    async def send_bytes(self, data: bytes) -> None:
        if not self._ended:
            await self.communicator.send_input({"type": "websocket.receive", "bytes": data})

    async def _output(self) -> dict[str, Any] | None:
        """The application's next message, or None once it has returned (raising what it raised)."""
        future = self.communicator.future
        getting = asyncio.ensure_future(self.communicator.output_queue.get())
        try:
            await asyncio.wait([getting, future], return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not getting.done():
                getting.cancel()
        if getting.done() and not getting.cancelled():
            return getting.result()
        if not future.cancelled() and future.exception() is not None:
            self._error = future.exception()
        return None

    def __aiter__(self) -> AsyncIterator[_Frame]:
        return self._frames()

    async def _frames(self) -> AsyncIterator[_Frame]:
        while not self._ended:
            output = await self._output()
            if output is None:
                self._end(self.close_code or 1006)
                return
            if output["type"] == "websocket.send":
                if output.get("text") is not None:
                    yield _Frame(aiohttp.WSMsgType.TEXT, output["text"])
                else:
                    yield _Frame(aiohttp.WSMsgType.BINARY, output.get("bytes"))
            elif output["type"] == "websocket.close":
                code = output.get("code") or 1000
                self._end(code)
                await self._disconnect(code)

    def _end(self, code: int) -> None:
        if not self._ended:
            self._ended = True
            self.close_code = code

    async def _disconnect(self, code: int) -> None:
        """Tell the application the connection is gone, and let it finish (as Daphne does)."""
        future = self.communicator.future
        if future.done():
            return
        await self.communicator.send_input({"type": "websocket.disconnect", "code": code})
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(future), 30)

    async def close(self) -> None:
        if self._ended:
            return
        self._end(1000)
        await self._disconnect(1000)

    async def drop(self) -> None:
        if self._ended:
            return
        self._end(1006)
        await self._disconnect(1006)


class InProcessServer:
    """The application in this process (see the module's docstring). `start()` registers its `ws_url`
    for the socket clients, `stop()` unregisters it (a socket still open ends with the test's loop)."""

    def __init__(self) -> None:
        from voiceagent.routing import make_application

        self.port = next(_numbers)  # a name, not a port: nothing listens
        self.application = make_application()
        self.configured_layers: dict[str, Any] = {}

    @property
    def http_url(self) -> str:
        return f"http://testserver:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://testserver:{self.port}"

    def start(self) -> InProcessServer:
        IN_PROCESS[self.ws_url] = self.connect
        return self

    def share_layer(self, settings: Any) -> None:
        """Take the configured channel layer back (Redis' with REDIS_URL), for a test in which a real
        server process shares it with this one (server_settings gives the application the in-memory one)."""
        settings.CHANNEL_LAYERS = self.configured_layers

    def stop(self) -> None:
        IN_PROCESS.pop(self.ws_url, None)

    async def connect(self, url: str) -> CommunicatorSocket:
        """A WebSocket to the application at `url` (under ws_url); refused as aiohttp refuses a handshake."""
        path = url[len(self.ws_url) :]
        communicator = WebsocketCommunicator(self.application, path, headers=[(b"host", b"testserver")])
        communicator.scope["client"] = ("127.0.0.1", 40000 + self.port)
        communicator.scope["server"] = ("127.0.0.1", self.port)
        socket = CommunicatorSocket(communicator)
        await communicator.send_input({"type": "websocket.connect"})
        output = await socket._output()
        if output is None or output["type"] == "websocket.close":
            communicator.stop(exceptions=False)
            raise aiohttp.WSServerHandshakeError(
                aiohttp.RequestInfo(url=_yarl(url), method="GET", headers=_headers(), real_url=_yarl(url)),
                (),
                status=403,
                message="Access denied",
            )
        assert output["type"] == "websocket.accept", output
        return socket

    # --- HTTP -----------------------------------------------------------------------------------
    def ahttp(self, **options: Any) -> httpx.AsyncClient:
        """An httpx client to the application, in this event loop."""
        transport = httpx.ASGITransport(app=self.application, client=("127.0.0.1", 40000 + self.port))
        return httpx.AsyncClient(transport=transport, base_url=self.http_url, timeout=30, **options)

    def http(self, **options: Any) -> httpx.Client:
        """A blocking httpx client to the application (from a test's thread, or asyncio.to_thread)."""
        return httpx.Client(transport=_BlockingASGI(self), base_url=self.http_url, timeout=30, **options)

    async def arequest(self, method: str, path: str, *, api_key: str | None = None, body: Any = None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        async with self.ahttp(headers=headers) as client:
            if body is None:
                return await client.request(method, path)
            return await client.request(method, path, json=body)


class _BlockingASGI(httpx.BaseTransport):
    def __init__(self, server: InProcessServer) -> None:
        self.server = server

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        async def send() -> httpx.Response:
            body = request.read()
            async with self.server.ahttp() as client:
                answer = await client.send(
                    client.build_request(request.method, str(request.url), headers=request.headers, content=body)
                )
                # The body is decoded already (answer.content): its encoding header no longer applies.
                headers = [
                    (k, v)
                    for k, v in answer.headers.multi_items()
                    if k.lower() not in ("content-encoding", "content-length")
                ]
                return httpx.Response(answer.status_code, headers=headers, content=answer.content)

        return async_to_sync(send)()


def _yarl(url: str) -> Any:
    import yarl

    return yarl.URL(url)


def _headers() -> Any:
    from multidict import CIMultiDict, CIMultiDictProxy

    return CIMultiDictProxy(CIMultiDict())


def server_settings(
    server: InProcessServer,
    settings: Any,
    values: dict[str, Any] | None = None,
    *,
    public: bool = False,
    folder: Path | None = None,
) -> None:
    """The settings start_test_server gives every test server (its environment), and a module's own
    `values` (typed, as voiceagent/settings.py reads them from that environment), on pytest-django's
    `settings` fixture: undone after the test."""
    settings.REALTIME_TOKEN_SECRET = SECRET
    settings.REALTIME_WS_URL = server.ws_url
    # One process: the in-memory channel layer (with REDIS_URL, Redis' layer is what several processes
    # share, proven through real servers). A test of this process with a real server beside it takes the
    # configured one back (`share_layer`).
    server.configured_layers = settings.CHANNEL_LAYERS
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    if public:
        settings.PUBLIC_BASE_URL = server.http_url
    if folder is not None:
        # Recordings go to the test's folder: the storage settings.py makes of RECORDINGS_STORAGE_URL.
        settings.RECORDINGS_STORAGE_URL = f"file://{folder / 'recordings'}"
        settings.STORAGES = {
            **settings.STORAGES,
            "recordings": storage_from_url(settings.RECORDINGS_STORAGE_URL, default_location=str(folder)),
        }
    for name, value in (values or {}).items():
        setattr(settings, name, value)


# Server settings under which the application may call tools, webhooks and MCP servers on this machine.
LOOPBACK: dict[str, Any] = {"OUTBOUND_ALLOWED_NETWORKS": ["127.0.0.0/8"]}


@contextlib.contextmanager
def serving(
    settings: Any, values: dict[str, Any] | None = None, *, public: bool = False, folder: Path | None = None
) -> Iterator[InProcessServer]:
    """An in-process server for one test, its settings applied (`server_settings`)."""
    server = InProcessServer().start()
    server_settings(server, settings, values, public=public, folder=folder)
    try:
        yield server
    finally:
        server.stop()
