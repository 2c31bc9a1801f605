"""A scripted HTTP receiver on loopback: the stand-in for webhooks, tool endpoints and REST APIs.

`LoopbackReceiver`: an aiohttp server on 127.0.0.1 that records every request (method, path, query,
headers, raw body bytes) and answers scripted replies: a status, a JSON or raw body, and optionally
`hold=True` (no answer until the receiver is released or closed, for timeouts without sleeping).
Use it inside the test's event loop (`async with LoopbackReceiver() as hook:`) or, for a server
process calling it while the test thread waits, in a thread of its own (`with LoopbackReceiver() as
hook:`): the lifecycle of testing/servers.py.

Fixtures `receiver`, `receivers` and `allow_loopback`: a test module that uses them imports
`receiver_fixture`, `receivers_fixture` and `allow_loopback_fixture` (registered under the short names).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from testing.servers import ScriptedServer, free_port

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


class LoopbackReceiver(ScriptedServer):
    """Records requests and answers `reply()`-scripted replies in order, then `default`. Its port is
    chosen when it is made (a URL can be given out before it starts)."""

    thread_name = "loopback-receiver"
    handler_cancellation = False
    shutdown_timeout = 2.0

    def __init__(self, default: Reply | None = None) -> None:
        super().__init__(port=free_port())
        self.default = default or Reply(json={"ok": True})
        self.requests: list[Received] = []
        self._replies: deque[Reply] = deque()
        self._release: asyncio.Event | None = None

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
        if self._release is not None:
            self.call_soon(self._release.set)

    def routes(self, app: web.Application) -> None:
        self._release = asyncio.Event()
        app.router.add_route("*", "/{tail:.*}", self._handle)

    async def before_stop(self) -> None:
        if self._release is not None:
            self._release.set()

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
        self.arrived.notify()
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


# --- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(name="allow_loopback")
def allow_loopback_fixture(settings: Any) -> Any:
    """The egress guard lets requests reach loopback servers (as OUTBOUND_ALLOWED_NETWORKS does)."""
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    return settings


@pytest.fixture(name="receivers")
def receivers_fixture() -> Iterator[Callable[..., LoopbackReceiver]]:
    """`receivers(default=None)` starts a receiver serving from a thread (a server process or a worker thread
    calls it while the test waits); all are stopped at the end of the test."""
    with contextlib.ExitStack() as stack:
        yield lambda default=None: stack.enter_context(LoopbackReceiver(default))


@pytest.fixture(name="receiver")
async def receiver_fixture() -> AsyncIterator[LoopbackReceiver]:
    async with LoopbackReceiver() as hook:
        yield hook
