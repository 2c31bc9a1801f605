"""The client's address: the one rule every address-keyed decision uses (the admin login lockout, the
401 log throttle, the loopback rule of /metrics), docs/operations/security.md.

`X-Forwarded-For` is written by whoever sent the request: a client can put any address in it. It is
believed only as far as TRUSTED_PROXIES (CIDRs; empty by default) vouch for it: when the connection comes
from a trusted proxy, the header is read from the right (the hop each proxy appended last) and the first
address that is not itself a trusted proxy is the client. Without a trusted proxy in front, forwarded
headers are ignored and the connection's own address is the client. The shipped nginx
(deploy/nginx.conf) overwrites the header with the address it sees, so a client's own value never
reaches the service.

Daphne's `--proxy-headers` took the header's first (left-most, client-written) entry instead: the
server refuses it (voiceagent/server.py).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from django.conf import settings

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def parse_networks(values: Iterable[str], *, name: str) -> tuple[Network, ...]:
    """CIDRs (or single addresses) as networks; ValueError naming the setting and the bad value."""
    networks: list[Network] = []
    for value in values:
        text = value.strip()
        if not text:
            continue
        try:
            networks.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            raise ValueError(f"{name} must list networks such as 10.0.0.0/8 or 127.0.0.1, not {text!r}") from None
    return tuple(networks)


@lru_cache(maxsize=8)
def _trusted(values: tuple[str, ...]) -> tuple[Network, ...]:
    return parse_networks(values, name="TRUSTED_PROXIES")


def _address(text: str) -> Address | None:
    text = text.strip()
    if text.startswith("[") and "]" in text:  # [2001:db8::1]:443
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:  # 203.0.113.7:51234
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _is_trusted(address: Address, trusted: tuple[Network, ...]) -> bool:
    return any(address.version == network.version and address in network for network in trusted)


def resolve_client_address(peer: str, forwarded_for: str, trusted: tuple[Network, ...]) -> str:
    """The client's address given the connection's `peer`, the `X-Forwarded-For` header's value(s) and
    the trusted proxies: the right-most hop that is not a trusted proxy, reached only through trusted
    proxies; the peer itself when it is not one. A hop that is not an address stops the walk at the hop
    before it (whoever wrote it is not to be believed further)."""
    here = _address(peer)
    if here is None or not _is_trusted(here, trusted) or not forwarded_for:
        return peer
    client = here
    for hop in reversed(forwarded_for.split(",")):
        address = _address(hop)
        if address is None:
            break
        client = address
        if not _is_trusted(address, trusted):
            break
    return str(client)


def client_address(request: Any) -> str:
    """The client's address of a Django request, "unknown" when it has none (for log lines)."""
    meta: Mapping[str, Any] = getattr(request, "META", None) or {}
    peer = str(meta.get("REMOTE_ADDR") or "")
    trusted = _trusted(tuple(getattr(settings, "TRUSTED_PROXIES", ()) or ()))
    return resolve_client_address(peer, str(meta.get("HTTP_X_FORWARDED_FOR") or ""), trusted) or "unknown"


def client_ip(request: Any) -> str | None:
    """client_address as an IP address, None when the request has none (axes' AXES_CLIENT_IP_CALLABLE:
    axes stores it in a GenericIPAddressField, an `inet` on PostgreSQL that refuses "unknown"; a login
    without a request address, such as the test client's force_login, is stored with none, as axes does)."""
    address = _address(client_address(request))
    return str(address) if address is not None else None


def is_loopback(address: str) -> bool:
    found = _address(address)
    return found is not None and found.is_loopback
