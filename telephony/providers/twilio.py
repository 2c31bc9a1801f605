"""Twilio Programmable Voice + Media Streams through the official `twilio` package."""

from __future__ import annotations

from django.http import HttpRequest

from telephony.providers.base import PhoneProvider


class TwilioProvider(PhoneProvider):
    name = "twilio"

    def verify_webhook(self, request: HttpRequest, public_url: str) -> bool:
        raise NotImplementedError

    def answer_stream(self, *, stream_url: str, parameters: dict[str, str]) -> str:
        raise NotImplementedError

    def answer_refusal(self, *, message: str, language: str) -> str:
        raise NotImplementedError

    async def transfer(self, *, call_sid: str, destination: str, caller_id: str, announcement: str = "") -> None:
        raise NotImplementedError

    async def hang_up(self, *, call_sid: str) -> None:
        raise NotImplementedError

    def configure_number(self, *, phone_number: str, voice_url: str, status_callback_url: str) -> None:
        raise NotImplementedError
