"""A loopback MCP server: the official SDK's MCPServer over Streamable HTTP (uvicorn in a thread) with a
few order tools, an optional bearer-protected mount, and a record of the MCP sessions its clients
opened (`Mcp-Session-Id` answered) and ended (DELETE).

Fixture `mcp_server`: a test module that uses it imports `mcp_server_fixture`.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from testing.servers import free_port

MCP_BEARER_TOKEN = "pW7rKxTz4QmVn8Ls"  # letters beyond a-f: no fragment can appear in a UUID by chance


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


@pytest.fixture(name="mcp_server")
def mcp_server_fixture() -> Iterator[LoopbackMcp]:
    server = LoopbackMcp().start()
    yield server
    server.stop()
