"""How tools and the dynamic prompt reach the network: one request through `kit.egress.send`
(the guard), its failures turned into `ProviderError` in plain words, and the signed webhook POST
that webhook tools and the assistant request share.

Signing (contract, Authentication 4): the payload is serialized once, those exact bytes are signed
(`x-service-signature: sha256=<lowercase hex HMAC-SHA256 keyed by serverSecret>`) and those same
bytes are sent, so a receiver verifying the raw body always agrees (kit/signing.py, shared with the
call events of calls/webhooks/events.py).
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import httpx

from kit import egress
from kit.providers import ProviderError
from kit.signing import SIGNATURE_HEADER, json_body, merged_headers, signature
from realtime.engine.tools.base import ToolTimeout, seconds_words

# The largest reply accepted from a webhook, an http tool or serverUrl: a reply is read by a model
# during a phone call, so anything bigger is a mistake of the tool (it fails with a clear message).
MAX_REPLY_BYTES = 256 * 1024


@dataclass(frozen=True)
class ServerEndpoint:
    """An agent's serverUrl with its headers and (decrypted) signing secret, read once per session."""

    url: str
    headers: dict[str, str]
    secret: str | None

    @classmethod
    def of(cls, agent: Any) -> ServerEndpoint | None:
        if not agent.server_url:
            return None
        return cls(
            url=agent.server_url,
            headers={str(k): str(v) for k, v in (agent.server_headers or {}).items()},
            secret=agent.server_secret or None,
        )


@dataclass
class Exchange:
    """One delivery as it went out, and the response that came back (None when none did)."""

    method: str
    url: str
    headers: dict[str, str]
    body: bytes | None
    response: httpx.Response | None = None


# Set by the dashboard's tool test (agents/tools/admin.py) to see each exchange of its call; None otherwise.
watched_exchanges: ContextVar[list[Exchange] | None] = ContextVar("watched_exchanges", default=None)


async def deliver(
    method: str,
    url: str,
    *,
    headers: dict[str, str],
    content: bytes | None = None,
    timeout_s: float,
    who: str,
) -> httpx.Response:
    """Send one request through the guard and return its 2xx response (body read, at most
    MAX_REPLY_BYTES). `who` starts every failure message ("The tool", "serverUrl")."""
    watched = watched_exchanges.get()
    exchange = None
    if watched is not None:
        exchange = Exchange(method, url, dict(headers), content)
        watched.append(exchange)
    try:
        response = await egress.send(
            method, url, headers=headers, content=content, timeout_s=timeout_s, max_response_bytes=MAX_REPLY_BYTES
        )
    except egress.EgressBlocked as exc:
        raise ProviderError(f"{who} may not be contacted: {exc.message}", permanent=True) from None
    except egress.EgressTimeout:
        raise ToolTimeout(f"{who} did not answer within {seconds_words(timeout_s)}") from None
    except egress.EgressTooLarge:
        raise ProviderError(f"{who} answered with more than {MAX_REPLY_BYTES // 1024} KB", permanent=True) from None
    except httpx.TooManyRedirects:
        raise ProviderError(f"{who} redirected too many times", permanent=True) from None
    except httpx.ConnectError:
        raise ProviderError(f"{who} could not be reached (the connection failed)") from None
    except httpx.HTTPError as exc:
        raise ProviderError(f"{who} could not be reached ({type(exc).__name__})") from None
    except (httpx.InvalidURL, ValueError, TypeError):
        raise ProviderError(f"{who} could not be called (invalid URL or header)", permanent=True) from None
    if exchange is not None:
        exchange.response = response
    status = response.status_code
    if not 200 <= status < 300:
        raise ProviderError(f"{who} answered HTTP {status}", permanent=400 <= status < 500 and status not in (408, 429))
    return response


def parse_json(response: httpx.Response, who: str) -> Any:
    try:
        return json.loads(response.content)
    except (ValueError, RecursionError):
        raise ProviderError(f"{who}'s reply is not valid JSON", permanent=True) from None


def is_empty(response: httpx.Response) -> bool:
    return not response.content.strip()


async def post_event(
    endpoint: ServerEndpoint, payload: dict[str, Any], *, timeout_s: float, who: str
) -> httpx.Response:
    """POST a webhook event to serverUrl: JSON body, serverHeaders, and the signature when a secret is set."""
    body = json_body(payload)
    ours = {"Content-Type": "application/json"}
    if endpoint.secret:
        ours[SIGNATURE_HEADER] = signature(endpoint.secret, body)
    return await deliver(
        "POST", endpoint.url, headers=merged_headers(endpoint.headers, ours), content=body, timeout_s=timeout_s, who=who
    )
