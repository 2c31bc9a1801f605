"""The loopback MCP server of the tests: the official SDK's MCPServer over Streamable HTTP (uvicorn in a
thread) with a set of order tools, mounts protected by a bearer token, an OAuth client-credentials token
or an API key header, and a record of the MCP sessions its clients opened (`Mcp-Session-Id` answered)
and ended (DELETE).

Fixture `mcp_server`: a test module that uses it imports `mcp_server_fixture`.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import anyio
import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from testing.servers import free_port

# Random-looking credentials with letters beyond a-f: no fragment can appear by chance in a UUID.
MCP_BEARER_TOKEN = "pW7rKxTz4QmVn8Ls"
API_KEY_HEADER = "X-Api-Key"
API_KEY = "hYu4RkQx8WnTz3Vs"
CLIENT_ID = "gKm7PwXr2ZqTy9Lu"
CLIENT_SECRET = "sJw8NxVq4RtZk6Pm"
OAUTH_ACCESS_TOKEN = "zRv3MqWx7KtYn5Hj"


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


def build_text_order_tools() -> MCPServer:
    """Two order tools answering text only (the MCP server tests list and call them)."""
    server = MCPServer("Orders test server")

    @server.tool()
    def lookup_order(order_id: str) -> str:
        """Look up an order by its id."""
        return f"order {order_id}: shipped"

    @server.tool()
    def cancel_order(order_id: str, reason: str = "") -> str:
        """Cancel an order."""
        return f"order {order_id}: cancelled"

    return server


async def _reply(send: Any, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": payload})


async def _token_endpoint(scope: Any, receive: Any, send: Any) -> None:
    """OAuth client credentials (Basic CLIENT_ID:CLIENT_SECRET) for OAUTH_ACCESS_TOKEN."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    headers = dict(scope["headers"])
    expected = b"Basic " + base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode())
    form = parse_qs(body.decode())
    if headers.get(b"authorization") != expected or form.get("grant_type") != ["client_credentials"]:
        await _reply(send, 401, {"error": "invalid_client"})
        return
    await _reply(send, 200, {"access_token": OAUTH_ACCESS_TOKEN, "token_type": "Bearer", "expires_in": 3600})


# Mounts that need a credential: the header it is sent in, and its value.
GUARDS = {
    "/bearer": (b"authorization", f"Bearer {MCP_BEARER_TOKEN}".encode()),
    "/oauth": (b"authorization", f"Bearer {OAUTH_ACCESS_TOKEN}".encode()),
    "/header": (API_KEY_HEADER.lower().encode(), API_KEY.encode()),
}


@dataclass(frozen=True)
class McpExchange:
    method: str
    session_sent: str | None  # Mcp-Session-Id the client sent
    session_given: str | None  # Mcp-Session-Id the server answered
    status: int


class LoopbackMcp:
    """The SDK's server (`tools`: build_order_tools unless told) on a loopback port, in a uvicorn thread.
    `/mcp` is open; `/bearer/mcp` needs MCP_BEARER_TOKEN, `/oauth/mcp` the token `/oauth/token` gives for
    the client credentials, `/header/mcp` the API key header. Every MCP exchange past the guards is
    recorded (`exchanges`)."""

    def __init__(self, tools: MCPServer | None = None) -> None:
        self.tools = tools
        self.exchanges: list[McpExchange] = []
        self.port = free_port()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    @property
    def bearer_url(self) -> str:
        return f"{self.base}/bearer/mcp"

    @property
    def sessions_opened(self) -> list[str]:
        return [e.session_given for e in self.exchanges if e.session_given and not e.session_sent]

    @property
    def sessions_closed(self) -> list[str]:
        return [e.session_sent for e in self.exchanges if e.method == "DELETE" and e.session_sent]

    def requests_in(self, session_id: str) -> int:
        return sum(1 for e in self.exchanges if e.method == "POST" and e.session_sent == session_id)

    def _app(self) -> Any:
        inner = (self.tools or build_order_tools()).streamable_http_app(host="127.0.0.1")
        exchanges = self.exchanges

        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await inner(scope, receive, send)
                return
            headers = dict(scope["headers"])
            if scope["path"] == "/oauth/token":
                await _token_endpoint(scope, receive, send)
                return
            for prefix, (name, value) in GUARDS.items():
                if scope["path"].startswith(prefix + "/"):
                    if headers.get(name) != value:
                        await _reply(send, 401, {"error": "unauthorized"})
                        return
                    path = scope["path"][len(prefix) :]
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

    def __enter__(self) -> LoopbackMcp:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture(name="mcp_server")
def mcp_server_fixture() -> Iterator[LoopbackMcp]:
    with LoopbackMcp() as server:
        yield server
