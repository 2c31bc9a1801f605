"""The egress guard: the one door every outbound HTTP request goes through (webhooks, http tools, MCP
servers, assistant requests).

Every request is refused unless every address its host resolves to is public, or lies in a
network that settings.OUTBOUND_ALLOWED_NETWORKS lists. "Public" is decided by this module's own
table of the IANA special-purpose registries (below), not by the interpreter's `ipaddress`: loopback,
private, link-local (cloud metadata included), multicast, reserved, shared (CGNAT), documentation,
benchmarking, 192.0.0.0/24 and the other blocks that are not globally reachable are refused, also
when an IPv6 address carries one of them (IPv4-mapped, NAT64 64:ff9b::/96, 6to4); Teredo lies in
2001::/23, refused as a whole.

DNS rebinding: the guard resolves the name once per HTTP request (so on every redirect hop too),
checks every address, and then connects to the checked address itself: the request URL's host is
replaced by that IP while the Host header and the TLS SNI/certificate check keep the name. A second,
different DNS answer can therefore never be the one connected to.

`send` follows up to MAX_REDIRECTS redirects itself, checking each hop, and drops the caller's
headers (API keys of the destination) once a redirect leaves the original origin. A redirect that would
send the request's body again (307/308) is followed only within the original origin (scheme, host,
port): a signed body, tool arguments or a token request's credentials never reach a host the caller did
not name; the 307/308 answer itself is returned. With `redirects="same_request"` (call events) only those
same-origin 307/308 are followed, which re-send the same method, body and headers: 301/302/303 (which
would turn the POST into a GET without its body) and every redirect to another origin are returned as
answered, for the caller to count as a failure. It bounds the
whole exchange (DNS, connect, redirects, body) by the caller's timeout and caps the body size.
`send_sync` runs the same code on a private event loop for code without one (Celery tasks,
management commands, sync views). `mcp_http_client` gives the MCP SDK an httpx2 client
whose every request passes through the same guard.

Saving a destination (a tool's toolUrl, an agent's serverUrl, an MCP server's URL or token endpoint):
`validate_destination` runs the check of every request (`check_url`) once, so that an address every
call would be refused is refused when it is saved, with the same reason. A host that does not resolve
is not refused then (a name may start resolving later; a request is refused while it does not):
`destination_warning` says so, for pages that show a saved destination.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from functools import lru_cache
from typing import Any, Literal
from urllib.parse import urlsplit

import anyio
import httpx
import httpx2
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from kit.errors import ApiError
from kit.validation import url_problem

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

MAX_REDIRECTS = 5
# Which redirects `send` follows: "any" (within the rules above), "same_request" (only 307/308 to the origin).
Redirects = Literal["any", "same_request"]
BODY_KEEPING_REDIRECTS = frozenset({307, 308})
DEFAULT_MAX_RESPONSE_BYTES = 5 * 1024 * 1024


class EgressBlocked(ApiError):
    """The destination may not be contacted (bad URL or a refused address). A 400 when it reaches a view."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status_code=400)


class EgressUnresolved(EgressBlocked):
    """The host has no address now (a DNS failure or an empty answer): refused for this request only."""

    def __init__(self, host: str, detail: str = "") -> None:
        super().__init__(f"Refused outbound request: {host} does not resolve{f' ({detail})' if detail else ''}")
        self.host = host


class EgressTimeout(httpx.TimeoutException):
    """The caller's time budget ran out (DNS, connect, redirects and body together)."""


class EgressTooLarge(httpx.HTTPError):
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


# The address table, owned here rather than read from the interpreter: `ipaddress.is_global`/`is_private`
# changed between Python patch releases (3.11.7 counts 192.0.0.192, a cloud metadata address, and most of
# 192.0.0.0/24 as global), so what the guard refuses must not depend on the Python in use.
#
# Transcribed on 2026-11-25 from the IANA special-purpose address registries:
#   IPv4: https://www.iana.org/assignments/iana-ipv4-special-registry/
#   IPv6: https://www.iana.org/assignments/iana-ipv6-special-registry/ (version of 2025-10-09)
# and the address-space registries (multicast, IPv6 global unicast 2000::/3):
#   https://www.iana.org/assignments/ipv4-address-space/  https://www.iana.org/assignments/ipv6-address-space/
# Every block whose "Globally Reachable" is False (or N/A) is refused. Stricter than the registry on
# purpose: the whole IETF protocol assignment blocks 192.0.0.0/24 and 2001::/23 are refused, including
# their few globally reachable anycast entries (PCP, TURN, AMT, ...): no webhook or tool lives there.
_V4_REFUSED: tuple[tuple[str, str], ...] = (
    ("0.0.0.0/8", "unspecified"),  # "this network" (RFC 791); 0.0.0.0/32 "this host"
    ("10.0.0.0/8", "private"),  # RFC 1918
    ("100.64.0.0/10", "shared (CGNAT)"),  # RFC 6598; some clouds' metadata (100.100.100.200)
    ("127.0.0.0/8", "loopback"),  # RFC 1122
    ("168.63.129.16/32", "cloud host (Azure wire server)"),  # not in the IANA registries: Azure's host endpoint
    ("169.254.0.0/16", "link-local (cloud metadata)"),  # RFC 3927
    ("172.16.0.0/12", "private"),  # RFC 1918
    # RFC 6890; 192.0.0.192 is Oracle Cloud's metadata address.
    ("192.0.0.0/24", "special-purpose (IETF protocol assignments, cloud metadata)"),
    ("192.0.2.0/24", "documentation"),  # TEST-NET-1, RFC 5737
    ("192.88.99.0/24", "deprecated 6to4 relay"),  # RFC 7526
    ("192.168.0.0/16", "private"),  # RFC 1918
    ("198.18.0.0/15", "benchmarking"),  # RFC 2544
    ("198.51.100.0/24", "documentation"),  # TEST-NET-2, RFC 5737
    ("203.0.113.0/24", "documentation"),  # TEST-NET-3, RFC 5737
    ("224.0.0.0/4", "multicast"),  # RFC 5771 (the multicast registry, not the special-purpose one)
    ("240.0.0.0/4", "reserved"),  # RFC 1112; 255.255.255.255/32 limited broadcast (RFC 919) inside it
)
_V6_REFUSED: tuple[tuple[str, str], ...] = (
    ("::1/128", "loopback"),  # RFC 4291
    ("::/128", "unspecified"),  # RFC 4291
    ("64:ff9b:1::/48", "local-use IPv4/IPv6 translation"),  # RFC 8215
    ("100::/64", "discard-only"),  # RFC 6666
    ("100:0:0:1::/64", "dummy"),  # RFC 9780
    ("2001::/23", "special-purpose (IETF protocol assignments)"),  # RFC 2928: Teredo, benchmarking, ORCHID, anycast...
    ("2001:db8::/32", "documentation"),  # RFC 3849
    ("3fff::/20", "documentation"),  # RFC 9637
    ("5f00::/16", "segment routing (SRv6)"),  # RFC 9602
    ("fc00::/7", "private (unique-local)"),  # RFC 4193; fd00:ec2::254 is AWS metadata over IPv6
    ("fe80::/10", "link-local (cloud metadata)"),  # RFC 4291
    ("fec0::/10", "site-local (deprecated)"),  # RFC 3879
    ("ff00::/8", "multicast"),  # RFC 4291
)
# IPv6 forms that reach an IPv4 address: the address is judged as the IPv4 address it carries.
_V4_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")  # RFC 4291; a dual-stack socket connects to the IPv4
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # RFC 6052 well-known prefix
_6TO4 = ipaddress.IPv6Network("2002::/16")  # RFC 3056
# IANA hands out IPv6 unicast only from 2000::/3; everything else not listed above is reserved by the IETF.
_V6_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")


def _table(rows: tuple[tuple[str, str], ...]) -> tuple[tuple[IPNetwork, str], ...]:
    return tuple((ipaddress.ip_network(block), category) for block, category in rows)


_REFUSED_V4 = _table(_V4_REFUSED)
_REFUSED_V6 = _table(_V6_REFUSED)


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address a connection to `address` reaches (IPv4-mapped, NAT64, 6to4), if any."""
    if address in _V4_MAPPED or address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _6TO4:
        return ipaddress.IPv4Address((int(address) >> 80) & 0xFFFFFFFF)
    return None


def _category(address: IPAddress) -> str | None:
    """Why the address is not a globally reachable unicast one (by the table above), or None when it is."""
    table = _REFUSED_V4 if isinstance(address, ipaddress.IPv4Address) else _REFUSED_V6
    for network, category in table:
        if address in network:
            return category
    if isinstance(address, ipaddress.IPv6Address) and address not in _V6_GLOBAL_UNICAST:
        return "reserved"
    return None


def address_problem(address: IPAddress) -> str | None:
    """Why the guard refuses `address`, or None when it may be contacted."""
    networks = allowed_networks()

    def listed(candidate: IPAddress) -> bool:
        return any(candidate.version == n.version and candidate in n for n in networks)

    if listed(address):
        return None
    candidate: IPAddress = address
    if isinstance(address, ipaddress.IPv6Address):
        candidate = _embedded_ipv4(address) or address
        if candidate is not address and listed(candidate):
            return None
    category = _category(candidate)
    if category:
        return (
            f"{address} is a {category} address; outbound requests may only reach public addresses "
            "and the networks listed in OUTBOUND_ALLOWED_NETWORKS"
        )
    return None


def _split(url: str) -> tuple[str, int]:
    problem = url_problem(url)
    if problem:
        raise EgressBlocked(f"Refused outbound URL: {problem}")
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
        raise EgressUnresolved(host)
    for address in addresses:
        problem = address_problem(address)
        if problem:
            raise EgressBlocked(f"Refused outbound request to {host}: {problem}")
    return addresses


def resolve_checked(host: str, port: int) -> list[IPAddress]:
    """Resolve `host` and return its addresses, refusing it when any address is not allowed."""
    literal = _literal(host)
    if literal is not None:
        return _checked(host, [(None, None, None, None, (str(literal), port))])
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise EgressUnresolved(host, str(exc)) from None
    return _checked(host, infos)


async def aresolve_checked(host: str, port: int) -> list[IPAddress]:
    literal = _literal(host)
    if literal is not None:
        return _checked(host, [(None, None, None, None, (str(literal), port))])
    try:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise EgressUnresolved(host, str(exc)) from None
    return _checked(host, infos)


def check_url(url: str) -> None:
    """Raise EgressBlocked unless `url` is well formed and its host resolves only to allowed addresses."""
    host, port = _split(url)
    resolve_checked(host, port)


async def acheck_url(url: str) -> None:
    host, port = _split(url)
    await aresolve_checked(host, port)


def destination_problem(url: str) -> str | None:
    """Why every request to `url` would be refused now (by `check_url`, the check of every request), or
    None. A host that does not resolve is no problem here: see `destination_warning`."""
    try:
        check_url(url)
    except EgressUnresolved:
        return None
    except EgressBlocked as refused:
        return refused.message
    return None


def validate_destination(url: str | None, *, field: str) -> None:
    """Refuse saving `url` (None: no URL) when every request to it would be refused: a 400 naming `field`
    with the guard's reason (ApiError.field, the API's validation error). Resolves the host: call it
    outside database transactions."""
    problem = destination_problem(url) if url else None
    if problem:
        raise ApiError.field(field, problem)


def destination_warning(url: str | None) -> str | None:
    """What to warn about a destination that was saved: its host does not resolve right now, so requests to
    it are refused until it does. None when it resolves (or the URL is refused outright, or empty)."""
    if not url:
        return None
    try:
        check_url(url)
    except EgressUnresolved as unresolved:
        return (
            f"{unresolved.host} does not resolve right now: requests to it are refused until it does "
            "(check the host name)."
        )
    except EgressBlocked:
        return None
    return None


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
        raise EgressBlocked("Refused outbound request: only http and https are allowed")
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


@lru_cache(maxsize=4)
def _ssl_context(extra_ca_file: str) -> ssl.SSLContext:
    # Built once per CA file: loading the CA bundle costs milliseconds, and clients are short-lived (see below).
    context = httpx.create_ssl_context()
    if extra_ca_file:  # OUTBOUND_CA_FILE: trusted besides the system's bundle
        context.load_verify_locations(cafile=extra_ca_file)
    return context


def _client(timeout_s: float) -> httpx.AsyncClient:
    # One short-lived client per request: connections are keyed by the pinned IP, so a pooled TLS
    # connection must never be reused for a different host name that resolves to the same address.
    # trust_env=False: proxy variables would otherwise route around the transport's checks.
    return httpx.AsyncClient(
        transport=GuardedAsyncTransport(
            httpx.AsyncHTTPTransport(verify=_ssl_context(settings.OUTBOUND_CA_FILE), trust_env=False)
        ),
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
    redirects: Redirects = "any",
) -> httpx.Response:
    """Send one request through the guard and return the response with its body read (a redirect it does
    not follow is that response: see the module's docstring for which it follows).

    Raises EgressBlocked (refused destination, also after a redirect), EgressTimeout (the whole
    exchange took longer than `timeout_s`), EgressTooLarge, or another httpx.HTTPError.
    """
    if timeout_s <= 0:
        raise ValueError("timeout_s must be positive")
    _split(url)  # a malformed URL is refused before any network activity
    try:
        with anyio.fail_after(timeout_s):
            async with _client(timeout_s) as client:
                request = client.build_request(method, url, headers=headers, json=json, content=content)
                return await _exchange(client, request, headers or {}, max_response_bytes, redirects)
    except TimeoutError:
        raise EgressTimeout(f"No complete response within {timeout_s:g} s") from None
    except httpx.TimeoutException as exc:
        raise EgressTimeout(f"No complete response within {timeout_s:g} s") from exc


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port


def _follows(redirects: Redirects, status: int, origin: tuple[str, str, int | None], to: httpx.URL, body: bool) -> bool:
    """Whether `send` follows this redirect (see the module's docstring)."""
    same_origin = _origin(to) == origin
    if redirects == "same_request":
        return status in BODY_KEEPING_REDIRECTS and same_origin
    return same_origin or not (body and status in BODY_KEEPING_REDIRECTS)


async def _exchange(
    client: httpx.AsyncClient,
    request: httpx.Request,
    caller_headers: dict[str, str],
    max_response_bytes: int,
    redirects: Redirects,
) -> httpx.Response:
    """Follow redirects by hand (every hop is checked by the transport); the caller's headers (API keys
    of the destination) are not carried to another origin, nor is the body."""
    origin = _origin(request.url)
    sends_body = request.headers.get("content-length", "0") != "0" or "transfer-encoding" in request.headers
    for _ in range(MAX_REDIRECTS + 1):
        response = await client.send(request, stream=True, follow_redirects=False)
        try:
            following = response.next_request
            if following is not None and not _follows(
                redirects, response.status_code, origin, following.url, sends_body
            ):
                following = None
            if following is None:
                body = bytearray()
                async for chunk in response.aiter_raw():
                    body.extend(chunk)
                    if len(body) > max_response_bytes:
                        raise EgressTooLarge(f"Response larger than {max_response_bytes} bytes")
                # A detached copy whose body is already read (and decoded on access, as httpx would).
                return httpx.Response(
                    response.status_code,
                    headers=response.headers,
                    content=bytes(body),
                    request=response.request,
                    extensions={"http_version": response.extensions.get("http_version", b"HTTP/1.1")},
                )
            request = following
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
    redirects: Redirects = "any",
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
            redirects=redirects,
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
