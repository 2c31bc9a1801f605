"""MCP client: talks to connected tool servers with the official `mcp` SDK (Streamable HTTP).

Every HTTP request (token endpoint included) goes through voiceagent.outbound, and every failure
becomes an McpFailure whose message names what went wrong without any credential or URL path
(hosted MCP servers often carry an access key in the path).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

import anyio
import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from agents.models import McpAuthType
from voiceagent import outbound

TIMEOUT_SECONDS = 15.0
MAX_TOOLS = 500
MAX_PAGES = 20


class McpFailure(Exception):
    """A connection, handshake, listing or tool call failed; the message is safe to store and show."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Connection:
    """Where and how to reach one server: what services hand to this module."""

    url: str
    auth_type: str
    credentials: dict[str, Any] | None

    def secrets(self) -> list[str]:
        """Every credential string, so that messages can be scrubbed of them."""
        found: list[str] = [self.url, urlsplit(self.url).path]
        for value in (self.credentials or {}).values():
            if isinstance(value, dict):
                found.extend(str(v) for v in value.values())
            elif value:
                found.append(str(value))
        return [s for s in found if s and len(s) >= 4]


def _scrub(message: str, connection: Connection) -> str:
    for secret in sorted(connection.secrets(), key=len, reverse=True):
        message = message.replace(secret, "***")
    return message[:500]


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def _describe(exc: BaseException, host: str) -> str:
    """A short, credential-free reason for a failure."""
    leaves = _leaves(exc)
    # The most telling leaf first: a refusal or an HTTP status says more than a closed stream.
    for kind in (outbound.OutboundBlocked, McpFailure, httpx2.HTTPStatusError, MCPError):
        for leaf in leaves:
            if isinstance(leaf, kind):
                exc = leaf
                break
        else:
            continue
        break
    else:
        exc = leaves[0]
    if isinstance(exc, outbound.OutboundBlocked | McpFailure):
        return exc.message
    if isinstance(exc, TimeoutError | httpx2.TimeoutException):
        return f"{host} did not answer within {TIMEOUT_SECONDS:g} s"
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"{host} answered HTTP {exc.response.status_code}"
    if isinstance(exc, httpx2.ConnectError):
        return f"Cannot connect to {host}: connection failed"
    if isinstance(exc, httpx2.HTTPError):
        return f"HTTP error talking to {host}: {type(exc).__name__}"
    if isinstance(exc, MCPError):
        return f"{host} returned an MCP error: {exc.message}"
    return f"MCP exchange with {host} failed: {type(exc).__name__}"


async def fetch_oauth_token(credentials: dict[str, Any], *, timeout_s: float) -> str:
    """Client-credentials grant (RFC 6749 4.4, client_secret_basic) through the outbound guard."""
    form = {"grant_type": "client_credentials"}
    if credentials.get("scope"):
        form["scope"] = credentials["scope"]
    basic = base64.b64encode(f"{credentials['clientId']}:{credentials['clientSecret']}".encode()).decode()
    host = urlsplit(credentials["tokenUrl"]).hostname
    try:
        response = await outbound.send(
            "POST",
            credentials["tokenUrl"],
            headers={
                "Authorization": f"Basic {basic}",
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
            },
            content=urlencode(form),
            timeout_s=timeout_s,
        )
    except outbound.OutboundBlocked:
        raise
    except httpx.HTTPError as exc:
        raise McpFailure(f"Token endpoint {host} failed: {type(exc).__name__}") from None
    if response.status_code != 200:
        raise McpFailure(f"Token endpoint {host} answered HTTP {response.status_code}")
    try:
        token = response.json()["access_token"]
    except (ValueError, KeyError, TypeError):
        raise McpFailure(f"Token endpoint {host} did not return an access_token") from None
    if not isinstance(token, str) or not token:
        raise McpFailure(f"Token endpoint {host} did not return an access_token")
    return token


async def request_headers(connection: Connection, *, timeout_s: float) -> dict[str, str]:
    credentials = connection.credentials or {}
    if connection.auth_type == McpAuthType.BEARER:
        return {"Authorization": f"Bearer {credentials['token']}"}
    if connection.auth_type == McpAuthType.HEADERS:
        return dict(credentials.get("headers") or {})
    if connection.auth_type == McpAuthType.OAUTH_CLIENT_CREDENTIALS:
        return {"Authorization": f"Bearer {await fetch_oauth_token(credentials, timeout_s=timeout_s)}"}
    return {}


async def _run(connection: Connection, work: Any, timeout_s: float) -> Any:
    """Open a session (initialize handshake), run `work(client)`, close; bounded by timeout_s."""
    host = urlsplit(connection.url).hostname or "the server"
    refused: list[int] = []

    async def note_refusal(response: httpx2.Response) -> None:
        # The SDK turns an HTTP error into a generic MCP error; keep the status for the message.
        if response.status_code >= 400:
            refused.append(response.status_code)

    try:
        with anyio.fail_after(timeout_s):
            headers = await request_headers(connection, timeout_s=timeout_s)
            http_client = outbound.mcp_http_client(headers=headers, timeout_s=timeout_s)
            http_client.event_hooks["response"].append(note_refusal)
            async with (
                http_client as http,
                Client(
                    streamable_http_client(connection.url, http_client=http),
                    mode="legacy",  # the initialize handshake every MCP server speaks
                    cache=None,
                    read_timeout_seconds=timeout_s,
                ) as client,
            ):
                return await work(client)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a safe, stored message
        reason = _describe(exc, host)
        if refused and not isinstance(exc, McpFailure | outbound.OutboundBlocked):
            reason = f"{host} answered HTTP {refused[0]}"
        raise McpFailure(_scrub(reason, connection)) from None


async def list_tools(connection: Connection, *, timeout_s: float = TIMEOUT_SECONDS) -> list[dict[str, Any]]:
    """The server's tools as [{name, description, inputSchema}], all pages."""

    async def work(client: Client) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            for tool in page.tools:
                tools.append(
                    {"name": tool.name, "description": tool.description or "", "inputSchema": tool.input_schema}
                )
            cursor = page.next_cursor
            if cursor is None or len(tools) >= MAX_TOOLS:
                break
        return tools[:MAX_TOOLS]

    tools = await _run(connection, work, timeout_s)
    # Stored as JSON: make sure the schemas are plain JSON values.
    return json.loads(json.dumps(tools, default=str))


async def call_tool(
    connection: Connection, *, name: str, arguments: dict[str, Any], timeout_s: float = TIMEOUT_SECONDS
) -> dict[str, Any]:
    """Call one tool: {"isError": bool, "content": [text...], "structuredContent": object | None}."""

    async def work(client: Client) -> dict[str, Any]:
        result = await client.call_tool(name, arguments)
        texts = [block.text for block in result.content if getattr(block, "type", None) == "text"]
        return {
            "isError": bool(result.is_error),
            "content": texts,
            "structuredContent": result.structured_content,
        }

    return await _run(connection, work, timeout_s)
