"""Bearer API-key authentication for every /public/v1 endpoint."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework import authentication, exceptions

from accounts.models import ApiKey, Organization
from accounts.selectors import apikey_find_active

_KEY_SHAPE = re.compile(r"^[A-Za-z0-9_\-]{16,128}$")
# RFC 6750 b64token: what a well-formed Bearer credential looks like, whether or not it is one of our keys.
_BEARER_TOKEN = re.compile(r"^[A-Za-z0-9\-._~+/]+=*$")
# Writing last_used_at on every request would turn each read into a write; a minute is precise enough.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class ApiPrincipal:
    """The caller of the public API: an organization, through one of its keys."""

    organization: Organization
    api_key: ApiKey
    is_authenticated: bool = True
    is_anonymous: bool = False


class ApiKeyAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request: Any) -> tuple[ApiPrincipal, ApiKey]:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            raise exceptions.NotAuthenticated("Missing API key: send Authorization: Bearer <API key>")
        scheme, _, raw_key = header.partition(" ")
        raw_key = raw_key.strip()
        if scheme.lower() != "bearer" or not _BEARER_TOKEN.match(raw_key):
            raise exceptions.AuthenticationFailed("Malformed Authorization header: expected Bearer <API key>")
        # A well-formed credential that is not an active key (unknown, revoked, or not even shaped like
        # one of ours) is simply invalid.
        key = apikey_find_active(raw_key=raw_key) if _KEY_SHAPE.match(raw_key) else None
        if key is None:
            raise exceptions.AuthenticationFailed("Invalid API key")
        now = timezone.now()
        if key.last_used_at is None or now - key.last_used_at > LAST_USED_RESOLUTION:
            ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        return ApiPrincipal(organization=key.organization, api_key=key), key

    def authenticate_header(self, request: Any) -> str:
        return 'Bearer realm="api"'


def organization_of(request: Any) -> Organization:
    return request.user.organization
