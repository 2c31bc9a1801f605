from __future__ import annotations

import hmac

from accounts.models import ApiKey, Organization
from accounts.services import hash_api_key


def apikey_find_active(*, raw_key: str) -> ApiKey | None:
    """The unrevoked key matching `raw_key`, compared in constant time, with its organization and plan."""
    digest = hash_api_key(raw_key)
    key = ApiKey.objects.select_related("organization__plan").filter(key_hash=digest, revoked_at__isnull=True).first()
    if key is None or not hmac.compare_digest(key.key_hash, digest):
        return None
    return key


def organization_get(*, organization_id: str) -> Organization | None:
    return Organization.objects.select_related("plan").filter(pk=organization_id).first()
