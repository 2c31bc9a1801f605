"""Twilio's side of the webhooks, played from scripts following Twilio's documented requests: the
voice webhook and status callback form parameters, signed with X-Twilio-Signature computed by the
official RequestValidator over the URL Twilio requested (the PUBLIC_BASE_URL form) and the params."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any
from xml.etree import ElementTree

import pytest
from django.test import Client
from twilio.request_validator import RequestValidator

from accounts.models import Organization
from telephony.models import TelephonyAccount
from telephony.services.accounts import telephony_account_set
from testing.webhooks import LoopbackReceiver, Reply

ACCOUNT_SID = "AC" + "1f" * 16
AUTH_TOKEN = "9b7d1c3e5f" + "a" * 22  # 32 characters, as Twilio's
PUBLIC_BASE_URL = "http://voice.example.test"
CALLER = "+14155550199"


def call_sid() -> str:
    return "CA" + secrets.token_hex(16)


def voice_params(*, to: str, sid: str | None = None, account_sid: str = ACCOUNT_SID, **extra: str) -> dict[str, str]:
    """The parameters of Twilio's voice webhook for an inbound call (twilio.com/docs/usage/webhooks/voice-webhooks)."""
    params = {
        "AccountSid": account_sid,
        "ApiVersion": "2010-04-01",
        "CallSid": sid or call_sid(),
        "CallStatus": "ringing",
        "Called": to,
        "Caller": CALLER,
        "Direction": "inbound",
        "From": CALLER,
        "FromCountry": "US",
        "To": to,
        "ToCountry": "US",
    }
    params.update(extra)
    return params


def status_params(*, sid: str, status: str, to: str = "+14155550123", duration: str = "42") -> dict[str, str]:
    """A call status callback (twilio.com/docs/voice/api/call-resource#statuscallback)."""
    return {
        **voice_params(to=to, sid=sid, CallStatus=status),
        "CallDuration": duration,
        "CallbackSource": "call-progress-events",
        "SequenceNumber": "0",
        "Timestamp": "Tue, 24 Nov 2026 01:30:00 +0000",
    }


def amd_params(
    *, sid: str, answered_by: str, duration_ms: int = 2400, account_sid: str = ACCOUNT_SID
) -> dict[str, str]:
    """Twilio's asynchronous answering-machine detection callback (AsyncAmdStatusCallback:
    twilio.com/docs/voice/answering-machine-detection#asyncamdstatuscallback)."""
    return {
        "AccountSid": account_sid,
        "CallSid": sid,
        "AnsweredBy": answered_by,
        "MachineDetectionDuration": str(duration_ms),
    }


def sign(url: str, params: dict[str, str], token: str = AUTH_TOKEN) -> str:
    return RequestValidator(token).compute_signature(url, params)


def post_signed(
    client: Client, path: str, params: dict[str, str], *, base: str = PUBLIC_BASE_URL, signature: str | None = None
) -> Any:
    """POST as Twilio does: form-encoded, signed over base + path (with its query string)."""
    headers = {"X-Twilio-Signature": signature if signature is not None else sign(base + path, params)}
    return client.post(path, params, headers=headers)


def parse_twiml(body: bytes) -> ElementTree.Element:
    root = ElementTree.fromstring(body)  # noqa: S314 - our own answer, not untrusted input
    assert root.tag == "Response"
    return root


def make_account(organization: Organization, **fields: Any) -> TelephonyAccount:
    values = {"account_sid": ACCOUNT_SID, "auth_token": AUTH_TOKEN, **fields}
    return telephony_account_set(organization=organization, **values)


@pytest.fixture
def public_settings(settings: Any) -> Any:
    settings.PUBLIC_BASE_URL = PUBLIC_BASE_URL
    settings.REALTIME_TOKEN_SECRET = "stream-token-test-secret-0123456789"
    return settings


@pytest.fixture(name="twilio_api", scope="module")
def twilio_api_fixture() -> Iterator[LoopbackReceiver]:
    """Twilio's REST API on loopback (a server's TWILIO_API_BASE_URL), for a module's server: every call
    update answers in progress. A test module uses it by importing `twilio_api_fixture`."""
    with LoopbackReceiver(default=Reply(json={"sid": "CA" + "0" * 32, "status": "in-progress"})) as receiver:
        yield receiver
