"""A scripted OpenAI-compatible Chat Completions server for tests and local end-to-end runs.

    server = ChatServer(Text("Hello there. How can I help?"), Tools(Call("lookup", {"id": 7})))
    async with server:                  # in the current event loop (pytest-asyncio tests)
        ... LLM_BASE_URL = server.base_url ...
    with server:                        # or on its own loop in a thread (a Daphne process calls it)
        ...

`POST /v1/chat/completions` answers each request with the next scripted reply, in order, streamed
as Server-Sent Events the way OpenAI does (a role chunk, content or tool-call deltas, a finish chunk,
and, when the request asked for `stream_options.include_usage`, a usage chunk with `choices: []`,
then `data: [DONE]`). A script item may also be a function of the request body returning a reply
(for conversations whose order a test does not fix); `fallback` answers once the script is used up
(without one, an exhausted script is a 500 so that a test sees the surplus request).

Requests that ask for JSON output (`response_format`: the post-call analysis, realtime/analysis/) have a
script of their own, `analysis(...)`, recorded in `analysis_requests` (answered from `analysis_fallback`
once it is used up, else a 500): a call's analysis after it ends never takes a conversation's reply.

Every request is recorded (`server.requests`: path, headers including Authorization, JSON body), and
a client that leaves before the end of an answer is counted (`disconnects`, `client_left`).
`Gate` lets a test hold a reply mid-stream until it opens the gate, from any thread, so that a test
can prove that a client acts on the first deltas before the server has sent the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from testing.servers import ScriptedServer

DEFAULT_MODEL = "scripted-model"


class Gate:
    """A one-way latch opened from any thread and awaited on any loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._opened = False
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    @property
    def opened(self) -> bool:
        return self._opened

    def open(self) -> None:
        with self._lock:
            self._opened = True
            waiters, self._waiters = self._waiters, []
        for loop, event in waiters:
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits any more
                loop.call_soon_threadsafe(event.set)

    async def wait(self) -> None:
        event = asyncio.Event()
        with self._lock:
            if self._opened:
                return
            self._waiters.append((asyncio.get_running_loop(), event))
        await event.wait()


@dataclass(frozen=True)
class Call:
    """One scripted tool call. `arguments` is sent as JSON text unless `as_object` (an Ollama-like
    server sending an object); a str is sent verbatim (to script invalid JSON). `id=None` omits it."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = ""  # "" = a generated call_... id
    as_object: bool = False


@dataclass(frozen=True)
class Text:
    """A streamed text answer. A str is cut into about `pieces` deltas at word boundaries.

    `hold`: after `hold_after` content deltas, the server waits for this gate before sending more
    (and opens `holding` when it starts waiting); a reply that is not streamed is held whole."""

    text: str | list[str]
    pieces: int = 3
    usage: tuple[int, ...] | None = (25, 7)  # prompt, completion[, cached prompt] tokens
    model: str | None = None
    finish_reason: str = "stop"
    delay: float = 0.0  # seconds before the response starts (interrupted by stop())
    hold: Gate | None = None
    hold_after: int = 1
    holding: Gate | None = None


@dataclass(frozen=True)
class Tools:
    """Tool calls, optionally after some text. `whole=True` sends each call in one chunk (Ollama and
    Groq do); otherwise the first fragment carries id and name and the arguments follow in pieces."""

    calls: list[Call] | Call
    text: str = ""
    whole: bool = False
    usage: tuple[int, ...] | None = (40, 12)
    model: str | None = None
    delay: float = 0.0


@dataclass(frozen=True)
class Error:
    """An HTTP error with an OpenAI-style error body."""

    status: int
    message: str = "Something went wrong"
    type: str = "server_error"
    code: str | None = None
    delay: float = 0.0


Reply = Text | Tools | Error
ScriptItem = Reply | Callable[[dict[str, Any]], Reply]


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", [])

    @property
    def tools(self) -> list[dict[str, Any]]:
        return self.body.get("tools", [])


def split_words(text: str, pieces: int) -> list[str]:
    """`text` in about `pieces` parts cut before spaces; joined they give `text` back."""
    words = text.split(" ")
    if pieces <= 1 or len(words) <= 1:
        return [text]
    size = -(-len(words) // pieces)
    parts = [" ".join(words[start : start + size]) for start in range(0, len(words), size)]
    return [part if index == 0 else " " + part for index, part in enumerate(parts)]


class ChatServer(ScriptedServer):
    thread_name = "chat-server"

    def __init__(self, *script: ScriptItem, fallback: ScriptItem | None = None, host: str = "127.0.0.1") -> None:
        super().__init__(host=host)
        self.fallback = fallback
        self.requests: list[RecordedRequest] = []
        self.disconnects = 0  # answers the client stopped reading before their end
        self.client_left = Gate()  # opened at the first such disconnect
        self._script: deque[ScriptItem] = deque(script)
        self._ids = itertools.count(1)
        self.analysis_requests: list[RecordedRequest] = []
        self.analysis_fallback: ScriptItem | None = None
        self._analysis_script: deque[ScriptItem] = deque()

    # --- script and inspection -------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """The value for LLM_BASE_URL."""
        return f"http://{self.host}:{self.port}/v1"

    def script(self, *items: ScriptItem) -> ChatServer:
        self._script.extend(items)
        return self

    def reset(self, *items: ScriptItem, fallback: ScriptItem | None = None) -> ChatServer:
        """A new script for the next test of a shared server: what is left of the last one goes, `items`
        and `fallback` replace it (requests already recorded stay)."""
        self._script.clear()
        self._script.extend(items)
        self.fallback = fallback
        return self

    def analysis(self, *items: ScriptItem) -> ChatServer:
        """Replies to the JSON-output requests (response_format), in order."""
        self._analysis_script.extend(items)
        return self

    @property
    def remaining(self) -> int:
        return len(self._script)

    @property
    def last(self) -> RecordedRequest:
        return self.requests[-1]

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)

    # --- handlers ---------------------------------------------------------------------------------
    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": DEFAULT_MODEL, "object": "model"}]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            return _error_response(Error(400, "The body is not JSON", type="invalid_request_error"))
        recorded = RecordedRequest(path=request.path, headers=dict(request.headers), body=body)
        if isinstance(body, dict) and body.get("response_format"):
            self.analysis_requests.append(recorded)
            self.arrived.notify()
            item = self._analysis_script.popleft() if self._analysis_script else self.analysis_fallback
            reply = item if item is None or isinstance(item, Text | Tools | Error) else item(body)
        else:
            self.requests.append(recorded)
            self.arrived.notify()
            reply = self._next_reply(body)
        if reply is None:
            return _error_response(Error(500, "The test script has no reply left for this request"))
        if reply.delay and await self.interrupted(reply.delay):
            return _error_response(Error(503, "The test server is stopping"))
        if isinstance(reply, Error):
            return _error_response(reply)
        if not body.get("stream"):
            if isinstance(reply, Text) and reply.hold is not None:  # an answer in one piece is held whole
                if reply.holding is not None:
                    reply.holding.open()
                await reply.hold.wait()
            return web.json_response(self._completion(reply, body))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        stream = _Stream(response, completion_id=f"chatcmpl-{next(self._ids)}", model=reply.model or body["model"])
        try:
            await stream.send({"role": "assistant", "content": ""})
            if isinstance(reply, Text):
                await self._send_text(stream, reply)
            else:
                await self._send_tools(stream, reply)
            include_usage = (body.get("stream_options") or {}).get("include_usage")
            if include_usage and reply.usage is not None:
                await stream.usage(*reply.usage)
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except (asyncio.CancelledError, ConnectionResetError):
            # The client went away mid-answer (a barge-in closing the stream, or a timeout).
            self.disconnects += 1
            self.client_left.open()
            raise
        return response

    def _next_reply(self, body: dict[str, Any]) -> Reply | None:
        item = self._script.popleft() if self._script else self.fallback
        if item is None:
            return None
        return item if isinstance(item, Text | Tools | Error) else item(body)

    async def _send_text(self, stream: _Stream, reply: Text) -> None:
        pieces = reply.text if isinstance(reply.text, list) else split_words(reply.text, reply.pieces)
        for index, piece in enumerate(pieces):
            if reply.hold is not None and index == reply.hold_after:
                if reply.holding is not None:
                    reply.holding.open()
                await reply.hold.wait()
            await stream.send({"content": piece})
        await stream.send({}, finish_reason=reply.finish_reason)

    async def _send_tools(self, stream: _Stream, reply: Tools) -> None:
        if reply.text:
            for piece in split_words(reply.text, 2):
                await stream.send({"content": piece})
        calls = reply.calls if isinstance(reply.calls, list) else [reply.calls]
        for index, call in enumerate(calls):
            head: dict[str, Any] = {"index": index, "type": "function", "function": {"name": call.name}}
            call_id = call.id if call.id != "" else f"call_scripted_{next(self._ids)}"
            if call_id is not None:
                head["id"] = call_id
            if call.as_object:
                head["function"]["arguments"] = call.arguments
                await stream.send({"tool_calls": [head]})
                continue
            text = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
            if reply.whole:
                head["function"]["arguments"] = text
                await stream.send({"tool_calls": [head]})
                continue
            head["function"]["arguments"] = ""
            await stream.send({"tool_calls": [head]})
            third = max(1, -(-len(text) // 3))
            for start in range(0, len(text), third):
                fragment = {"index": index, "function": {"arguments": text[start : start + third]}}
                await stream.send({"tool_calls": [fragment]})
        await stream.send({}, finish_reason="tool_calls")

    def _completion(self, reply: Text | Tools, body: dict[str, Any]) -> dict[str, Any]:
        """The non-streaming answer (stream false)."""
        message: dict[str, Any] = {"role": "assistant", "content": None}
        finish_reason = "stop"
        if isinstance(reply, Text):
            message["content"] = "".join(reply.text) if isinstance(reply.text, list) else reply.text
            finish_reason = reply.finish_reason
        else:
            calls = reply.calls if isinstance(reply.calls, list) else [reply.calls]
            message["content"] = reply.text or None
            message["tool_calls"] = [
                {
                    "id": call.id or f"call_scripted_{next(self._ids)}",
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments),
                    },
                }
                for call in calls
            ]
            finish_reason = "tool_calls"
        answer: dict[str, Any] = {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or body.get("model", DEFAULT_MODEL),
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        }
        if reply.usage is not None:
            answer["usage"] = _usage(*reply.usage)
        return answer


class _Stream:
    def __init__(self, response: web.StreamResponse, *, completion_id: str, model: str) -> None:
        self.response = response
        self.base = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }

    async def send(self, delta: dict[str, Any], *, finish_reason: str | None = None) -> None:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        await self._write({**self.base, "choices": [choice]})

    async def usage(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int | None = None) -> None:
        await self._write(
            {**self.base, "choices": [], "usage": _usage(prompt_tokens, completion_tokens, cached_tokens)}
        )

    async def _write(self, chunk: dict[str, Any]) -> None:
        await self.response.write(f"data: {json.dumps(chunk)}\n\n".encode())


def _usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int | None = None) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached_tokens is not None:  # as OpenAI reports prompt caching
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return usage


def _error_response(error: Error) -> web.Response:
    body = {"error": {"message": error.message, "type": error.type, "param": None, "code": error.code}}
    return web.json_response(body, status=error.status)


@pytest.fixture
async def chat_server() -> AsyncIterator[ChatServer]:
    """A scripted server on the test's own loop: `chat_server.script(Text(...))`, `chat_server.base_url`."""
    async with ChatServer() as server:
        yield server


@pytest.fixture
def threaded_chat_server() -> Iterator[ChatServer]:
    """A scripted server on a thread of its own, for a separate process (Daphne) to call."""
    with ChatServer() as server:
        yield server
