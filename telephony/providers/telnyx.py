"""Telnyx Call Control (developers.telnyx.com/api/call-control) and its media streaming.

Every event of a call (incoming, answered, hung up, speech played) is POSTed as JSON to the Call Control
application's webhook URL, signed with Ed25519 (`telnyx-signature-ed25519` over `timestamp|body`,
`telnyx-timestamp`), which `verify_webhook` checks with the account's webhook public key. A call is
answered, transferred and hung up by REST commands (`POST /calls/{call_control_id}/actions/...`), sent
with the account's API key to TELNYX_API_BASE_URL (the operator's provider: not through the egress guard,
as Twilio's), over httpx.

The media stream is opened by the answer (an outbound call: by the dial) with `stream_bidirectional_mode:
rtp` (without it Telnyx drops what the service sends, and the caller hears nothing), mu-law both ways, and
the single-use stream token as the call's `client_state` (base64, as Telnyx requires), which Telnyx repeats
in the stream's `start`. The call outlives its stream (`stream_ends_call = False`): the transport hangs it
up when the agent ends the call.

"Documents" are what the service would answer Twilio with, here a JSON list of commands for the call
(`answer_commands`), which the events webhook sends (`run_commands`).
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from typing import Any

import httpx
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from django.conf import settings
from django.http import HttpRequest

from kit.providers import ProviderError
from telephony.providers.base import PhoneProvider
from telephony.stream_messages import TELNYX_ENCODING

# A signed event older (or newer) than this is refused: a replayed request is not a new call.
SIGNATURE_TOLERANCE_SECONDS = 300
# Telnyx's error for a command on a call that has already ended: a hang-up then has nothing left to do.
CALL_ENDED_CODE = "90018"
# The client_state of a refused call: when its sorry has been spoken (call.speak.ended), it is hung up.
REFUSAL_STATE = "refusal"


def encode_state(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def decode_state(value: Any) -> str:
    """A call's client_state as the service set it ("" for none or not base64 text)."""
    if not isinstance(value, str):
        return ""
    try:
        return base64.b64decode(value, validate=True).decode()
    except (binascii.Error, ValueError):
        return ""


def _stream_options(stream_url: str, parameters: dict[str, str]) -> dict[str, Any]:
    return {
        "stream_url": stream_url,
        "stream_track": "inbound_track",
        "stream_codec": TELNYX_ENCODING,
        "stream_bidirectional_mode": "rtp",
        "stream_bidirectional_codec": TELNYX_ENCODING,
        "client_state": encode_state(parameters.get("token", "")),
    }


class _Refused(ProviderError):
    """Telnyx answered with an error; `code` is its error code ("" when it gave none)."""

    def __init__(self, message: str, *, permanent: bool, code: str) -> None:
        super().__init__(message, permanent=permanent)
        self.code = code


def _error(response: httpx.Response, action: str) -> _Refused:
    """A ProviderError safe to show an operator: Telnyx's status, error code and detail (its answers never
    carry the API key)."""
    code, detail = "", ""
    try:
        payload = response.json()
    except ValueError:
        payload = None
    errors = payload.get("errors") if isinstance(payload, dict) else None
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        code = str(errors[0].get("code") or "")[:20]
        detail = str(errors[0].get("detail") or errors[0].get("title") or "")[:200]
    status = response.status_code
    message = f"Telnyx refused to {action} (HTTP {status}" + (f", error {code})" if code else ")")
    if detail:
        message += f": {detail}"
    if status in (401, 403):
        message += ". Check the account's API key."
    return _Refused(message, permanent=400 <= status < 500 and status not in (408, 429), code=code)


def _data(response: httpx.Response, action: str) -> Any:
    """The `data` of a Telnyx answer (None when it has none); _Refused for an error answer."""
    if response.status_code >= 400:
        raise _error(response, action)
    try:
        payload = response.json()
    except ValueError:
        return None
    return payload.get("data") if isinstance(payload, dict) else None


def _unreachable(exc: Exception, action: str) -> ProviderError:
    if isinstance(exc, httpx.TimeoutException):
        return ProviderError(f"Telnyx did not answer in time ({action})")
    return ProviderError(f"Could not reach Telnyx to {action} ({type(exc).__name__})")


class TelnyxProvider(PhoneProvider):
    name = "telnyx"
    stream_ends_call = False

    # --- webhooks --------------------------------------------------------------------------------
    def verify_webhook(self, request: HttpRequest, public_url: str) -> bool:
        """Telnyx's Ed25519 signature over `timestamp|body` with the account's webhook public key, from
        a timestamp within SIGNATURE_TOLERANCE_SECONDS (the URL is not signed)."""
        signature, timestamp = (
            request.headers.get("telnyx-signature-ed25519", ""),
            request.headers.get("telnyx-timestamp", ""),
        )
        if not signature or not timestamp.isdigit() or not self.account.webhook_public_key:
            return False
        if abs(time.time() - int(timestamp)) > SIGNATURE_TOLERANCE_SECONDS:
            return False
        try:
            key = Ed25519PublicKey.from_public_bytes(base64.b64decode(self.account.webhook_public_key))
            key.verify(base64.b64decode(signature, validate=True), timestamp.encode() + b"|" + request.body)
        except (InvalidSignature, binascii.Error, ValueError):
            return False
        return True

    def answer_stream(self, *, stream_url: str, parameters: dict[str, str]) -> str:
        return json.dumps([["answer", _stream_options(stream_url, parameters)]])

    def answer_refusal(self, *, message: str, language: str) -> str:
        state = encode_state(REFUSAL_STATE)
        speak = {"payload": message, "language": language, "voice": "female", "client_state": state}
        return json.dumps([["answer", {"client_state": state}], ["speak", speak]])

    async def run_commands(self, *, call_sid: str, document: str) -> None:
        """Send a document's commands (`answer_stream`, `answer_refusal`) for the call, in order."""
        for action, body in json.loads(document):
            await self._post(f"/calls/{call_sid}/actions/{action}", body, f"{action} the call")

    # --- REST ------------------------------------------------------------------------------------
    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.account.auth_token}", "Accept": "application/json"}

    async def _post(self, path: str, body: dict[str, Any], action: str) -> Any:
        """POST `body` to Telnyx from the event loop; the answer's `data`."""
        try:
            async with httpx.AsyncClient(
                base_url=settings.TELNYX_API_BASE_URL, timeout=settings.TELNYX_API_TIMEOUT_SECONDS
            ) as client:
                response = await client.post(path, json=body, headers=self._headers())
        except httpx.HTTPError as exc:
            raise _unreachable(exc, action) from None
        return _data(response, action)

    def _request(self, method: str, path: str, action: str, **options: Any) -> Any:
        """A blocking request (the dashboard, the outbound dispatcher); the answer's `data`."""
        try:
            with httpx.Client(
                base_url=settings.TELNYX_API_BASE_URL, timeout=settings.TELNYX_API_TIMEOUT_SECONDS
            ) as client:
                response = client.request(method, path, headers=self._headers(), **options)
        except httpx.HTTPError as exc:
            raise _unreachable(exc, action) from None
        return _data(response, action)

    async def transfer(self, *, call_sid: str, destination: str, caller_id: str, announcement: str = "") -> None:
        """Telnyx dials `destination` and bridges the caller to it; the stream stops. (`announcement` is
        not said: Call Control's transfer has no speech of its own, and the agent has spoken already.)"""
        body = {"to": destination, **({"from": caller_id} if caller_id else {})}
        await self._post(f"/calls/{call_sid}/actions/transfer", body, "transfer the call")

    async def hang_up(self, *, call_sid: str) -> None:
        """Hang the call up (a call that has already ended is left as it is)."""
        try:
            await self._post(f"/calls/{call_sid}/actions/hangup", {}, "hang up the call")
        except _Refused as exc:
            if exc.code != CALL_ENDED_CODE:
                raise

    def cancel(self, *, call_sid: str) -> None:
        try:
            self._request("POST", f"/calls/{call_sid}/actions/hangup", "cancel the call", json={})
        except _Refused as exc:
            if exc.code != CALL_ENDED_CODE:
                raise

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
        """Dial `to` from the account's connection; the answered call opens its stream at once, and its events
        go to `status_callback_url`. `extra` (Twilio's answering-machine detection) is not used: voicemail
        on Telnyx calls is told by the agent's own detection."""
        body = {
            "connection_id": self.account.account_sid,
            "to": to,
            "from": from_number,
            "timeout_secs": ring_timeout_seconds,
            "webhook_url": status_callback_url,
            "webhook_url_method": "POST",
            **_stream_options(stream_url, parameters),
        }
        created = self._request("POST", "/calls", "place the call", json=body)
        call_control_id = created.get("call_control_id") if isinstance(created, dict) else None
        if not isinstance(call_control_id, str) or not call_control_id:
            raise ProviderError("Telnyx accepted the call without a call control ID")
        return call_control_id

    def configure_number(self, *, phone_number: str, voice_url: str, status_callback_url: str) -> None:
        """Assign the number to the account's Call Control application and point the application's
        webhook at `voice_url` (Telnyx sends every event of its calls there)."""
        found = self._request(
            "GET", "/phone_numbers", "look up the number", params={"filter[phone_number]": phone_number}
        )
        numbers = [item for item in found if isinstance(item, dict)] if isinstance(found, list) else []
        if not numbers:
            raise ProviderError(f"{phone_number} is not a number of the Telnyx account", permanent=True)
        number_id = str(numbers[0].get("id") or "")
        connection = self.account.account_sid
        self._request("PATCH", f"/phone_numbers/{number_id}", "update the number", json={"connection_id": connection})
        self._request(
            "PATCH",
            f"/call_control_applications/{connection}",
            "update the Call Control application",
            json={"webhook_event_url": voice_url, "webhook_api_version": "2"},
        )
