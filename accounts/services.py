"""Organizations, plans and API keys: the rules shared by the admin, the ops commands and the API."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

import phonenumbers
from django.db import transaction
from django.utils import timezone

from accounts.models import ApiKey, Organization, Plan
from kit.errors import ApiError

API_KEY_PREFIX = "va_"
API_KEY_VISIBLE_CHARS = 10


def hash_api_key(raw_key: str) -> str:
    # Keys carry 256 random bits, so a fast hash is enough: nothing to brute-force.
    return hashlib.sha256(raw_key.encode()).hexdigest()


@dataclass(frozen=True)
class IssuedKey:
    api_key: ApiKey
    raw_key: str  # shown once to the creator; never stored


def plan_get(*, code: str) -> Plan:
    try:
        return Plan.objects.get(code=code)
    except Plan.DoesNotExist:
        raise ApiError.invalid(f"Unknown plan {code!r}") from None


def apikey_create(*, organization: Organization, name: str = "") -> IssuedKey:
    raw_key = API_KEY_PREFIX + secrets.token_urlsafe(32)
    key = ApiKey.objects.create(
        organization=organization,
        name=name,
        prefix=raw_key[:API_KEY_VISIBLE_CHARS],
        key_hash=hash_api_key(raw_key),
    )
    return IssuedKey(api_key=key, raw_key=raw_key)


def apikey_revoke(*, api_key: ApiKey) -> ApiKey:
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
    return api_key


def organization_create(*, name: str, plan_code: str, key_name: str = "default") -> tuple[Organization, IssuedKey]:
    plan = plan_get(code=plan_code)
    with transaction.atomic():
        organization = Organization.objects.create(name=name, plan=plan, on_trial=plan.code == "trial")
        issued = apikey_create(organization=organization, name=key_name)
    return organization, issued


def organization_set_plan(*, organization: Organization, plan_code: str) -> Organization:
    """Change the plan. Moving to `trial` puts the organization on trial; any paid plan ends it.

    Active agents above a lower allowance stay active (nothing is switched off behind the
    customer's back); new activations are refused until they are under it again.
    """
    plan = plan_get(code=plan_code)
    organization.plan = plan
    organization.on_trial = plan.code == "trial"
    organization.save(update_fields=["plan", "on_trial"])
    return organization


# The most countries an organization lists (ISO 3166-1 has 249): a longer list is a mistake.
MAX_OUTBOUND_COUNTRIES = 250


def outbound_countries_clean(value: Any, *, field: str = "outboundCountries") -> list[str] | None:
    """The destination-country allowlist as stored: null (the default: the countries of the organization's
    numbers), or a sorted list of ISO 3166-1 alpha-2 codes phone numbers exist in (upper case; `gb` is
    read as `GB`). 400 naming `field` for anything else, an empty list included (null restores the default)."""
    if value is None:
        return None
    if not isinstance(value, list) or not value or len(value) > MAX_OUTBOUND_COUNTRIES:
        raise ApiError.field(
            field,
            f"Must be null (the countries of the organization's numbers) or a non-empty list of at most "
            f'{MAX_OUTBOUND_COUNTRIES} ISO 3166-1 alpha-2 country codes, for example ["US", "CA"].',
        )
    codes: set[str] = set()
    for item in value:
        code = item.strip().upper() if isinstance(item, str) else ""
        if code not in phonenumbers.SUPPORTED_REGIONS:
            shown = item[:20] if isinstance(item, str) else item
            raise ApiError.field(field, f"{shown!r} is not an ISO 3166-1 alpha-2 country code with phone numbers.")
        codes.add(code)
    return sorted(codes)


def organization_outbound_countries_set(*, organization: Organization, countries: Any) -> Organization:
    """Set the countries outbound calls of the organization may go to (outbound_countries_clean)."""
    organization.outbound_countries = outbound_countries_clean(countries)
    organization.save(update_fields=["outbound_countries"])
    return organization
