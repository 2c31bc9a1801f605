"""A real MCP server (the official SDK's MCPServer over Streamable HTTP) on a loopback port for the
whole test session, with a bearer-protected and a header-protected mount and a tiny OAuth
client-credentials token endpoint."""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer

# Random-looking credentials with letters beyond a-f: no fragment can appear by chance in a UUID.
BEARER_TOKEN = "qXtV7kZw9RmLp2Nj"
API_KEY_HEADER = "X-Api-Key"
API_KEY = "hYu4RkQx8WnTz3Vs"
CLIENT_ID = "gKm7PwXr2ZqTy9Lu"
CLIENT_SECRET = "sJw8NxVq4RtZk6Pm"
OAUTH_ACCESS_TOKEN = "zRv3MqWx7KtYn5Hj"


def build_mcp_server() -> MCPServer:
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


def gateway(app: Any) -> Any:
    """/mcp is open; /bearer/mcp and /oauth/mcp need a bearer token, /header/mcp the API key header."""
    guards = {
        "/bearer": (b"authorization", f"Bearer {BEARER_TOKEN}".encode()),
        "/oauth": (b"authorization", f"Bearer {OAUTH_ACCESS_TOKEN}".encode()),
        "/header": (API_KEY_HEADER.lower().encode(), API_KEY.encode()),
    }

    async def asgi(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            if path == "/oauth/token":
                await _token_endpoint(scope, receive, send)
                return
            for prefix, (name, value) in guards.items():
                if path.startswith(prefix + "/"):
                    if dict(scope["headers"]).get(name) != value:
                        await _reply(send, 401, {"error": "unauthorized"})
                        return
                    path = path[len(prefix) :]
                    scope = {**scope, "path": path, "raw_path": path.encode()}
        await app(scope, receive, send)

    return asgi


@dataclass
class LoopbackMcp:
    base: str

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"


@pytest.fixture(scope="session")
def mcp_server() -> Iterator[LoopbackMcp]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = gateway(build_mcp_server().streamable_http_app(host="127.0.0.1"))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    # Listening before uvicorn starts: early clients wait in the backlog instead of being refused,
    # so no polling for readiness is needed.
    sock.listen(128)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    yield LoopbackMcp(base=f"http://127.0.0.1:{port}")
    server.should_exit = True
    thread.join(20)
    sock.close()


@pytest.fixture
def allow_loopback(settings: Any) -> None:
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]


@pytest.fixture
def closed_port_url() -> str:
    """A loopback URL nothing listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/mcp"
