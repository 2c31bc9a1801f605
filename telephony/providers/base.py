"""The phone provider interface: what the webhooks, the media-stream transport and the dashboard need
from a carrier. Every failure is a `kit.providers.ProviderError(message, permanent=...)` whose
message is safe to show an operator (no credentials, no tokens)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.http import HttpRequest

if TYPE_CHECKING:
    from telephony.models import TelephonyAccount


class PhoneProvider:
    """One organization's account at one carrier. Built by `telephony.providers.provider_for(account)`."""

    name: str = ""
    # Whether the call ends when its media stream closes (Twilio: the instructions run out). Otherwise
    # (Telnyx) the transport hangs the call up itself when the agent ends it.
    stream_ends_call: bool = True
    # Whether the carrier reaches this service over HTTP (webhooks, media streams, status callbacks), which
    # needs PUBLIC_BASE_URL. A SIP account's calls come and go through the SIP endpoint instead.
    needs_public_url: bool = True
    # Whether the carrier takes warm transfers (telephony/warm_transfer.py: `dial_person`, `join_conference`).
    supports_warm_transfer: bool = False

    def __init__(self, account: TelephonyAccount) -> None:
        self.account = account

    def verify_webhook(self, request: HttpRequest, public_url: str) -> bool:
        """Whether `request` (an HTTP webhook from the carrier) is genuinely signed for this account.
        `public_url` is the full URL as the carrier requested it (PUBLIC_BASE_URL + path + query),
        never rebuilt from the request's Host."""
        raise NotImplementedError

    def answer_stream(self, *, stream_url: str, parameters: dict[str, str]) -> str:
        """The document that answers a call by opening a bidirectional media stream to `stream_url`
        (ws:// or wss://) carrying `parameters` (Twilio: `<Connect><Stream><Parameter/>`)."""
        raise NotImplementedError

    def answer_refusal(self, *, message: str, language: str) -> str:
        """The document that says `message` in `language` (a BCP 47 tag such as "en-US") and hangs up."""
        raise NotImplementedError

    async def transfer(self, *, call_sid: str, destination: str, caller_id: str, announcement: str = "") -> None:
        """Move the live call to a human at `destination` (E.164), presenting `caller_id` (a number of
        this account, normally the number that was called). The carrier stops the media stream when the
        call's instructions are replaced. `announcement`, when given, is said before dialling."""
        raise NotImplementedError

    async def hang_up(self, *, call_sid: str) -> None:
        """End the live call."""
        raise NotImplementedError

    async def dial_person(
        self, *, to: str, caller_id: str, twiml: str, status_callback_url: str, ring_timeout_seconds: int
    ) -> str:
        """A warm transfer's second call, to the person at `to`, running `twiml`: its call id."""
        raise NotImplementedError

    async def join_conference(self, *, call_sid: str, name: str) -> None:
        """Move the live call into the conference `name` (its media stream stops)."""
        raise NotImplementedError

    def configure_number(self, *, phone_number: str, voice_url: str, status_callback_url: str) -> None:
        """Point the account's number `phone_number` (E.164) at this service: incoming calls POST to
        `voice_url`, call status changes POST to `status_callback_url`. Blocking (dashboard, ops)."""
        raise NotImplementedError

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
        """Ask the carrier to call `to` (E.164) from `from_number` (a number of this account); once
        answered, the call opens a bidirectional media stream to `stream_url` carrying `parameters`, and
        its progress (initiated, ringing, answered, completed) is POSTed to `status_callback_url`.
        `extra`: more carrier options (answering-machine detection). Returns the carrier's call id.
        Blocking (the outbound dispatcher's thread or task)."""
        raise NotImplementedError

    def cancel(self, *, call_sid: str) -> None:
        """Cancel a call that has not been answered yet (queued or ringing at the carrier). Blocking."""
        raise NotImplementedError
