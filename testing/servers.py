"""Loopback ports and the one lifecycle of the scripted servers the tests and bench/ run (`ScriptedServer`)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import socket
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Self, TypeVar

from aiohttp import web

from testing.waiting import Signal

T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def closed_port_url(path: str = "/") -> str:
    """A loopback URL nothing listens on."""
    return f"http://127.0.0.1:{free_port()}{path}"


class ScriptedServer:
    """The lifecycle every scripted stand-in shares: an aiohttp application on a loopback port, run on the
    caller's event loop (`async with server:`, pipeline tests) or on a loop of its own in a thread (`with
    server:`), so that a Daphne process, a blocking client or a Playwright test can call it while the test
    thread waits. A subclass adds its routes (`routes`) and its script; `port` 0 takes a free one when it
    starts, another value is that port (known before it starts).

    Handlers are cancelled when their client goes away (`handler_cancellation`: a timed-out client), and
    stopping does not wait long for slow handlers: a scripted delay ends early when the server stops
    (`interrupted`)."""

    thread_name = "scripted-server"
    client_max_size = 1024**2  # aiohttp's default request body limit
    handler_cancellation = True
    shutdown_timeout = 1.0

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None
        self._stopping: asyncio.Event | None = None
        self._server_loop: asyncio.AbstractEventLoop | None = None  # the loop it serves on
        self._thread: threading.Thread | None = None
        self._thread_loop: asyncio.AbstractEventLoop | None = None
        self.arrived = Signal()  # notified each time the server records something (a request, a socket)

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    # --- on the current loop ---------------------------------------------------------------------
    async def astart(self) -> Self:
        app = web.Application(client_max_size=self.client_max_size)
        self.routes(app)
        self._server_loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._runner = web.AppRunner(
            app,
            handler_cancellation=self.handler_cancellation,
            shutdown_timeout=self.shutdown_timeout,
            access_log=None,
        )
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        self.port = self._runner.addresses[0][1]
        return self

    async def before_stop(self) -> None:
        """What a subclass ends before the application stops (its open sockets)."""

    async def astop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()
        await self.before_stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        return await self.astart()

    async def __aexit__(self, *exc: object) -> None:
        await self.astop()

    # --- on a loop of its own in a thread --------------------------------------------------------
    def start(self, timeout: float = 10.0) -> Self:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name=self.thread_name, daemon=True)
        thread.start()
        self._thread, self._thread_loop = thread, loop
        try:
            asyncio.run_coroutine_threadsafe(self.astart(), loop).result(timeout)
        except BaseException:
            self._end_thread(timeout)
            raise
        return self

    def stop(self, timeout: float = 10.0) -> None:
        if self._thread is None or self._thread_loop is None:
            return
        with contextlib.suppress(RuntimeError, TimeoutError):
            asyncio.run_coroutine_threadsafe(self.astop(), self._thread_loop).result(timeout)
        self._end_thread(timeout)

    def _end_thread(self, timeout: float) -> None:
        assert self._thread is not None and self._thread_loop is not None
        loop = self._thread_loop
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            loop.close()
        self._thread = self._thread_loop = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- for handlers and tests ------------------------------------------------------------------
    async def until(self, check: Callable[[], T], *, what: str, timeout: float = 30) -> T:
        """Wait, bounded, until `check()` is truthy, checked whenever the server records something."""
        return await self.arrived.until(check, what=what, timeout=timeout)

    def until_sync(self, check: Callable[[], T], *, what: str, timeout: float = 30) -> T:
        """`until` for a blocking test (the server on a loop of its own)."""
        return self.arrived.until_sync(check, what=what, timeout=timeout)

    async def interrupted(self, seconds: float) -> bool:
        """Wait `seconds` unless the server stops first (then True)."""
        assert self._stopping is not None
        try:
            async with asyncio.timeout(seconds):
                await self._stopping.wait()
        except TimeoutError:
            return False
        return True

    def call_soon(self, callback: Callable[[], object]) -> None:
        """Run `callback` on the server's loop, from any thread (a test releasing held answers)."""
        if self._server_loop is not None:
            with contextlib.suppress(RuntimeError):  # that loop is closed: the server is gone
                self._server_loop.call_soon_threadsafe(callback)

    async def run(self, action: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        """Run `action()` on the server's loop (thread mode) or here, and wait for it."""
        if self._thread_loop is None:
            return await action()
        future: concurrent.futures.Future[Any] = asyncio.run_coroutine_threadsafe(action(), self._thread_loop)
        return await asyncio.wrap_future(future)

    def run_sync(self, action: Callable[[], Coroutine[Any, Any, Any]], timeout: float = 30.0) -> Any:
        """`run` for a caller without an event loop of its own (a Playwright test): thread mode only."""
        assert self._thread_loop is not None, "run_sync needs the server on a loop of its own (with server:)"
        return asyncio.run_coroutine_threadsafe(action(), self._thread_loop).result(timeout)
