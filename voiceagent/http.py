"""Django's ASGI handler for HTTP, with the request threads kept between requests.

Under ASGI, Django runs a request's synchronous parts (the middleware, a sync view, the signals) in a
thread of the request's own (asgiref's ThreadSensitiveContext), and stock Django starts a new thread
for every request and one more to stop it when the request ends. Starting and stopping two threads
cost more than the view of a typical API read (py-spy on GET /public/v1/agents, bench/api_load.py),
and the new thread opened a new database connection each time: a connection kept per thread
(CONN_MAX_AGE) never outlived its request.

Here each request still has a thread to itself, but the thread comes from a pool of idle ones and goes
back to it when the request is through. A thread whose request ended while its synchronous work was
still running (a client that disconnected during a slow view: Django cancels the request, but a thread
cannot be stopped) is not reused: it finishes that work and exits. At most KEPT_THREADS idle threads
are kept; more concurrent requests get new threads, stopped when they end.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from asgiref.sync import ThreadSensitiveContext
from django.core.handlers.asgi import ASGIHandler

KEPT_THREADS = 32


class RequestThread(ThreadPoolExecutor):
    """One thread (asgiref's rule for a thread-sensitive context's executor) that knows whether it is
    idle: its work runs in the order it was submitted, so it is idle once the last submitted call is done."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="request")
        self._last: Future[Any] | None = None

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        self._last = super().submit(fn, *args, **kwargs)
        return self._last

    @property
    def idle(self) -> bool:
        return self._last is None or self._last.done()


class PooledThreadsASGIHandler(ASGIHandler):
    """ASGIHandler whose requests run their synchronous parts on a kept RequestThread."""

    def __init__(self) -> None:
        super().__init__()
        self._idle: list[RequestThread] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)  # Django's own refusal
            return
        thread = self._idle.pop() if self._idle else RequestThread()
        try:
            # The outer context owns the thread; Django's own ThreadSensitiveContext inside
            # ASGIHandler.__call__ finds it entered and keeps it.
            async with ThreadSensitiveContext(executor=thread):
                await super().__call__(scope, receive, send)
        finally:
            if thread.idle and len(self._idle) < KEPT_THREADS:
                self._idle.append(thread)
            else:
                thread.shutdown(wait=False)
