"""How a SIP call placed or hung up in one process reaches the SIP endpoint that holds it.

The endpoint runs in the process that started it: the web server itself on the embedded default (no
Redis: `SIP_BIND` set, one process holds everything), else `manage.py sipserver` processes of their own.
A request goes straight to an endpoint of this process when there is one; otherwise through the channel
layer (Redis): a call to place is sent to the `sip.outbound` channel, which exactly one `sipserver`
process takes; a hang-up or cancel goes to the call's group, which the process holding the call joined.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer

from kit.providers import ProviderError
from telephony.streams import call_group

logger = logging.getLogger(__name__)

OUTBOUND_CHANNEL = "sip.outbound"


@dataclass(frozen=True)
class SipDial:
    """A call to place: an outbound call record's stream token (telephony/streams.py) names the call, its
    agent and its numbers; `call_sid` is the SIP Call-ID chosen for it (its providerCallId)."""

    organization_id: str
    call_sid: str
    to: str
    from_number: str
    token: str
    ring_timeout_seconds: int

    @classmethod
    def from_message(cls, message: dict[str, Any]) -> SipDial:
        return cls(
            organization_id=str(message["organization_id"]),
            call_sid=str(message["call_sid"]),
            to=str(message["to"]),
            from_number=str(message["from_number"]),
            token=str(message["token"]),
            ring_timeout_seconds=int(message["ring_timeout_seconds"]),
        )


class LocalEndpoint(Protocol):
    """The SIP endpoint of this process (telephony/sip/endpoint.py), thread-safe."""

    def place(self, dial: SipDial) -> None: ...

    def hang_up(self, call_sid: str) -> bool: ...


_local: LocalEndpoint | None = None


def local_endpoint_set(endpoint: LocalEndpoint | None) -> None:
    global _local
    _local = endpoint


def sip_dial_send(dial: SipDial) -> None:
    """Hand a call to place to an endpoint; ProviderError(permanent) when none can be reached."""
    if _local is not None:
        _local.place(dial)
        return
    layer = get_channel_layer()
    if layer is None or isinstance(layer, InMemoryChannelLayer):
        raise ProviderError(
            "No SIP endpoint runs: set SIP_BIND for the web server (embedded default) or run manage.py sipserver "
            "(with Redis)",
            permanent=True,
        )
    try:
        async_to_sync(layer.send)(OUTBOUND_CHANNEL, {"type": "sip.dial", **asdict(dial)})
    except Exception as exc:
        raise ProviderError("The SIP endpoints could not be reached (the channel layer is down)") from exc


def sip_hang_up_send(call_sid: str) -> None:
    """Cancel (ringing) or hang up (live) the SIP call `call_sid`, wherever it runs. Never raises."""
    if _local is not None and _local.hang_up(call_sid):
        return
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(call_group(call_sid), {"type": "call.hangup"})
    except Exception:
        logger.warning("could not tell SIP call %s to hang up", call_sid[:12], exc_info=True)
