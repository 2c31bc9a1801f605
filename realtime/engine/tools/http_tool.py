"""Custom tools of http agents: the tool's own toolUrl, toolMethod and toolHeaders.

Request: for POST, PUT and PATCH the arguments object is the JSON body; for GET, DELETE, HEAD and
OPTIONS it becomes the query string (no body): strings as they are, other values JSON-encoded
(numbers, true/false, nested objects and lists), null arguments left out, merged with a query
already in toolUrl (an argument replaces a parameter of the same name).

Reply: a JSON reply (Content-Type application/json or *+json) is the result (an object as it is,
another value as {"result": value}; invalid JSON is a failure); an empty 2xx reply is {}; any other
reply is {"text": <body text cut to MAX_TEXT_CHARS characters>}.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx

from kit.signing import merged_headers
from realtime.engine.tools.base import CallContext, ToolKind, as_object
from realtime.engine.tools.delivery import deliver, is_empty, parse_json

WHO = "The tool"
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
MAX_TEXT_CHARS = 4000


def _query_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def with_query(url: str, arguments: dict[str, Any]) -> str:
    """`url` with the arguments added to its query string."""
    added = [(str(name), _query_value(value)) for name, value in arguments.items() if value is not None]
    if not added:
        return url
    parts = urlsplit(url)
    query = parts.query
    names = {name for name, _ in added}
    if query and any(name in names for name, _ in parse_qsl(query, keep_blank_values=True)):
        kept = [(n, v) for n, v in parse_qsl(query, keep_blank_values=True) if n not in names]
        query = urlencode(kept)
    query = f"{query}&{urlencode(added)}" if query else urlencode(added)
    return urlunsplit(parts._replace(query=query))


def _is_json(response: httpx.Response) -> bool:
    content_type: str = response.headers.get("content-type", "")
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


class HttpTool(ToolKind):
    kind = "http"

    def __init__(self, *, url: str, method: str, headers: dict[str, str], timeout_s: float) -> None:
        self.url = url
        self.method = method.upper()
        self.headers = {str(k): str(v) for k, v in (headers or {}).items()}
        self.timeout_s = timeout_s

    async def invoke(self, arguments: dict[str, Any], *, tool_call_id: str, context: CallContext) -> dict[str, Any]:
        if self.method in BODY_METHODS:
            body = json.dumps(arguments, ensure_ascii=False, separators=(",", ":")).encode()
            headers = merged_headers(self.headers, {"Content-Type": "application/json"})
            response = await deliver(
                self.method, self.url, headers=headers, content=body, timeout_s=self.timeout_s, who=WHO
            )
        else:
            url = with_query(self.url, arguments)
            response = await deliver(self.method, url, headers=self.headers, timeout_s=self.timeout_s, who=WHO)
        if is_empty(response):
            return {}
        if _is_json(response):
            return as_object(parse_json(response, WHO))
        return {"text": response.text[:MAX_TEXT_CHARS]}
