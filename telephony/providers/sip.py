"""Accounts of provider `sip`: a SIP trunk or PBX that exchanges calls with this service's own SIP
endpoint (telephony/sip/: the web server with SIP_BIND, or `manage.py sipserver`). There is no carrier API
to ask: calls are placed and hung up by the endpoint (telephony/sip/placing.py), and admitted by the
network they come from or their digest credentials."""

from __future__ import annotations

import secrets
from typing import Any

from django.http import HttpRequest

from telephony.providers.base import PhoneProvider
from telephony.sip.placing import SipDial, sip_dial_send, sip_hang_up_send


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
