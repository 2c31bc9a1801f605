"""Accounts of provider `sip`: a SIP trunk or PBX that sends calls to this service's own SIP endpoint
(telephony/sip/, `manage.py sipserver`). There is no carrier API to ask: a live call is hung up by the
endpoint itself (the call's channel-layer group tells it), and calls are admitted by the network they come
from. What this first step of SIP does not do yet (outbound calls, transfer) is a clear permanent error."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from kit.providers import ProviderError
from telephony.providers.base import PhoneProvider

_NOT_YET = "SIP accounts take incoming calls only for now: {what} is not available over SIP yet"


class SipProvider(PhoneProvider):
    name = "sip"

    def verify_webhook(self, request: HttpRequest, public_url: str) -> bool:
        return False  # a SIP account has no webhooks

    async def transfer(self, *, call_sid: str, destination: str, caller_id: str, announcement: str = "") -> None:
        raise ProviderError(_NOT_YET.format(what="transfer"), permanent=True)

    async def hang_up(self, *, call_sid: str) -> None:
        return None  # the endpoint holding the call hangs it up (BYE) when its group tells it

    def configure_number(self, *, phone_number: str, voice_url: str, status_callback_url: str) -> None:
        return None  # the trunk or PBX routes the number to this service's SIP address

    def place_call(self, **options: Any) -> str:
        raise ProviderError(_NOT_YET.format(what="placing a call"), permanent=True)

    def cancel(self, *, call_sid: str) -> None:
        return None
