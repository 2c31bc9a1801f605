"""The `openai` brain: any OpenAI-compatible Chat Completions server (OpenAI, Groq, xAI, vLLM,
llama.cpp's llama-server, Ollama), with tools, streamed.

Settings: LLM_BASE_URL, LLM_API_KEY (empty for local servers), LLM_MODEL (required),
LLM_TIMEOUT_SECONDS (the whole model request, stream included), LLM_MAX_TOKENS (0: no cap),
LLM_TEMPERATURE (unset: the server's default).

One request per `respond()`: content deltas are yielded as `TextPiece`s the moment they arrive (the
shell speaks each sentence once complete), tool-call fragments are put together per `index` and
yielded as `ToolCall`s once the stream ends, then one `Usage`. Every failure leaves `respond()` as a
`ProviderError` whose message never contains the API key.

Tolerated server quirks (protocols.md section 4): a whole call in one chunk (Ollama, Groq),
`arguments` already an object, a missing or repeated call id (we make one), a missing `index`,
usage only in Groq's `x_groq`, no usage at all (zeros), and a leading `<think>...</think>` block
of reasoning models served without a reasoning parser (not spoken).

Arguments that are not a JSON object are replaced by `{}` (and logged without their text, which may
hold caller data): the dispatcher validates them against the tool's schema and tells the model what
is missing, which gives it a chance to call again.

The request goes straight to LLM_BASE_URL, not through the egress guard (kit/egress.py): the address is the
operator's deployment setting (often a loopback Ollama), not a tenant-supplied URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import re
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from django.conf import settings

from kit.providers import ProviderError
from realtime.engine.contracts import BrainContext, BrainOutput, TextPiece, ToolCall, ToolSpec, Turn, Usage
from realtime.engine.instructions import agent_instructions, language_name

if TYPE_CHECKING:
    import openai

logger = logging.getLogger(__name__)

PROVIDER = "openai"
# The openai package is imported where a request is made, not with this module: it takes about half a
# second of CPU to import, which every process would pay at start whatever LLM_PROVIDER is. A server whose
# brain is this one imports it in its preload thread (preload() below).
# The SDK refuses to start without a key; local servers (Ollama, llama.cpp, vLLM) ignore it.
PLACEHOLDER_API_KEY = "not-needed"
# Status codes for which repeating the same request cannot help.
PERMANENT_STATUSES = frozenset({400, 401, 403, 404, 422})
ERROR_DETAIL_CHARS = 200


def preload() -> None:
    """Import the SDK before the first conversation (the preload thread at server start): imported by the
    first conversation instead, it would hold up the event loop, and every live call on it, for half a second."""
    importlib.import_module("openai")


def configuration_problems() -> list[str]:
    """What is missing or invalid in the LLM_* settings for LLM_PROVIDER=openai (empty when fine)."""
    problems = []
    base_url = settings.LLM_BASE_URL
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        problems.append("LLM_BASE_URL must be an http(s) URL such as https://api.openai.com/v1")
    if not settings.LLM_MODEL.strip():
        problems.append("LLM_MODEL is not set (the model name the server knows, e.g. gpt-4o-mini or llama3.1:8b)")
    if parts.hostname == "api.openai.com" and not settings.LLM_API_KEY:
        problems.append("LLM_API_KEY is not set (api.openai.com requires one)")
    if not settings.LLM_TIMEOUT_SECONDS > 0:
        problems.append("LLM_TIMEOUT_SECONDS must be more than 0")
    if settings.LLM_MAX_TOKENS < 0:
        problems.append("LLM_MAX_TOKENS must be 0 (no cap) or a positive number of tokens")
    temperature = settings.LLM_TEMPERATURE
    if temperature is not None and not 0 <= temperature <= 2:
        problems.append("LLM_TEMPERATURE must be between 0 and 2")
    return problems


class OpenAIChatBrain:
    """One per conversation (one HTTP client, closed by `aclose()`). Raises a permanent
    ProviderError at once when the settings are incomplete."""

    def __init__(self, *, language: str) -> None:
        problems = configuration_problems()
        if problems:
            raise ProviderError("; ".join(problems), permanent=True)
        self.language = language
        self.model = settings.LLM_MODEL.strip()
        self.timeout = float(settings.LLM_TIMEOUT_SECONDS)
        self.max_tokens = settings.LLM_MAX_TOKENS or None
        self.temperature = settings.LLM_TEMPERATURE
        base_url = settings.LLM_BASE_URL.rstrip("/")
        parts = urlsplit(base_url)
        # For messages: host and port only (never the userinfo of a URL that carries credentials).
        self.server = parts.hostname + (f":{parts.port}" if parts.port else "")
        self._api_key = settings.LLM_API_KEY
        # OpenAI's reasoning models refuse max_tokens; other servers know only max_tokens (older vLLM,
        # llama.cpp, Ollama).
        self._max_tokens_field = "max_completion_tokens" if parts.hostname == "api.openai.com" else "max_tokens"
        # No SDK retries: its backoff would spend the caller's waiting time; one retry of a failed
        # connection (a pooled connection the server closed) is done here, before anything is said.
        import openai  # see the note at PROVIDER

        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=self._api_key or PLACEHOLDER_API_KEY,
            timeout=self.timeout,
            max_retries=0,
        )

    async def aclose(self) -> None:
        await self._client.close()

    # --- the request ----------------------------------------------------------------------------
    def request(self, context: BrainContext, history: Sequence[Turn]) -> dict[str, Any]:
        """The keyword arguments of `chat.completions.create` for this turn."""
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": system_prompt(context, context.language or self.language)},
                *history_messages(history),
            ],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if context.tools:
            request["tools"] = [tool_definition(tool) for tool in context.tools]
            request["tool_choice"] = "auto"
        if self.max_tokens:
            request[self._max_tokens_field] = self.max_tokens
        if self.temperature is not None:
            request["temperature"] = self.temperature
        return request

    async def respond(self, context: BrainContext, history: Sequence[Turn]) -> AsyncIterator[BrainOutput]:
        import openai  # see the note at PROVIDER

        budget = _Budget(self.timeout)
        answer = _Answer(self.model)
        stream: openai.AsyncStream[Any] | None = None
        try:
            stream = await self._open(self.request(context, history), budget)
            while True:
                async with budget.waiting():
                    chunk = await anext(stream, None)
                if chunk is None:
                    break
                text = answer.add(chunk)
                if text:
                    yield TextPiece(text)
            tail = answer.finish()
            if tail:
                yield TextPiece(tail)
            for call in answer.tool_calls():
                yield call
            yield answer.usage()
        except ProviderError:
            raise
        except (TimeoutError, openai.APITimeoutError):
            raise ProviderError(f"The language model did not answer within {self.timeout:g} s") from None
        except openai.APIConnectionError:
            raise ProviderError(f"Cannot reach the language model server ({self.server})") from None
        except openai.APIStatusError as exc:
            raise self._status_error(exc) from None
        except openai.APIError as exc:  # an error event inside the stream
            detail = _detail(exc.body, self._api_key) or _redact(exc.message, self._api_key)[:ERROR_DETAIL_CHARS]
            raise ProviderError(f"The language model server reported an error: {detail}") from None
        except Exception as exc:  # noqa: BLE001 - the shell expects ProviderError only
            logger.warning("Unexpected failure of the openai brain: %s", type(exc).__name__)
            raise ProviderError(f"Unexpected answer from the language model server ({type(exc).__name__})") from None
        finally:
            if stream is not None:
                with contextlib.suppress(Exception):
                    await stream.close()

    async def _open(self, request: dict[str, Any], budget: _Budget) -> openai.AsyncStream[Any]:
        import openai  # see the note at PROVIDER

        for attempt in range(2):
            try:
                async with budget.waiting():
                    stream: openai.AsyncStream[Any] = await self._client.chat.completions.create(**request)
                    return stream
            except openai.APITimeoutError:
                raise
            except openai.APIConnectionError:
                if attempt or budget.left <= 0:
                    raise
                logger.info("Retrying the language model request once after a connection error")
        raise AssertionError("unreachable")

    def _status_error(self, exc: openai.APIStatusError) -> ProviderError:
        status = exc.status_code
        hint = {
            401: " (check LLM_API_KEY)",
            403: " (check LLM_API_KEY)",
            404: " (check LLM_BASE_URL and LLM_MODEL)",
            429: " (rate limited)",
        }.get(status, "")
        detail = _detail(exc.body, self._api_key)
        message = f"The language model server answered HTTP {status}{hint}" + (f": {detail}" if detail else "")
        return ProviderError(message, permanent=status in PERMANENT_STATUSES)


# --- the answer, put together from the stream ----------------------------------------------------
@dataclass
class _PendingCall:
    id: str = ""
    name: str = ""
    arguments: str = ""
    object_arguments: dict[str, Any] | None = None


class _Answer:
    def __init__(self, model: str) -> None:
        self.model = model
        self.finish_reason = ""
        self._calls: dict[int, _PendingCall] = {}
        self._usage: Any = None
        self._think = _ThinkFilter()

    def add(self, chunk: Any) -> str:
        """Take one chunk; return the words to speak that it brings."""
        if getattr(chunk, "model", None):
            self.model = chunk.model
        usage = getattr(chunk, "usage", None) or (_extra(chunk).get("x_groq") or {}).get("usage")
        if usage:
            self._usage = usage
        text = ""
        # getattr throughout: chunks are not validated, and servers leave out fields OpenAI always sends.
        for choice in getattr(chunk, "choices", None) or ():
            if getattr(choice, "index", 0) not in (0, None):
                continue
            delta = getattr(choice, "delta", None)
            content = getattr(delta, "content", None)
            if isinstance(content, str) and content:
                text += self._think.feed(content)
            for fragment in getattr(delta, "tool_calls", None) or ():
                self._add_fragment(fragment)
            if getattr(choice, "finish_reason", None):
                self.finish_reason = choice.finish_reason
        return text

    def _add_fragment(self, fragment: Any) -> None:
        call_id = getattr(fragment, "id", None)
        call_id = call_id if isinstance(call_id, str) else ""
        index = getattr(fragment, "index", None)
        index = index if isinstance(index, int) else self._index_without_one(call_id)
        call = self._calls.setdefault(index, _PendingCall())
        if call_id and not call.id:
            call.id = call_id
        function = getattr(fragment, "function", None)
        name = getattr(function, "name", None)
        if isinstance(name, str) and name and not call.name:
            call.name = name
        arguments = getattr(function, "arguments", None)
        if isinstance(arguments, dict):
            call.object_arguments = arguments
        elif isinstance(arguments, str):
            call.arguments += arguments

    def _index_without_one(self, call_id: str) -> int:
        """A server that sends no `index`: a new id starts a new call, otherwise it continues the last."""
        for index, call in self._calls.items():
            if call_id and call.id == call_id:
                return index
        if call_id or not self._calls:
            return len(self._calls)
        return max(self._calls)

    def finish(self) -> str:
        if self.finish_reason == "length":
            logger.info("The language model's answer was cut at LLM_MAX_TOKENS")
        return self._think.flush()

    def tool_calls(self) -> Iterator[ToolCall]:
        seen: set[str] = set()
        for index in sorted(self._calls):
            call = self._calls[index]
            if not call.name:
                logger.warning("The language model sent a tool call without a name; it is ignored")
                continue
            call_id = call.id if call.id and call.id not in seen else f"call_{uuid.uuid4().hex}"
            seen.add(call_id)
            arguments = (
                call.object_arguments
                if call.object_arguments is not None
                else parse_arguments(call.arguments, call.name)
            )
            yield ToolCall(id=call_id, name=call.name, arguments=arguments)

    def usage(self) -> Usage:
        usage = self._usage
        return Usage(
            provider=PROVIDER,
            model=self.model,
            input_tokens=reported_tokens(usage, "prompt_tokens"),
            output_tokens=reported_tokens(usage, "completion_tokens"),
            cached_input_tokens=reported_tokens(_field(usage, "prompt_tokens_details"), "cached_tokens"),
        )


def parse_arguments(text: str, name: str) -> dict[str, Any]:
    """The arguments of a call as a JSON object; `{}` (logged) when they are not one."""
    text = text.strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
        if isinstance(value, str):  # some models encode the object twice
            value = json.loads(value)
    except ValueError as exc:
        logger.warning(
            "The language model sent arguments for tool %s that are not JSON (%s at character %s of %s); "
            "calling it with none",
            name,
            getattr(exc, "msg", "invalid"),
            getattr(exc, "pos", "?"),
            len(text),
        )
        return {}
    if value is None:
        return {}
    if not isinstance(value, dict):
        logger.warning(
            "The language model sent arguments for tool %s that are not an object; calling it with none", name
        )
        return {}
    return value


class _ThinkFilter:
    """Drops a leading <think>...</think> block (reasoning models served without a reasoning parser
    put their thoughts in the content); all other text passes through at once."""

    OPEN, CLOSE = "<think>", "</think>"

    def __init__(self) -> None:
        self._state = "start"
        self._buffer = ""

    def feed(self, text: str) -> str:
        if self._state == "speaking":
            return text
        self._buffer += text
        if self._state == "start":
            head = self._buffer.lstrip()
            if not head or (len(head) < len(self.OPEN) and self.OPEN.startswith(head)):
                return ""  # cannot tell yet
            if not head.startswith(self.OPEN):
                self._state = "speaking"
                spoken, self._buffer = self._buffer, ""
                return spoken
            self._state = "thinking"
            self._buffer = head[len(self.OPEN) :]
        end = self._buffer.find(self.CLOSE)
        if end < 0:
            self._buffer = self._buffer[-len(self.CLOSE) :]  # enough to find a tag split across deltas
            return ""
        self._state = "speaking"
        spoken, self._buffer = self._buffer[end + len(self.CLOSE) :].lstrip(), ""
        return spoken

    def flush(self) -> str:
        if self._state == "thinking":
            logger.info("The language model's answer ended inside a <think> block; nothing was said")
        spoken = self._buffer if self._state == "start" else ""
        self._buffer = ""
        return spoken


class _Budget:
    """The time the server may take for one request: only time spent waiting on it counts (not the
    time the shell takes between two pieces), and no timeout spans a `yield`."""

    def __init__(self, seconds: float) -> None:
        self.left = seconds

    @contextlib.asynccontextmanager
    async def waiting(self) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            async with asyncio.timeout(max(self.left, 0.0)):
                yield
        finally:
            self.left -= loop.time() - started


# --- the messages ------------------------------------------------------------------------------------
def system_prompt(context: BrainContext, language: str) -> str:
    """The chat model's system prompt: the agent's instructions for a model whose words are read aloud
    by the cascade's voice, after the opening already spoken."""
    spoken = [f'"{text.strip()}"' for text in (context.disclosure, context.greeting) if text.strip()]
    already = (
        f"The call is under way: you have already said {' and '.join(spoken)}. Do not repeat that, do not greet the "
        "caller again and do not introduce yourself again unless they ask who you are."
        if spoken
        else "The call is under way: do not greet the caller again."
    )
    words = language_name(language)
    return agent_instructions(
        context,
        call="a phone call",
        speaking=(
            f"Always answer in {words}: your words are read aloud by a {words} voice.",
            already,
            "Your words are spoken, not read: keep each answer brief, one to three short sentences.",
            "Use plain spoken words: no markdown, lists, headings, emoji or URLs. Say numbers, amounts, dates "
            "and times the way a person says them aloud.",
        ),
        tool_use="Use your tools when they help the caller. Never invent a tool result: if you need information, "
        "call the tool and wait for its result; if a tool fails, say so briefly.",
    )


def tool_definition(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


def history_messages(history: Sequence[Turn]) -> list[dict[str, Any]]:
    """The conversation as Chat Completions messages, always a valid request: an assistant message's
    tool calls keep only those answered by the tool turns right after it (an interrupted round or a
    cut history leaves calls without results, which servers refuse), and tool turns that answer no
    call just before them are dropped."""
    messages: list[dict[str, Any]] = []
    turns = list(history)
    position = 0
    while position < len(turns):
        turn = turns[position]
        position += 1
        if turn.role == "user":
            if turn.text.strip():
                messages.append({"role": "user", "content": turn.text})
        elif turn.role == "assistant" and turn.tool_calls:
            results: dict[str, Turn] = {}
            while position < len(turns) and turns[position].role == "tool":
                result = turns[position]
                results.setdefault(result.tool_call_id, result)
                position += 1
            answered = [call for call in turn.tool_calls if call.id in results]
            if answered:
                messages.append(
                    {
                        "role": "assistant",
                        "content": turn.text or None,
                        "tool_calls": [_call_message(call) for call in answered],
                    }
                )
                messages.extend(
                    {"role": "tool", "tool_call_id": call.id, "content": results[call.id].text or "{}"}
                    for call in answered
                )
            elif turn.text.strip():
                messages.append({"role": "assistant", "content": turn.text})
        elif turn.role == "assistant":
            if turn.text.strip():
                messages.append({"role": "assistant", "content": turn.text})
        # A tool turn reached here answers no call just before it (orphan): dropped; unknown roles too.
    return messages


def _call_message(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)},
    }


# --- small helpers -------------------------------------------------------------------------------------
_SECRETISH = re.compile(r"\b(?:sk|gsk|xai|pk|rk)[-_][\w\-*.]{4,}|\S*\*{3,}\S*|\b[\w\-]{32,}\b")


def _redact(text: str, api_key: str) -> str:
    if api_key:
        text = text.replace(api_key, "[redacted]")
    return _SECRETISH.sub("[redacted]", text)


def _detail(body: object, api_key: str) -> str:
    """The server's short error message, without anything that looks like a key."""
    message: object = None
    if isinstance(body, dict):
        message = body.get("message") or body.get("error") or body.get("detail")
        if isinstance(message, dict):
            message = message.get("message")
    elif isinstance(body, str) and not body.lstrip().startswith("<"):  # not an HTML error page
        message = body
    if not isinstance(message, str):
        return ""
    message = " ".join(_redact(message, api_key).split())
    return message if len(message) <= ERROR_DETAIL_CHARS else message[: ERROR_DETAIL_CHARS - 1] + "…"


def _extra(model: Any) -> dict[str, Any]:
    return getattr(model, "model_extra", None) or {}


def _field(usage: Any, name: str) -> Any:
    return usage.get(name) if isinstance(usage, dict) else getattr(usage, name, None)


def reported_tokens(usage: Any, name: str) -> int:
    """A count the provider reported (0 when it did not: a server may leave any of them out)."""
    value = _field(usage, name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
