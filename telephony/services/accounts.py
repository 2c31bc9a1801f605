"""Telephony accounts (one per organization, secrets encrypted at rest) and pointing numbers at this
service: the public URLs the carrier calls back (built from PUBLIC_BASE_URL) and the dashboard action that
sets a number's voice webhook at the provider.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.db import IntegrityError, transaction

from accounts.models import Organization
from kit import egress
from kit.errors import ApiError
from kit.providers import ProviderError
from kit.validation import url_problem
from telephony.models import PhoneNumber, PhoneNumberProvider, SetupStatus, TelephonyAccount
from telephony.providers import PROVIDERS, provider_for

_ACCOUNT_SID = re.compile(r"AC[0-9a-fA-F]{32}")
_API_KEY_SID = re.compile(r"SK[0-9a-fA-F]{32}")
# A Twilio-compatible provider names accounts and keys its own way (SignalWire: a project ID, a UUID).
_COMPATIBLE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}")

VOICE_PATH = "/telephony/twilio/voice"
STATUS_PATH = "/telephony/twilio/status"
STREAM_PATH = "/telephony/twilio/stream"


def _secret_problem(value: str) -> str | None:
    if not value or not value.strip():
        return "Must not be empty."
    if value != value.strip() or any(c.isspace() for c in value) or len(value) > 200:
        return "Must be the secret exactly as the provider shows it (no spaces, at most 200 characters)."
    return None


def _api_base_url_problem(url: str) -> str | None:
    """Why `url` cannot be a Twilio-compatible provider's REST API base URL, or None. It carries the
    account's credentials: https, or http only to an address literally in OUTBOUND_ALLOWED_NETWORKS (a
    provider or a stand-in on the operator's own network)."""
    if len(url) > 200:
        return "Must be a URL of at most 200 characters."
    problem = url_problem(url)
    if problem:
        return problem
    parts = urlsplit(url)
    if parts.query or parts.fragment or url.endswith("/"):
        return "Must be the API's base URL, without a query, a fragment or a trailing slash."
    if parts.scheme == "http":
        try:
            address = ipaddress.ip_address(parts.hostname or "")
        except ValueError:
            address = None
        if address is None or not any(address in network for network in egress.allowed_networks()):
            return "Must be an https URL (the requests carry the account's credentials)."
    return None


def telephony_account_clean(*, organization: Organization, api_base_url: str = "", **fields: Any) -> None:
    """Check an account as telephony_account_set would save it (ApiError naming the field otherwise),
    `api_base_url` also with the egress guard's check of every request (which resolves its host)."""
    _account_rules(organization=organization, api_base_url=api_base_url, **fields)
    _destination_rule(api_base_url)


def _destination_rule(api_base_url: str) -> None:
    if api_base_url and not _api_base_url_problem(api_base_url):
        egress.validate_destination(api_base_url, field="apiBaseUrl")


def _account_rules(
    *,
    organization: Organization,
    provider: str = PhoneNumberProvider.TWILIO,
    account_sid: str,
    auth_token: str | None,
    api_key_sid: str = "",
    api_key_secret: str | None = None,
    api_base_url: str = "",
) -> None:
    if provider not in PROVIDERS or provider not in PhoneNumberProvider.values:
        raise ApiError.field("provider", f"Must be one of {', '.join(PhoneNumberProvider.values)}.")
    problem = _api_base_url_problem(api_base_url) if api_base_url else None
    if problem:
        raise ApiError.field("apiBaseUrl", problem)
    if api_base_url:
        if not _COMPATIBLE_ID.fullmatch(account_sid or ""):
            raise ApiError.field("accountSid", "Must be the provider's account ID: letters, digits and hyphens.")
        if api_key_sid and not _COMPATIBLE_ID.fullmatch(api_key_sid):
            raise ApiError.field("apiKeySid", "Must be the provider's key ID: letters, digits and hyphens.")
    else:
        if not _ACCOUNT_SID.fullmatch(account_sid or ""):
            raise ApiError.field("accountSid", "Must be a Twilio Account SID: AC followed by 32 hexadecimal digits.")
        if api_key_sid and not _API_KEY_SID.fullmatch(api_key_sid):
            raise ApiError.field("apiKeySid", "Must be a Twilio API key SID: SK followed by 32 hexadecimal digits.")
    for field, value in (("authToken", auth_token), ("apiKeySecret", api_key_secret)):
        problem = _secret_problem(value) if value else None
        if problem:
            raise ApiError.field(field, problem)
    stored = TelephonyAccount.objects.filter(organization=organization).first()
    if not auth_token and (stored is None or not stored.auth_token):
        raise ApiError.field("authToken", "The account's auth token is required.")
    if not auth_token and stored is not None and stored.account_sid != account_sid:
        raise ApiError.field("authToken", "Another Account SID needs its own auth token.")
    if api_key_secret and not api_key_sid:
        raise ApiError.field("apiKeySid", "An API key secret needs its API key SID.")
    if api_key_sid and not api_key_secret and (stored is None or stored.api_key_sid != api_key_sid):
        raise ApiError.field("apiKeySecret", "An API key SID needs its secret.")
    if TelephonyAccount.objects.filter(account_sid=account_sid).exclude(organization=organization).exists():
        raise ApiError.conflict(f"Account {account_sid} belongs to another organization.")


def telephony_account_set(
    *,
    organization: Organization,
    provider: str = PhoneNumberProvider.TWILIO,
    account_sid: str,
    auth_token: str | None,
    api_key_sid: str = "",
    api_key_secret: str | None = None,
    api_base_url: str = "",
) -> TelephonyAccount:
    """Create or replace the organization's telephony account (one per organization). A secret given as
    None or "" keeps the stored one (the dashboard never shows secrets again, so an edit leaves them
    blank); a new account needs its auth token; an API key SID needs its secret (given or stored for
    that same SID); no API key SID removes the API key (REST calls then use the auth token). An
    `api_base_url` names a Twilio-compatible provider's REST API; one every request would be refused (the
    egress guard) is refused now."""
    account_sid, api_key_sid = (account_sid or "").strip(), (api_key_sid or "").strip()
    api_base_url = (api_base_url or "").strip()
    fields: dict[str, Any] = {
        "provider": provider,
        "account_sid": account_sid,
        "auth_token": auth_token or None,
        "api_key_sid": api_key_sid,
        "api_key_secret": api_key_secret or None,
        "api_base_url": api_base_url,
    }
    _destination_rule(api_base_url)  # resolves a host name: before the transaction
    with transaction.atomic():
        Organization.objects.select_for_update().filter(pk=organization.pk).values_list("pk", flat=True).get()
        _account_rules(organization=organization, **fields)
        account = TelephonyAccount.objects.filter(organization=organization).first() or TelephonyAccount(
            organization=organization
        )
        account.provider, account.account_sid, account.api_base_url = provider, account_sid, api_base_url
        if auth_token:
            account.auth_token = auth_token
        if not api_key_sid:
            account.api_key_secret = None
        elif api_key_secret:
            account.api_key_secret = api_key_secret
        account.api_key_sid = api_key_sid
        try:
            with transaction.atomic():
                account.save()
        except IntegrityError:
            raise ApiError.conflict(f"Account {account_sid} belongs to another organization.") from None
    return account


@dataclass(frozen=True)
class PublicUrls:
    voice: str
    status: str
    stream: str


def public_urls() -> PublicUrls:
    """The service's telephony URLs as the carrier reaches them, built from PUBLIC_BASE_URL (never from
    a request's Host). ProviderError(permanent) when PUBLIC_BASE_URL is not set."""
    base = (settings.PUBLIC_BASE_URL or "").rstrip("/")
    if not base:
        raise ProviderError(
            "PUBLIC_BASE_URL is not set: phone calls need the public https address of this service", permanent=True
        )
    parts = urlsplit(base)
    socket_scheme = "wss" if parts.scheme == "https" else "ws"
    return PublicUrls(
        voice=base + VOICE_PATH,
        status=base + STATUS_PATH,
        stream=urlunsplit((socket_scheme, parts.netloc, parts.path + STREAM_PATH, "", "")),
    )


def phone_number_point(*, number: PhoneNumber) -> PhoneNumber:
    """Dashboard action "Point at this service": set the number's voice webhook and status callback at
    the provider. The number becomes `ready`, or `error` with the reason (nothing is raised)."""
    error = ""
    try:
        urls = public_urls()
        account = TelephonyAccount.objects.filter(organization_id=number.organization_id).first()
        if account is None:
            raise ProviderError(
                "The organization has no telephony account (dashboard: Telephony accounts)", permanent=True
            )
        if account.provider != number.provider:
            raise ProviderError(
                f"The number is a {number.provider} number; the account is {account.provider}", permanent=True
            )
        provider_for(account).configure_number(
            phone_number=number.phone_number, voice_url=urls.voice, status_callback_url=urls.status
        )
    except ProviderError as exc:
        error = exc.message
    number.setup_status = SetupStatus.ERROR if error else SetupStatus.READY
    number.setup_error = error[:1000]
    PhoneNumber.objects.filter(pk=number.pk).update(setup_status=number.setup_status, setup_error=number.setup_error)
    return number
