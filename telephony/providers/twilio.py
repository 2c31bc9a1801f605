"""Twilio Programmable Voice + Media Streams through the official `twilio` package.

REST calls (number configuration, live-call transfer and hang-up) go to TWILIO_API_BASE_URL
(`client.api.base_url`, the package's Domain base), through the package's own HTTP clients: the
synchronous `TwilioHttpClient` (requests) for the dashboard, `AsyncTwilioHttpClient` (aiohttp) from
the event loop. They never go through kit.egress: that guard protects against customer-chosen
URLs; Twilio is the operator's provider. Authentication is the account's API key when one is set,
else the Account SID and Auth Token. Webhook signatures are always checked with the Auth Token.

An account of a Twilio-compatible provider (SignalWire's compatibility API, for example) names its
REST API's base URL (`api_base_url`): the same requests go there, and since the organization chose
that URL, through the egress guard (`_GuardedHttpClient`: the package's HTTP client interface over
`kit.egress.send`). Its webhooks are signed as Twilio's are (`X-Twilio-Signature`, or the same
signature as `X-SignalWire-Signature`).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlencode, urlsplit

import aiohttp
import httpx
import requests
from django.conf import settings
from django.http import HttpRequest
from twilio.base.exceptions import TwilioException, TwilioRestException, TwilioServiceException
from twilio.http import AsyncHttpClient, HttpClient
from twilio.http.async_http_client import AsyncTwilioHttpClient
from twilio.http.http_client import TwilioHttpClient
from twilio.http.response import Response
from twilio.request_validator import RequestValidator
from twilio.rest import Client
from twilio.twiml.voice_response import VoiceResponse

from kit import egress
from kit.providers import ProviderError
from telephony.providers.base import PhoneProvider
from telephony.warm_transfer import conference_twiml

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


def _rest_error(exc: Exception, action: str, name: str) -> ProviderError:
    """A ProviderError safe to show an operator: the provider's (`name`: Twilio or a compatible one's
    host) status, code and message, without URL paths (they name the account) and without credentials
    (never part of its answers)."""
    answer = _answer_of(exc)
    if answer is not None:
        status, code, detail = answer
        detail = _PATH.sub("", detail).strip().rstrip(":.").strip()
        message = f"{name} refused to {action} (HTTP {status}" + (f", error {code})" if code else ")")
        if detail:
            message += f": {detail[:200]}"
        if status == 401:
            message += ". Check the account's credentials."
        return ProviderError(message, permanent=400 <= status < 500 and status not in (408, 429))
    if isinstance(exc, egress.EgressBlocked):  # the guard's reason names the host, never the path
        return ProviderError(f"Could not reach {name} to {action}: {exc.message}", permanent=True)
    if isinstance(exc, (asyncio.TimeoutError, requests.Timeout, httpx.TimeoutException)):
        return ProviderError(f"{name} did not answer in time ({action})")
    return ProviderError(f"Could not reach {name} to {action} ({type(exc).__name__})")


_TRANSPORT_ERRORS = (
    TwilioException,
    requests.RequestException,
    aiohttp.ClientError,
    asyncio.TimeoutError,
    OSError,
    httpx.HTTPError,
    egress.EgressBlocked,
)


def _outgoing(
    url: str, params: Any, data: Any, headers: Any, auth: tuple[str, str] | None
) -> tuple[str, dict[str, str], bytes | None]:
    """The URL, headers and body the package's HTTP clients would send: query `params`, a form body of
    `data` (a list value repeats its name), Basic credentials."""
    if params:
        url = str(httpx.URL(url, params=params))
    sent = dict(headers or {})
    if auth is not None:
        sent["Authorization"] = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    body = None
    if data:
        body = urlencode(data, doseq=True).encode()
        sent["Content-Type"] = "application/x-www-form-urlencoded"
    return url, sent, body


class _GuardedHttpClient(AsyncHttpClient):
    """The package's asynchronous HTTP client interface over the egress guard (a compatible provider's
    API, chosen by the organization). Redirects only within the same origin, keeping the request."""

    def __init__(self, timeout: float) -> None:
        super().__init__(logger=_HTTP_LOG, is_async=True, timeout=timeout)

    async def request(
        self,
        method: str,
        url: str,
        params: Any = None,
        data: Any = None,
        headers: Any = None,
        auth: tuple[str, str] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the package passes it
        allow_redirects: bool = False,
    ) -> Response:
        url, sent, body = _outgoing(url, params, data, headers, auth)
        answer = await egress.send(
            method.upper(), url, headers=sent, content=body, timeout_s=timeout or self.timeout, redirects="same_request"
        )
        return Response(answer.status_code, answer.text, answer.headers)

    async def close(self) -> None:
        return None


class _GuardedSyncHttpClient(HttpClient):
    """`_GuardedHttpClient` for the synchronous calls (the dashboard, the outbound dispatcher)."""

    def __init__(self, timeout: float) -> None:
        super().__init__(logger=_HTTP_LOG, is_async=False, timeout=timeout)

    def request(
        self,
        method: str,
        url: str,
        params: Any = None,
        data: Any = None,
        headers: Any = None,
        auth: tuple[str, str] | None = None,
        timeout: float | None = None,
        allow_redirects: bool = False,
    ) -> Response:
        url, sent, body = _outgoing(url, params, data, headers, auth)
        answer = egress.send_sync(
            method.upper(), url, headers=sent, content=body, timeout_s=timeout or self.timeout, redirects="same_request"
        )
        return Response(answer.status_code, answer.text, answer.headers)


class TwilioProvider(PhoneProvider):
    name = "twilio"
    supports_warm_transfer = True

    # --- webhooks and TwiML -------------------------------------------------------------------
    @property
    def label(self) -> str:
        """How errors name the provider: Twilio, or a compatible provider's host."""
        return urlsplit(self.account.api_base_url).hostname or "Twilio"

    def verify_webhook(self, request: HttpRequest, public_url: str) -> bool:
        signature = request.headers.get("X-Twilio-Signature") or request.headers.get("X-SignalWire-Signature", "")
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
        client.api.base_url = account.api_base_url or settings.TWILIO_API_BASE_URL
        return client

    async def _run(self, action: str, operation: Callable[[Client], Awaitable[Any]]) -> Any:
        timeout = settings.TWILIO_API_TIMEOUT_SECONDS
        http: AsyncHttpClient = (
            _GuardedHttpClient(timeout)
            if self.account.api_base_url
            else AsyncTwilioHttpClient(timeout=timeout, logger=_HTTP_LOG)
        )
        try:
            return await asyncio.wait_for(operation(self._client(http)), timeout + 1)
        except _TRANSPORT_ERRORS as exc:
            raise _rest_error(exc, action, self.label) from None
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

    async def dial_person(
        self, *, to: str, caller_id: str, twiml: str, status_callback_url: str, ring_timeout_seconds: int
    ) -> str:
        """A warm transfer's call to the person (telephony/warm_transfer.py): its CallSid."""
        created = await self._run(
            "call the transfer's destination",
            lambda client: client.calls.create_async(
                to=to,
                from_=caller_id,
                twiml=twiml,
                status_callback=status_callback_url,
                status_callback_event=["completed"],
                status_callback_method="POST",
                timeout=ring_timeout_seconds,
            ),
        )
        if not getattr(created, "sid", None):
            raise ProviderError(f"{self.label} accepted the call without a call SID")
        return str(created.sid)

    async def join_conference(self, *, call_sid: str, name: str) -> None:
        """Move a live call (the caller's, off its media stream) into a warm transfer's conference."""
        twiml = conference_twiml(name)
        await self._run(
            "join the caller to the transfer", lambda client: client.calls(call_sid).update_async(twiml=twiml)
        )

    async def hang_up(self, *, call_sid: str) -> None:
        await self._run("hang up the call", lambda client: client.calls(call_sid).update_async(status="completed"))

    def _sync_client(self) -> Client:
        timeout = settings.TWILIO_API_TIMEOUT_SECONDS
        if self.account.api_base_url:
            return self._client(_GuardedSyncHttpClient(timeout))
        return self._client(TwilioHttpClient(timeout=timeout, logger=_HTTP_LOG))

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
            raise _rest_error(exc, "place the call", self.label) from None
        if not created.sid:
            raise ProviderError(f"{self.label} accepted the call without a call SID")
        return str(created.sid)

    def cancel(self, *, call_sid: str) -> None:
        try:
            self._sync_client().calls(call_sid).update(status="canceled")
        except _TRANSPORT_ERRORS as exc:
            raise _rest_error(exc, "cancel the call", self.label) from None

    def configure_number(self, *, phone_number: str, voice_url: str, status_callback_url: str) -> None:
        client = self._sync_client()
        try:
            found = client.incoming_phone_numbers.list(phone_number=phone_number, limit=1)
        except _TRANSPORT_ERRORS as exc:
            raise _rest_error(exc, "look up the number", self.label) from None
        if not found:
            raise ProviderError(
                f"{phone_number} is not a number of {self.label} account {self.account.account_sid}", permanent=True
            )
        try:
            client.incoming_phone_numbers(found[0].sid).update(
                voice_url=voice_url,
                voice_method="POST",
                status_callback=status_callback_url,
                status_callback_method="POST",
            )
        except _TRANSPORT_ERRORS as exc:
            raise _rest_error(exc, "update the number", self.label) from None
