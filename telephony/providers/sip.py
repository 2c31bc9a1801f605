"""Accounts of provider `sip`: a SIP trunk or PBX that exchanges calls with this service's own SIP
endpoint (telephony/sip/: the web server with SIP_BIND, or `manage.py sipserver`). There is no carrier API
to ask: calls are admitted by the network they come from or their digest credentials, and placed and hung
up by the endpoint that holds them, which this adapter reaches:

- an endpoint of this process directly (it registers itself: `local_endpoint_set`);
- otherwise through the channel layer (Redis): a call to place is sent to the `sip.outbound` channel,
  which exactly one `sipserver` process takes; a hang-up or cancel goes to the call's group, which the
  process holding the call joined.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.http import HttpRequest

from kit.providers import ProviderError
from telephony.groups import call_group
from telephony.providers.base import PhoneProvider

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


class SipProvider(PhoneProvider):
    name = "sip"
    stream_ends_call = False
    needs_public_url = False

    def verify_webhook(self, request: HttpRequest, public_url: str) -> bool:
        return False  # a SIP account has no webhooks

    async def transfer(self, *, call_sid: str, destination: str, caller_id: str, announcement: str = "") -> None:
        return None  # the endpoint holding the call transfers it (REFER): its transport does

    async def hang_up(self, *, call_sid: str) -> None:
        return None  # the endpoint holding the call hangs it up (BYE) when its group tells it

    def configure_number(self, *, phone_number: str, voice_url: str, status_callback_url: str) -> None:
        return None  # the trunk or PBX routes the number to this service's SIP address

    def place_call(
        self,
        *,
        to: str,
        from_number: str,
        stream_url: str,
        parameters: dict[str, str],
        status_callback_url: str,
        ring_timeout_seconds: int,
        extra: dict[str, Any] | None = None,
    ) -> str:
        host = self.account.account_sid.rpartition(":")[0] or self.account.account_sid
        call_sid = f"{secrets.token_hex(16)}@{host}"
        dial = SipDial(
            organization_id=str(self.account.organization_id),
            call_sid=call_sid,
            to=to,
            from_number=from_number,
            token=parameters["token"],
            ring_timeout_seconds=ring_timeout_seconds,
        )
        sip_dial_send(dial)
        return call_sid

    def cancel(self, *, call_sid: str) -> None:
        sip_hang_up_send(call_sid)
