"""ICE for WebRTC sessions: the STUN and TURN servers (WEBRTC_ICE_SERVERS) as clients are given them, with
time-limited TURN credentials made from coturn's shared secret (WEBRTC_TURN_SECRET, `use-auth-secret`), and
as the server uses them; and the addresses of the server's own host candidates (WEBRTC_HOST_ADDRESSES).

TURN REST credentials (what coturn's use-auth-secret checks): the username is "<unix expiry>:<random id>",
the credential base64(HMAC-SHA1(secret, username)); coturn refuses them after the expiry, so a credential
that leaks from a page is good for WEBRTC_TURN_TTL_SECONDS at most.

Host candidates: aioice (aiortc's ICE) gathers one per address of the machine's interfaces except
127.0.0.1 and ::1 (`aioice.ice.get_host_addresses`, called by `Connection.gather_candidates`; it takes no
parameter for it). `use_host_addresses` puts WEBRTC_HOST_ADDRESSES in its place, process-wide, once: when
the setting is empty aioice's own rule applies unchanged; when set, only those addresses are offered (the
tests set 127.0.0.1, so that every packet stays on loopback; a server behind 1:1 NAT sets its private
address and relies on STUN, or lists the ones clients can reach).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import secrets
import time
from typing import TYPE_CHECKING, Any

from django.conf import settings

if TYPE_CHECKING:
    from aiortc import RTCIceServer


def turn_credentials(*, now: float | None = None) -> tuple[str, str]:
    """(username, credential) for coturn's use-auth-secret, valid WEBRTC_TURN_TTL_SECONDS from `now`."""
    expiry = int(time.time() if now is None else now) + int(settings.WEBRTC_TURN_TTL_SECONDS)
    username = f"{expiry}:{secrets.token_hex(8)}"
    digest = hmac.new(settings.WEBRTC_TURN_SECRET.encode(), username.encode(), hashlib.sha1).digest()
    return username, base64.b64encode(digest).decode("ascii")


def client_ice_servers(*, now: float | None = None) -> list[dict[str, Any]]:
    """The `iceServers` of a session's answer (RTCIceServer dictionaries, as a browser's RTCPeerConnection
    takes them): the STUN URLs in one entry, the TURN URLs in another with fresh credentials; [] when
    WEBRTC_ICE_SERVERS is empty."""
    urls: list[str] = list(settings.WEBRTC_ICE_SERVERS)
    stun = [url for url in urls if url.startswith("stun:")]
    turn = [url for url in urls if url.startswith(("turn:", "turns:"))]
    servers: list[dict[str, Any]] = []
    if stun:
        servers.append({"urls": stun})
    if turn:
        username, credential = turn_credentials(now=now)
        servers.append({"urls": turn, "username": username, "credential": credential})
    return servers


def server_ice_servers() -> list[RTCIceServer]:
    """The same servers for the server's own peer connection (aiortc uses the first STUN and the first TURN
    URL it can: turn: over udp or tcp, turns: over tcp)."""
    from aiortc import RTCIceServer

    return [RTCIceServer(**server) for server in client_ice_servers()]


def host_addresses(use_ipv4: bool, use_ipv6: bool) -> list[str] | None:
    """The configured host-candidate addresses of the families aioice asks for; None: not configured."""
    configured: list[str] = list(settings.WEBRTC_HOST_ADDRESSES)
    if not configured:
        return None
    return [address for address in configured if (use_ipv4 if ipaddress.ip_address(address).version == 4 else use_ipv6)]


_installed = False


def use_host_addresses() -> None:
    """Make aioice gather its host candidates on WEBRTC_HOST_ADDRESSES (read at each gathering), in this
    process, from now on (see the module's docstring). Idempotent."""
    global _installed
    if _installed:
        return
    from aioice import ice

    default = ice.get_host_addresses

    def gathered(use_ipv4: bool, use_ipv6: bool) -> list[str]:
        chosen = host_addresses(use_ipv4, use_ipv6)
        return default(use_ipv4=use_ipv4, use_ipv6=use_ipv6) if chosen is None else chosen

    ice.get_host_addresses = gathered
    _installed = True
