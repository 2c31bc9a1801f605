"""The one door for outbound HTTP: webhooks, http tools, MCP servers, assistant requests.

Every request is refused unless every address its host resolves to is public, or lies in a
network that settings.OUTBOUND_ALLOWED_NETWORKS lists. Loopback, private, link-local (cloud
metadata included), multicast, reserved, shared (CGNAT) and unspecified addresses are refused,
also when an IPv6 address embeds one of them (IPv4-mapped, 6to4, Teredo, NAT64).

DNS rebinding: the guard resolves the name once per HTTP request (so on every redirect hop too),
checks every address, and then connects to the checked address itself: the request URL's host is
replaced by that IP while the Host header and the TLS SNI/certificate check keep the name. A second,
different DNS answer can therefore never be the one connected to.

`send` follows up to MAX_REDIRECTS redirects itself, checking each hop, and drops the caller's
headers (API keys of the destination) once a redirect leaves the original origin. It bounds the
whole exchange (DNS, connect, redirects, body) by the caller's timeout and caps the body size.
`send_sync` runs the same code on a private event loop for code without one (Celery tasks,
management commands, sync views). `mcp_http_client` gives the MCP SDK an httpx2 client
whose every request passes through the same guard.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import httpx2
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from voiceagent.errors import ApiError
from voiceagent.validation import url_problem

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

MAX_REDIRECTS = 5
DEFAULT_MAX_RESPONSE_BYTES = 5 * 1024 * 1024
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class OutboundBlocked(ApiError):
    """The destination may not be contacted (bad URL or a refused address). A 400 when it reaches a view."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status_code=400)


class OutboundTimeout(httpx.TimeoutException):
    """The caller's time budget ran out (DNS, connect, redirects and body together)."""


class OutboundTooLarge(httpx.HTTPError):
    """The response body is larger than the caller accepts."""


@lru_cache(maxsize=8)
def _parse_networks(values: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    try:
        return tuple(ipaddress.ip_network(v.strip(), strict=False) for v in values if v.strip())
    except ValueError as exc:
        raise ImproperlyConfigured(f"OUTBOUND_ALLOWED_NETWORKS: {exc}") from None


def allowed_networks() -> tuple[IPNetwork, ...]:
    """The configured exceptions, read on every call so that settings overrides apply at once."""
    return _parse_networks(tuple(settings.OUTBOUND_ALLOWED_NETWORKS))


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    found = [a for a in (address.ipv4_mapped, address.sixtofour) if a is not None]
    if address.teredo:
        found.extend(address.teredo)
    if address in _NAT64:
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def _category(address: IPAddress) -> str | None:
    """Why the address is not a public unicast one, or None when it is."""
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local (cloud metadata)"
    if address.is_multicast:
        return "multicast"
    if address.is_unspecified:
        return "unspecified"
    if address.is_private:
        return "private"
    if address.is_reserved:
        return "reserved"
    if not address.is_global:
        return "non-public"
    return None


def address_problem(address: IPAddress) -> str | None:
    """Why the guard refuses `address`, or None when it may be contacted."""
    networks = allowed_networks()

    def listed(candidate: IPAddress) -> bool:
        return any(candidate.version == n.version and candidate in n for n in networks)

    if listed(address):
        return None
    candidates: list[IPAddress] = [address]
    if isinstance(address, ipaddress.IPv6Address):
        candidates.extend(_embedded_ipv4(address))
    for candidate in candidates:
        if listed(candidate):
            continue
        category = _category(candidate)
        if category:
            return f"{address} is a {category} address; outbound requests may only reach public addresses"
    return None


def _split(url: str) -> tuple[str, int]:
    problem = url_problem(url)
    if problem:
        raise OutboundBlocked(f"Refused outbound URL: {problem}")
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.hostname or "", port


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _checked(host: str, infos: list[tuple[Any, ...]]) -> list[IPAddress]:
    addresses: list[IPAddress] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise OutboundBlocked(f"Refused outbound request: {host} does not resolve")
    for address in addresses:
        problem = address_problem(address)
        if problem:
            raise OutboundBlocked(f"Refused outbound request to {host}: {problem}")
    return addresses


def resolve_checked(host: str, port: int) -> list[IPAddress]:
    """Resolve `host` and return its addresses, refusing it when any address is not allowed."""
    literal = _literal(host)
    if literal is not None:
        return _checked(host, [(None, None, None, None, (str(literal), port))])
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise OutboundBlocked(f"Refused outbound request: {host} does not resolve ({exc})") from None
    return _checked(host, infos)


async def aresolve_checked(host: str, port: int) -> list[IPAddress]:
    literal = _literal(host)
    if literal is not None:
        return _checked(host, [(None, None, None, None, (str(literal), port))])
    try:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise OutboundBlocked(f"Refused outbound request: {host} does not resolve ({exc})") from None
    return _checked(host, infos)


def check_url(url: str) -> None:
    """Raise OutboundBlocked unless `url` is well formed and its host resolves only to allowed addresses."""
    host, port = _split(url)
    resolve_checked(host, port)


async def acheck_url(url: str) -> None:
    host, port = _split(url)
    await aresolve_checked(host, port)


def _pinned(request: Any, address: IPAddress) -> Any:
    """The same request aimed at the checked address; Host header and TLS name stay the original host."""
    host = request.url.host
    if _literal(host) is not None:
        return request
    extensions = dict(request.extensions)
    extensions.setdefault("sni_hostname", host)
    return type(request)(
        request.method,
        request.url.copy_with(host=str(address)),
        headers=request.headers,
        stream=request.stream,
        extensions=extensions,
    )


def _request_port(request: Any) -> int:
    return request.url.port or (443 if request.url.scheme == "https" else 80)


async def _guarded(request: Any) -> Any:
    """Check the request's destination now (this hop) and aim it at the checked address."""
    if request.url.scheme not in ("http", "https"):
        raise OutboundBlocked("Refused outbound request: only http and https are allowed")
    addresses = await aresolve_checked(request.url.host, _request_port(request))
    return _pinned(request, addresses[0])


class GuardedAsyncTransport(httpx.AsyncBaseTransport):
    """httpx transport that checks and pins the destination of every request (each redirect hop too)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._inner.handle_async_request(await _guarded(request))

    async def aclose(self) -> None:
        await self._inner.aclose()


class GuardedMcpTransport(httpx2.AsyncBaseTransport):
    """The same guard for the httpx2 client the MCP SDK speaks through."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await self._inner.handle_async_request(await _guarded(request))

    async def aclose(self) -> None:
        await self._inner.aclose()


@lru_cache(maxsize=1)
def _ssl_context() -> ssl.SSLContext:
    # Built once: loading the CA bundle costs milliseconds, and clients are short-lived (see below).
    return httpx.create_ssl_context()


def _client(timeout_s: float) -> httpx.AsyncClient:
    # One short-lived client per request: connections are keyed by the pinned IP, so a pooled TLS
    # connection must never be reused for a different host name that resolves to the same address.
    # trust_env=False: proxy variables would otherwise route around the transport's checks.
    return httpx.AsyncClient(
        transport=GuardedAsyncTransport(httpx.AsyncHTTPTransport(verify=_ssl_context(), trust_env=False)),
        timeout=httpx.Timeout(timeout_s),
        trust_env=False,
    )


async def send(
    method: str,
    url: str,
    *,
    headers: dict[str, str] | None = None,
    json: Any = None,
    content: bytes | str | None = None,
    timeout_s: float,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
) -> httpx.Response:
    """Send one request through the guard and return the response with its body read.

    Raises OutboundBlocked (refused destination, also after a redirect), OutboundTimeout (the whole
    exchange took longer than `timeout_s`), OutboundTooLarge, or another httpx.HTTPError.
    """
    if timeout_s <= 0:
        raise ValueError("timeout_s must be positive")
    _split(url)  # a malformed URL is refused before any network activity
    try:
        with anyio.fail_after(timeout_s):
            async with _client(timeout_s) as client:
                request = client.build_request(method, url, headers=headers, json=json, content=content)
                return await _exchange(client, request, headers or {}, max_response_bytes)
    except TimeoutError:
        raise OutboundTimeout(f"No complete response within {timeout_s:g} s") from None
    except httpx.TimeoutException as exc:
        raise OutboundTimeout(f"No complete response within {timeout_s:g} s") from exc


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port


async def _exchange(
    client: httpx.AsyncClient, request: httpx.Request, caller_headers: dict[str, str], max_response_bytes: int
) -> httpx.Response:
    """Follow redirects by hand (every hop is checked by the transport); the caller's headers (API keys
    of the destination) are not carried to another origin."""
    origin = _origin(request.url)
    for _ in range(MAX_REDIRECTS + 1):
        response = await client.send(request, stream=True, follow_redirects=False)
        try:
            if response.next_request is None:
                body = bytearray()
                async for chunk in response.aiter_raw():
                    body.extend(chunk)
                    if len(body) > max_response_bytes:
                        raise OutboundTooLarge(f"Response larger than {max_response_bytes} bytes")
                # A detached copy whose body is already read (and decoded on access, as httpx would).
                return httpx.Response(
                    response.status_code,
                    headers=response.headers,
                    content=bytes(body),
                    request=response.request,
                    extensions={"http_version": response.extensions.get("http_version", b"HTTP/1.1")},
                )
            request = response.next_request
        finally:
            await response.aclose()
        if _origin(request.url) != origin:
            for name in caller_headers:
                request.headers.pop(name, None)
    raise httpx.TooManyRedirects(f"More than {MAX_REDIRECTS} redirects", request=request)


def send_sync(
    method: str,
    url: str,
    *,
    headers: dict[str, str] | None = None,
    json: Any = None,
    content: bytes | str | None = None,
    timeout_s: float,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
) -> httpx.Response:
    """`send` for code without a running event loop (Celery tasks, commands, sync views)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("send_sync() called from a running event loop; await send() instead")
    return asyncio.run(
        send(
            method,
            url,
            headers=headers,
            json=json,
            content=content,
            timeout_s=timeout_s,
            max_response_bytes=max_response_bytes,
        )
    )


def mcp_http_client(*, headers: dict[str, str] | None = None, timeout_s: float) -> httpx2.AsyncClient:
    """An httpx2 client for `mcp.client.streamable_http.streamable_http_client`, guarded like `send`.

    The caller enters it (`async with`) and should also bound the whole MCP exchange with its own
    deadline (for example anyio.fail_after), as the SDK keeps a response stream open.
    """
    return httpx2.AsyncClient(
        transport=GuardedMcpTransport(httpx2.AsyncHTTPTransport(trust_env=False)),
        headers=headers,
        timeout=httpx2.Timeout(timeout_s),
        trust_env=False,
    )
