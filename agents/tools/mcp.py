"""MCP client: talks to connected tool servers with the official `mcp` SDK (Streamable HTTP).

Every HTTP request (token endpoint included) goes through kit.egress, and every failure
becomes an McpFailure whose message names what went wrong without any credential or URL path
(hosted MCP servers often carry an access key in the path).
"""

from __future__ import annotations

import asyncio
import base64
import importlib
import json
import math
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

import anyio
import httpx
import httpx2

from agents.models import McpAuthType
from kit import egress

if TYPE_CHECKING:
    from mcp import Client

TIMEOUT_SECONDS = 15.0
# A conversation's session: how long aclose() waits for the polite end (DELETE of the session)
# before it cancels the session's task, and how long it then waits for that cancellation.
CLOSE_TIMEOUT_SECONDS = 3.0
CANCEL_TIMEOUT_SECONDS = 1.0
MAX_TOOLS = 500
MAX_PAGES = 20


class McpFailure(Exception):
    """A connection, handshake, listing or tool call failed; the message is safe to store and show."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class McpTimeout(McpFailure):
    """A tool call of a session did not finish within its time limit."""


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
    from mcp.shared.exceptions import MCPError  # loaded by _connected already (see there)

    for kind in (egress.EgressBlocked, McpFailure, httpx2.HTTPStatusError, MCPError):
        for leaf in leaves:
            if isinstance(leaf, kind):
                exc = leaf
                break
        else:
            continue
        break
    else:
        exc = leaves[0]
    if isinstance(exc, egress.EgressBlocked | McpFailure):
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
    """Client-credentials grant (RFC 6749 4.4, client_secret_basic) through the egress guard."""
    form = {"grant_type": "client_credentials"}
    if credentials.get("scope"):
        form["scope"] = credentials["scope"]
    basic = base64.b64encode(f"{credentials['clientId']}:{credentials['clientSecret']}".encode()).decode()
    host = urlsplit(credentials["tokenUrl"]).hostname
    try:
        response = await egress.send(
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
    except egress.EgressBlocked:
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


def _host(connection: Connection) -> str:
    return urlsplit(connection.url).hostname or "the server"


async def _sdk_loaded() -> None:
    """The SDK is imported when an MCP server is first contacted, not with this module: its protocol types
    take about a second of CPU to import, which every process would pay at start (each server, worker and
    command) for agents that may never use an MCP server. The first import runs in a worker thread, so that
    it does not hold up the event loop, and every live call on it, for that second."""
    if "mcp.client.streamable_http" not in sys.modules:
        await asyncio.to_thread(importlib.import_module, "mcp.client.streamable_http")


@asynccontextmanager
async def _connected(connection: Connection, *, timeout_s: float, refused: list[int]) -> AsyncIterator[Client]:
    """An open client session (initialize handshake done); HTTP error statuses are noted in `refused`.

    Enter and exit it in the same task: the SDK's anyio cancel scopes require it."""
    await _sdk_loaded()  # before anything here can fail, so that _describe finds it loaded
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def note_refusal(response: httpx2.Response) -> None:
        # The SDK turns an HTTP error into a generic MCP error; keep the status for the message.
        if response.status_code >= 400:
            refused.append(response.status_code)

    headers = await request_headers(connection, timeout_s=timeout_s)
    http_client = egress.mcp_http_client(headers=headers, timeout_s=timeout_s)
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
        yield client


def _failure(exc: BaseException, connection: Connection, refused: list[int]) -> McpFailure:
    host = _host(connection)
    reason = _describe(exc, host)
    if refused and not isinstance(exc, McpFailure | egress.EgressBlocked):
        reason = f"{host} answered HTTP {refused[0]}"
    return McpFailure(_scrub(reason, connection))


async def _run(connection: Connection, work: Any, timeout_s: float) -> Any:
    """Open a session (initialize handshake), run `work(client)`, close; bounded by timeout_s."""
    refused: list[int] = []
    try:
        with anyio.fail_after(timeout_s):
            async with _connected(connection, timeout_s=timeout_s, refused=refused) as client:
                return await work(client)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a safe, stored message
        raise _failure(exc, connection, refused) from None


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


def _tool_result(result: Any) -> dict[str, Any]:
    texts = [block.text for block in result.content if getattr(block, "type", None) == "text"]
    return {"isError": bool(result.is_error), "content": texts, "structuredContent": result.structured_content}


async def call_tool(
    connection: Connection, *, name: str, arguments: dict[str, Any], timeout_s: float = TIMEOUT_SECONDS
) -> dict[str, Any]:
    """Call one tool: {"isError": bool, "content": [text...], "structuredContent": object | None}."""

    async def work(client: Client) -> dict[str, Any]:
        return _tool_result(await client.call_tool(name, arguments))

    return await _run(connection, work, timeout_s)


# --- one session per conversation ---------------------------------------------------------------


def _seconds(value: float) -> str:
    return "1 second" if value == 1 else f"{value:g} seconds"


@dataclass(eq=False)
class _Job:
    name: str
    arguments: dict[str, Any]
    timeout_s: float
    future: asyncio.Future[dict[str, Any]]
    scope: anyio.CancelScope | None = None

    def abandon(self, _future: Any = None) -> None:
        """The caller stopped waiting (its time ran out or it was cancelled): stop the call."""
        if self.future.cancelled() and self.scope is not None:
            self.scope.cancel()


@dataclass(eq=False)
class _Link:
    """One open client session: the task that owns it and the calls queued for it."""

    jobs: asyncio.Queue[_Job | None] = field(default_factory=asyncio.Queue)
    pending: set[_Job] = field(default_factory=set)
    task: asyncio.Task[None] | None = None
    retired: bool = False


class McpSession:
    """One client session with one server, kept open for a whole conversation.

    The SDK's client runs inside anyio cancel scopes, which must be entered and exited by the same
    task; a conversation's calls come from different tasks (each brain response is one). So the
    session lives in a task of its own that owns the `async with` and serves calls sent through a
    queue; callers wait for their own call's future. The session opens on the first call (the
    initialize handshake, bounded by `connect_timeout_s`) and stays open until `aclose()`.

    A call that fails for a transport reason (connection lost, the server forgot the session, an
    HTTP error) retires the session: the next call opens a new one. A tool's own error result
    (`isError`) and a call that runs out of time leave it open.

    Calls return the same shape as `call_tool()` and raise McpFailure (McpTimeout when the call's
    time ran out, connecting included).
    """

    def __init__(self, connection: Connection, *, connect_timeout_s: float = TIMEOUT_SECONDS) -> None:
        self.connection = connection
        self.connect_timeout_s = connect_timeout_s
        self._link: _Link | None = None
        self._links: set[_Link] = set()  # every link whose task has not ended (current and retiring)
        self._closed = False

    async def call_tool(self, name: str, arguments: dict[str, Any], *, timeout_s: float) -> dict[str, Any]:
        if self._closed:
            raise McpFailure("The MCP session of this conversation is closed")
        link = self._current_link()
        job = _Job(name, arguments, timeout_s, asyncio.get_running_loop().create_future())
        job.future.add_done_callback(job.abandon)
        link.pending.add(job)
        link.jobs.put_nowait(job)
        try:
            async with asyncio.timeout(timeout_s):
                # Awaited directly: when this caller is cancelled or times out, the future is
                # cancelled too, and abandon() stops the call in the session's task.
                return await job.future
        except TimeoutError:
            raise McpTimeout(f"{_host(self.connection)} did not answer within {_seconds(timeout_s)}") from None
        finally:
            link.pending.discard(job)

    async def aclose(self) -> None:
        """End the session (the server is told, with a DELETE); idempotent, bounded in time."""
        self._closed = True
        links = list(self._links)
        for link in links:
            self._retire(link)
        tasks = [link.task for link in links if link.task is not None]
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=CLOSE_TIMEOUT_SECONDS)
        for task in late:
            task.cancel()  # delivered inside the owning task, so its cancel scopes unwind properly
        if late:
            await asyncio.wait(late, timeout=CANCEL_TIMEOUT_SECONDS)

    def _current_link(self) -> _Link:
        if self._link is None or self._link.retired:
            link = _Link()
            link.task = asyncio.create_task(self._serve(link), name=f"mcp-session-{_host(self.connection)}")
            self._links.add(link)
            link.task.add_done_callback(lambda _task: self._links.discard(link))
            self._link = link
        return self._link

    def _retire(self, link: _Link) -> None:
        if not link.retired:
            link.retired = True
            link.jobs.put_nowait(None)
        if self._link is link:
            self._link = None

    async def _serve(self, link: _Link) -> None:
        refused: list[int] = []
        failure: McpFailure | None = None
        try:
            with anyio.CancelScope() as scope:
                # The scope covers the whole session (so that it is left in this task), but its
                # deadline only bounds opening the session.
                scope.deadline = anyio.current_time() + self.connect_timeout_s
                async with (
                    _connected(self.connection, timeout_s=self.connect_timeout_s, refused=refused) as client,
                    anyio.create_task_group() as calls,
                ):
                    scope.deadline = math.inf
                    while (job := await link.jobs.get()) is not None:
                        calls.start_soon(self._one, client, link, job, refused)
            if scope.cancelled_caught:
                failure = McpFailure(
                    f"{_host(self.connection)} did not answer within {_seconds(self.connect_timeout_s)}"
                )
        except Exception as exc:  # noqa: BLE001 - every failure becomes a safe message for the callers
            failure = _failure(exc, self.connection, refused)
        finally:
            self._retire(link)
            reason = failure.message if failure else "The MCP session ended"
            for job in list(link.pending):
                if not job.future.done():
                    job.future.set_exception(McpFailure(reason))
            while not link.jobs.empty():
                job = link.jobs.get_nowait()
                if job is not None and not job.future.done():
                    job.future.set_exception(McpFailure(reason))

    async def _one(self, client: Client, link: _Link, job: _Job, refused: list[int]) -> None:
        if job.future.done():
            return  # the caller stopped waiting before the call started
        with anyio.CancelScope() as scope:
            job.scope = scope
            try:
                # The caller's own deadline (job.timeout_s) ends the call first; the SDK's is a backstop.
                result = await client.call_tool(job.name, job.arguments, read_timeout_seconds=job.timeout_s + 1)
            except Exception as exc:  # noqa: BLE001 - the caller gets a safe message
                self._retire(link)
                if not job.future.done():
                    job.future.set_exception(_failure(exc, self.connection, refused))
                return
            if not job.future.done():
                job.future.set_result(_tool_result(result))
