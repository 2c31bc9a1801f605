"""Real servers on loopback ports for the tool and prompt tests (and the socket tests that reuse them).

- `LoopbackReceiver`: an aiohttp server on 127.0.0.1 that records every request (method, path, query,
  headers, raw body bytes) and answers scripted replies: a status, a JSON or raw body, and optionally
  `hold=True` (no answer until the receiver is released or closed, for timeouts without sleeping).
  Use it inside the test's event loop (`async with LoopbackReceiver() as hook:`) or, for a server
  process calling it while the test thread waits, in a thread of its own (`with
  LoopbackReceiver().in_thread() as hook:`).
- `LoopbackMcp`: the official SDK's MCPServer over Streamable HTTP (uvicorn in a thread) with a few
  order tools, an optional bearer-protected mount, and a record of the MCP sessions its clients
  opened (`Mcp-Session-Id` answered) and ended (DELETE).

Fixtures `receiver`, `mcp_server` and `allow_loopback`: a test module that uses them imports
`receiver_fixture`, `mcp_server_fixture`, `allow_loopback_fixture` (registered under the short names).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
import uvicorn
from aiohttp import web
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

MCP_BEARER_TOKEN = "pW7rKxTz4QmVn8Ls"  # letters beyond a-f: no fragment can appear in a UUID by chance


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def closed_port_url(path: str = "/") -> str:
    """A loopback URL nothing listens on."""
    return f"http://127.0.0.1:{free_port()}{path}"


# --- HTTP receiver ------------------------------------------------------------------------------

_NO_JSON = object()


@dataclass(frozen=True)
class Reply:
    """One scripted answer. `json` wins over `body`; `hold` answers only once released."""

    status: int = 200
    json: Any = _NO_JSON
    body: bytes | str = b""
    content_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    hold: bool = False


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    query: dict[str, str]  # last value of each name
    query_string: str
    headers: dict[str, str]  # names in lower case
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class LoopbackReceiver:
    """Records requests and answers `reply()`-scripted replies in order, then `default`."""

    def __init__(self, default: Reply | None = None) -> None:
        self.default = default or Reply(json={"ok": True})
        self.requests: list[Received] = []
        self.port = free_port()
        self._replies: deque[Reply] = deque()
        self._release: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str = "/hook") -> str:
        return self.base + path

    def reply(self, *replies: Reply) -> LoopbackReceiver:
        self._replies.extend(replies)
        return self

    def release(self) -> None:
        """Let held replies answer."""
        if self._release is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._release.set)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.requests.append(
            Received(
                method=request.method,
                path=request.path,
                query={key: value for key, value in request.query.items()},
                query_string=request.query_string,
                headers={key.lower(): value for key, value in request.headers.items()},
                body=body,
            )
        )
        reply = self._replies.popleft() if self._replies else self.default
        if reply.hold and self._release is not None:
            await self._release.wait()
        if reply.json is not _NO_JSON:
            return web.Response(
                status=reply.status,
                body=json.dumps(reply.json).encode(),
                content_type=reply.content_type or "application/json",
                headers=reply.headers,
            )
        raw = reply.body.encode() if isinstance(reply.body, str) else reply.body
        response = web.Response(status=reply.status, body=raw, headers=reply.headers)
        if reply.content_type:
            response.content_type = reply.content_type
        return response

    async def start(self) -> LoopbackReceiver:
        self._loop = asyncio.get_running_loop()
        self._release = asyncio.Event()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        return self

    async def close(self) -> None:
        if self._release is not None:
            self._release.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> LoopbackReceiver:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @contextmanager
    def in_thread(self) -> Iterator[LoopbackReceiver]:
        """Serve from a thread with its own event loop (for callers in another process or thread)."""
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="loopback-receiver", daemon=True)
        thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.start(), loop).result(10)
            yield self
        finally:
            asyncio.run_coroutine_threadsafe(self.close(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()


# --- MCP server ---------------------------------------------------------------------------------


def build_order_tools() -> MCPServer:
    server = MCPServer("Orders loopback server")

    @server.tool()
    def lookup_order(order_id: str) -> dict[str, Any]:
        """Look up an order by its id."""
        return {"orderId": order_id, "status": "shipped"}

    @server.tool(structured_output=False)
    def order_notes(order_id: str) -> list[str]:
        """The notes of an order, as text blocks only (no structured content)."""
        return [f"Order {order_id} was packed.", f"Order {order_id} left the warehouse."]

    @server.tool()
    def cancel_order(order_id: str) -> str:
        """Cancel an order (always refused: the order is locked)."""
        raise ToolError(f"Order {order_id} is locked")

    @server.tool(name="orders.track")
    def track(order_id: str) -> dict[str, Any]:
        """Track a parcel (a dotted name, as some servers use)."""
        return {"orderId": order_id, "carrier": "UPS"}

    @server.tool()
    async def slow_lookup(seconds: float) -> str:
        """Answer after a while."""
        await anyio.sleep(seconds)
        return "done"

    return server


@dataclass(frozen=True)
class McpExchange:
    method: str
    session_sent: str | None  # Mcp-Session-Id the client sent
    session_given: str | None  # Mcp-Session-Id the server answered
    status: int


class LoopbackMcp:
    """The SDK's server on a loopback port, in a uvicorn thread; `/bearer/mcp` needs MCP_BEARER_TOKEN."""

    def __init__(self) -> None:
        self.exchanges: list[McpExchange] = []
        self.port = free_port()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def bearer_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/bearer/mcp"

    @property
    def sessions_opened(self) -> list[str]:
        return [e.session_given for e in self.exchanges if e.session_given and not e.session_sent]

    @property
    def sessions_closed(self) -> list[str]:
        return [e.session_sent for e in self.exchanges if e.method == "DELETE" and e.session_sent]

    def requests_in(self, session_id: str) -> int:
        return sum(1 for e in self.exchanges if e.method == "POST" and e.session_sent == session_id)

    def _app(self) -> Any:
        inner = build_order_tools().streamable_http_app(host="127.0.0.1")
        exchanges = self.exchanges

        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await inner(scope, receive, send)
                return
            headers = dict(scope["headers"])
            if scope["path"].startswith("/bearer/"):
                if headers.get(b"authorization") != f"Bearer {MCP_BEARER_TOKEN}".encode():
                    await send({"type": "http.response.start", "status": 401, "headers": []})
                    await send({"type": "http.response.body", "body": b""})
                    return
                path = scope["path"][len("/bearer") :]
                scope = {**scope, "path": path, "raw_path": path.encode()}
            sent = headers.get(b"mcp-session-id")

            async def recording_send(message: Any) -> None:
                if message["type"] == "http.response.start":
                    given = dict(message.get("headers") or []).get(b"mcp-session-id")
                    exchanges.append(
                        McpExchange(
                            method=scope["method"],
                            session_sent=sent.decode() if sent else None,
                            session_given=given.decode() if given else None,
                            status=message["status"],
                        )
                    )
                await send(message)

            await inner(scope, receive, recording_send)

        return app

    def start(self) -> LoopbackMcp:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", self.port))
        self._server = uvicorn.Server(uvicorn.Config(self._app(), log_level="warning", lifespan="on"))
        # Listening before uvicorn starts: early clients wait in the backlog instead of being refused.
        self._socket.listen(128)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name="loopback-mcp", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(20)
        if self._socket is not None:
            self._socket.close()


# --- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(name="allow_loopback")
def allow_loopback_fixture(settings: Any) -> Any:
    """The outbound guard lets requests reach loopback servers (as OUTBOUND_ALLOWED_NETWORKS does)."""
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    return settings


@pytest.fixture(name="receiver")
async def receiver_fixture() -> AsyncIterator[LoopbackReceiver]:
    async with LoopbackReceiver() as hook:
        yield hook


@pytest.fixture(name="mcp_server")
def mcp_server_fixture() -> Iterator[LoopbackMcp]:
    server = LoopbackMcp().start()
    yield server
    server.stop()
