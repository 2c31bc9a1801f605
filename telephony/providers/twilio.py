"""Twilio Programmable Voice + Media Streams through the official `twilio` package.

REST calls (number configuration, live-call transfer and hang-up) go to TWILIO_API_BASE_URL
(`client.api.base_url`, the package's Domain base), through the package's own HTTP clients: the
synchronous `TwilioHttpClient` (requests) for the dashboard, `AsyncTwilioHttpClient` (aiohttp) from
the event loop. They never go through kit.egress: that guard protects against customer-chosen
URLs; Twilio is the operator's provider. Authentication is the account's API key when one is set,
else the Account SID and Auth Token. Webhook signatures are always checked with the Auth Token.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import requests
from django.conf import settings
from django.http import HttpRequest
from twilio.base.exceptions import TwilioException, TwilioRestException, TwilioServiceException
from twilio.http.async_http_client import AsyncTwilioHttpClient
from twilio.http.http_client import TwilioHttpClient
from twilio.request_validator import RequestValidator
from twilio.rest import Client
from twilio.twiml.voice_response import VoiceResponse

from kit.providers import ProviderError
from telephony.providers.base import PhoneProvider

_PATH = re.compile(r"/\S*")
# The package logs every request and response at INFO (a dozen lines each, with the account's URLs):
# only its warnings reach the service's log.
_HTTP_LOG = logging.getLogger("telephony.providers.twilio.http")
_HTTP_LOG.setLevel(logging.WARNING)


def _answer_of(exc: Exception) -> tuple[int, int | None, str] | None:
    """(HTTP status, Twilio error code, message) of an error answer from Twilio, None for no answer."""
    if isinstance(exc, TwilioRestException):
        return exc.status, exc.code, str(exc.msg or "")
    if isinstance(exc, TwilioServiceException):
        return exc.status, exc.code, str(exc.detail or exc.title or "")
    response = exc.args[1] if isinstance(exc, TwilioException) and len(exc.args) > 1 else None
    if response is not None and hasattr(response, "status_code"):  # a list page refused
        try:
            payload = json.loads(response.text)
        except (TypeError, ValueError):
            payload = {}
        payload = payload if isinstance(payload, dict) else {}
        return int(response.status_code), payload.get("code"), str(payload.get("message") or "")
    return None


def _rest_error(exc: Exception, action: str) -> ProviderError:
    """A ProviderError safe to show an operator: Twilio's status, code and message, without URL paths
    (they name the account) and without credentials (never part of Twilio's answers)."""
    answer = _answer_of(exc)
    if answer is not None:
        status, code, detail = answer
        detail = _PATH.sub("", detail).strip().rstrip(":.").strip()
        message = f"Twilio refused to {action} (HTTP {status}" + (f", error {code})" if code else ")")
        if detail:
            message += f": {detail[:200]}"
        if status == 401:
            message += ". Check the account's credentials."
        return ProviderError(message, permanent=400 <= status < 500 and status not in (408, 429))
    if isinstance(exc, (asyncio.TimeoutError, requests.Timeout)):
        return ProviderError(f"Twilio did not answer in time ({action})")
    return ProviderError(f"Could not reach Twilio to {action} ({type(exc).__name__})")


_TRANSPORT_ERRORS = (TwilioException, requests.RequestException, aiohttp.ClientError, asyncio.TimeoutError, OSError)


class TwilioProvider(PhoneProvider):
    name = "twilio"

    # --- webhooks and TwiML -------------------------------------------------------------------
    def verify_webhook(self, request: HttpRequest, public_url: str) -> bool:
        signature = request.headers.get("X-Twilio-Signature", "")
        if not signature or not self.account.auth_token:
            return False
        params: Any = request.POST if request.method == "POST" else {}
        return bool(RequestValidator(self.account.auth_token).validate(public_url, params, signature))

    def answer_stream(self, *, stream_url: str, parameters: dict[str, str]) -> str:
        response = VoiceResponse()
        connect = response.connect()
        stream = connect.stream(url=stream_url)
        for name, value in parameters.items():
            stream.parameter(name=name, value=value)
        return response.to_xml()

    def answer_refusal(self, *, message: str, language: str) -> str:
        response = VoiceResponse()
        response.say(message, language=language)
        response.hangup()
        return response.to_xml()

    # --- REST ------------------------------------------------------------------------------------
    def _client(self, http_client: Any) -> Client:
        account = self.account
        if account.api_key_sid and account.api_key_secret:
            username, password = account.api_key_sid, account.api_key_secret
        else:
            username, password = account.account_sid, account.auth_token
        client = Client(username, password, account_sid=account.account_sid, http_client=http_client)
        client.api.base_url = settings.TWILIO_API_BASE_URL
        return client

    async def _run(self, action: str, operation: Callable[[Client], Awaitable[Any]]) -> None:
        http = AsyncTwilioHttpClient(timeout=settings.TWILIO_API_TIMEOUT_SECONDS, logger=_HTTP_LOG)
        try:
            await asyncio.wait_for(operation(self._client(http)), settings.TWILIO_API_TIMEOUT_SECONDS + 1)
        except _TRANSPORT_ERRORS as exc:
            raise _rest_error(exc, action) from None
        finally:
            await http.close()

    @staticmethod
    def transfer_twiml(*, destination: str, caller_id: str, announcement: str = "") -> str:
        response = VoiceResponse()
        if announcement:
            response.say(announcement)
        dial = response.dial(caller_id=caller_id) if caller_id else response.dial()
        dial.number(destination)
        return response.to_xml()

    async def transfer(self, *, call_sid: str, destination: str, caller_id: str, announcement: str = "") -> None:
        twiml = self.transfer_twiml(destination=destination, caller_id=caller_id, announcement=announcement)
        await self._run("transfer the call", lambda client: client.calls(call_sid).update_async(twiml=twiml))

    async def hang_up(self, *, call_sid: str) -> None:
        await self._run("hang up the call", lambda client: client.calls(call_sid).update_async(status="completed"))

    def _sync_client(self) -> Client:
        return self._client(TwilioHttpClient(timeout=settings.TWILIO_API_TIMEOUT_SECONDS, logger=_HTTP_LOG))

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
        twiml = self.answer_stream(stream_url=stream_url, parameters=parameters)
        try:
            created = self._sync_client().calls.create(
                to=to,
                from_=from_number,
                twiml=twiml,
                status_callback=status_callback_url,
                status_callback_event=["initiated", "ringing", "answered", "completed"],
                status_callback_method="POST",
                timeout=ring_timeout_seconds,
                **(extra or {}),
            )
        except _TRANSPORT_ERRORS as exc:
            raise _rest_error(exc, "place the call") from None
        if not created.sid:
            raise ProviderError("Twilio accepted the call without a call SID")
        return str(created.sid)

    def cancel(self, *, call_sid: str) -> None:
        try:
            self._sync_client().calls(call_sid).update(status="canceled")
        except _TRANSPORT_ERRORS as exc:
            raise _rest_error(exc, "cancel the call") from None

    def configure_number(self, *, phone_number: str, voice_url: str, status_callback_url: str) -> None:
        client = self._sync_client()
        try:
            found = client.incoming_phone_numbers.list(phone_number=phone_number, limit=1)
        except _TRANSPORT_ERRORS as exc:
            raise _rest_error(exc, "look up the number") from None
        if not found:
            raise ProviderError(
                f"{phone_number} is not a number of Twilio account {self.account.account_sid}", permanent=True
            )
        try:
            client.incoming_phone_numbers(found[0].sid).update(
                voice_url=voice_url,
                voice_method="POST",
                status_callback=status_callback_url,
                status_callback_method="POST",
            )
        except _TRANSPORT_ERRORS as exc:
            raise _rest_error(exc, "update the number") from None
