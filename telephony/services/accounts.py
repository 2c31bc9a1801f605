"""Telephony accounts (one per organization, secrets encrypted at rest) and pointing numbers at this
service: the public URLs the carrier calls back (built from PUBLIC_BASE_URL) and the dashboard action that
sets a number's voice webhook at the provider.

A Twilio account is its Account SID, Auth Token and optional API key (or a Twilio-compatible provider's, with
its API base URL). A Telnyx account is its Call Control application's connection ID (`account_sid`), an API
key (kept where Twilio's Auth Token is: encrypted, never shown again) and Telnyx's webhook public key.
"""

from __future__ import annotations

import base64
import binascii
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
# A provider's own ids: a Twilio-compatible provider's account and key (SignalWire: a project ID, a UUID),
# Telnyx's connection ID.
_PROVIDER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}")

VOICE_PATH = "/telephony/twilio/voice"
STATUS_PATH = "/telephony/twilio/status"
STREAM_PATH = "/telephony/twilio/stream"
# Telnyx sends every event of a call (incoming, answered, hung up) to its application's one webhook URL.
TELNYX_EVENTS_PATH = "/telephony/telnyx/events"
TELNYX_STREAM_PATH = "/telephony/telnyx/stream"
_PATHS: dict[str, tuple[str, str, str]] = {
    PhoneNumberProvider.TWILIO: (VOICE_PATH, STATUS_PATH, STREAM_PATH),
    PhoneNumberProvider.TELNYX: (TELNYX_EVENTS_PATH, TELNYX_EVENTS_PATH, TELNYX_STREAM_PATH),
}


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


def _public_key_problem(value: str) -> str | None:
    try:
        key = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) != 32:
        return "Must be Telnyx's webhook public key as Telnyx shows it: 32 bytes in base64 (44 characters)."
    return None


def _telnyx_rules(
    *,
    organization: Organization,
    account_sid: str,
    auth_token: str | None,
    api_key_sid: str,
    api_key_secret: str | None,
    api_base_url: str,
    webhook_public_key: str,
) -> None:
    if not _PROVIDER_ID.fullmatch(account_sid or ""):
        raise ApiError.field(
            "accountSid", "Must be the Call Control application's connection ID: letters, digits and hyphens."
        )
    for field, value in (("apiKeySid", api_key_sid), ("apiKeySecret", api_key_secret), ("apiBaseUrl", api_base_url)):
        if value:
            raise ApiError.field(field, "Only for Twilio accounts.")
    problem = _secret_problem(auth_token) if auth_token else None
    if problem:
        raise ApiError.field("authToken", problem)
    problem = _public_key_problem(webhook_public_key)
    if problem:
        raise ApiError.field("webhookPublicKey", problem)
    stored = TelephonyAccount.objects.filter(organization=organization).first()
    if not auth_token and (stored is None or not stored.auth_token or stored.provider != PhoneNumberProvider.TELNYX):
        raise ApiError.field("authToken", "The account's Telnyx API key is required.")
    if not auth_token and stored is not None and stored.account_sid != account_sid:
        raise ApiError.field("authToken", "Another connection ID needs its API key.")


_SIP_DOMAIN = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,56}[A-Za-z0-9])?(:[0-9]{1,5})?")


def sip_networks(value: Any) -> list[str]:
    """The allowed networks of a SIP account (a list, or one comma-separated string, of CIDRs; none: an empty
    list), normalized; ApiError naming `allowedNetworks` otherwise."""
    items = [part.strip() for part in value.split(",") if part.strip()] if isinstance(value, str) else value or []
    if not isinstance(items, list) or len(items) > 50:
        raise ApiError.field("allowedNetworks", "Must list at most 50 networks (CIDR).")
    networks = []
    for item in items:
        try:
            networks.append(str(ipaddress.ip_network(str(item), strict=False)))
        except ValueError:
            raise ApiError.field("allowedNetworks", f"{str(item)[:60]!r} is not a network (CIDR).") from None
    return networks


_SIP_USERNAME = re.compile(r"[A-Za-z0-9._~+-]{1,64}")


def _sip_rules(
    *,
    organization: Organization,
    account_sid: str,
    unused: dict[str, Any],
    allowed_networks: Any,
    sip_username: str,
    password: str | None,
) -> None:
    if not _SIP_DOMAIN.fullmatch(account_sid or ""):
        raise ApiError.field("accountSid", "Must be the trunk's or PBX's SIP domain: HOST or HOST:PORT.")
    for field, value in unused.items():
        if value:
            raise ApiError.field(field, "Not used by SIP accounts.")
    networks = sip_networks(allowed_networks)
    if sip_username and not _SIP_USERNAME.fullmatch(sip_username):
        raise ApiError.field("sipUsername", "Must be a SIP username: letters, digits and . _ ~ + -, at most 64.")
    problem = _secret_problem(password) if password else None
    if problem:
        raise ApiError.field("authToken", problem)
    if password and not sip_username:
        raise ApiError.field("sipUsername", "A SIP password needs its username.")
    stored = TelephonyAccount.objects.filter(organization=organization, provider=PhoneNumberProvider.SIP).first()
    kept = stored is not None and stored.sip_username == sip_username and bool(stored.auth_token)
    if sip_username and not password and not kept:
        raise ApiError.field("authToken", "A SIP username needs its password.")
    if not networks and not sip_username:
        raise ApiError.field(
            "allowedNetworks", "List the networks (CIDR) calls come from, or give a username and password, or both."
        )


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
    webhook_public_key: str = "",
    allowed_networks: Any = None,
    sip_username: str = "",
) -> None:
    if provider not in PROVIDERS or provider not in PhoneNumberProvider.values:
        raise ApiError.field("provider", f"Must be one of {', '.join(PhoneNumberProvider.values)}.")
    if provider == PhoneNumberProvider.SIP:
        unused = {"apiKeySid": api_key_sid, "apiKeySecret": api_key_secret}
        unused |= {"apiBaseUrl": api_base_url, "webhookPublicKey": webhook_public_key}
        _sip_rules(
            organization=organization,
            account_sid=account_sid,
            unused=unused,
            allowed_networks=allowed_networks,
            sip_username=sip_username,
            password=auth_token,
        )
        return  # several organizations may share a trunk's domain
    for field, value in (("allowedNetworks", allowed_networks), ("sipUsername", sip_username)):
        if value:
            raise ApiError.field(field, "Only for SIP accounts.")
    if provider == PhoneNumberProvider.TELNYX:
        _telnyx_rules(
            organization=organization,
            account_sid=account_sid,
            auth_token=auth_token,
            api_key_sid=api_key_sid,
            api_key_secret=api_key_secret,
            api_base_url=api_base_url,
            webhook_public_key=webhook_public_key,
        )
    elif webhook_public_key:
        raise ApiError.field("webhookPublicKey", "Only for Telnyx accounts.")
    else:
        _twilio_rules(
            organization=organization,
            account_sid=account_sid,
            auth_token=auth_token,
            api_key_sid=api_key_sid,
            api_key_secret=api_key_secret,
            api_base_url=api_base_url,
        )
    others = TelephonyAccount.objects.exclude(organization=organization).exclude(provider=PhoneNumberProvider.SIP)
    if others.filter(account_sid=account_sid).exists():
        raise ApiError.conflict(f"Account {account_sid} belongs to another organization.")


def _twilio_rules(
    *,
    organization: Organization,
    account_sid: str,
    auth_token: str | None,
    api_key_sid: str,
    api_key_secret: str | None,
    api_base_url: str,
) -> None:
    problem = _api_base_url_problem(api_base_url) if api_base_url else None
    if problem:
        raise ApiError.field("apiBaseUrl", problem)
    if api_base_url:
        if not _PROVIDER_ID.fullmatch(account_sid or ""):
            raise ApiError.field("accountSid", "Must be the provider's account ID: letters, digits and hyphens.")
        if api_key_sid and not _PROVIDER_ID.fullmatch(api_key_sid):
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
    if not auth_token and (stored is None or not stored.auth_token or stored.provider != PhoneNumberProvider.TWILIO):
        raise ApiError.field("authToken", "The account's auth token is required.")
    if not auth_token and stored is not None and stored.account_sid != account_sid:
        raise ApiError.field("authToken", "Another Account SID needs its own auth token.")
    if api_key_secret and not api_key_sid:
        raise ApiError.field("apiKeySid", "An API key secret needs its API key SID.")
    if api_key_sid and not api_key_secret and (stored is None or stored.api_key_sid != api_key_sid):
        raise ApiError.field("apiKeySecret", "An API key SID needs its secret.")


def telephony_account_set(
    *,
    organization: Organization,
    provider: str = PhoneNumberProvider.TWILIO,
    account_sid: str,
    auth_token: str | None = None,
    api_key_sid: str = "",
    api_key_secret: str | None = None,
    api_base_url: str = "",
    webhook_public_key: str = "",
    allowed_networks: Any = None,
    sip_username: str = "",
) -> TelephonyAccount:
    """Create or replace the organization's telephony account (one per organization). A secret given as
    None or "" keeps the stored one (the dashboard never shows secrets again, so an edit leaves them
    blank); a new account needs its auth token; an API key SID needs its secret (given or stored for
    that same SID); no API key SID removes the API key (REST calls then use the auth token). An
    `api_base_url` names a Twilio-compatible provider's REST API; one every request would be refused (the
    egress guard) is refused now. A Telnyx account (`provider` telnyx) is its connection ID (`account_sid`),
    its API key (`auth_token`, kept like a secret) and Telnyx's `webhook_public_key`. A SIP account is its
    trunk's or PBX's domain (`account_sid`), the `allowed_networks` its INVITEs come from unchallenged,
    and the digest `sip_username` with its password (`auth_token`) that other INVITEs authenticate with."""
    account_sid, api_key_sid = (account_sid or "").strip(), (api_key_sid or "").strip()
    api_base_url, webhook_public_key = (api_base_url or "").strip(), (webhook_public_key or "").strip()
    fields: dict[str, Any] = {
        "provider": provider,
        "account_sid": account_sid,
        "auth_token": auth_token or None,
        "api_key_sid": api_key_sid,
        "api_key_secret": api_key_secret or None,
        "api_base_url": api_base_url,
        "webhook_public_key": webhook_public_key,
        "allowed_networks": allowed_networks,
        "sip_username": (sip_username or "").strip(),
    }
    _destination_rule(api_base_url)  # resolves a host name: before the transaction
    with transaction.atomic():
        Organization.objects.select_for_update().filter(pk=organization.pk).values_list("pk", flat=True).get()
        _account_rules(organization=organization, **fields)
        account = TelephonyAccount.objects.filter(organization=organization).first() or TelephonyAccount(
            organization=organization
        )
        account.provider, account.account_sid, account.api_base_url = provider, account_sid, api_base_url
        account.webhook_public_key = webhook_public_key
        sip = provider == PhoneNumberProvider.SIP
        account.allowed_networks = sip_networks(allowed_networks) if sip else []
        account.sip_username = fields["sip_username"] if sip else ""
        if sip and not account.sip_username:
            account.auth_token = ""  # no digest credentials: calls are admitted by their network only
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


def public_urls(provider: str = PhoneNumberProvider.TWILIO) -> PublicUrls:
    """The service's telephony URLs for `provider`'s calls as the carrier reaches them, built from
    PUBLIC_BASE_URL (never from a request's Host). ProviderError(permanent) when PUBLIC_BASE_URL is not set."""
    base = (settings.PUBLIC_BASE_URL or "").rstrip("/")
    if not base:
        raise ProviderError(
            "PUBLIC_BASE_URL is not set: phone calls need the public https address of this service", permanent=True
        )
    parts = urlsplit(base)
    socket_scheme = "wss" if parts.scheme == "https" else "ws"
    voice, status, stream = _PATHS.get(provider, _PATHS[PhoneNumberProvider.TWILIO])
    return PublicUrls(
        voice=base + voice,
        status=base + status,
        stream=urlunsplit((socket_scheme, parts.netloc, parts.path + stream, "", "")),
    )


def phone_number_point(*, number: PhoneNumber) -> PhoneNumber:
    """Dashboard action "Point at this service": set the number's voice webhook and status callback at
    the provider. The number becomes `ready`, or `error` with the reason (nothing is raised)."""
    error = ""
    try:
        account = TelephonyAccount.objects.filter(organization_id=number.organization_id).first()
        if account is None:
            raise ProviderError(
                "The organization has no telephony account (dashboard: Telephony accounts)", permanent=True
            )
        urls = public_urls(account.provider)
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
