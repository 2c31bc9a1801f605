"""The organization option of the ops commands."""

from __future__ import annotations

from django.core.management.base import CommandError

from accounts.models import Organization
from kit.validation import parse_uuid


def organization_from_option(value: str) -> Organization:
    organization_id = parse_uuid(value, "organization")
    organization = Organization.objects.select_related("plan").filter(pk=organization_id).first()
    if organization is None:
        raise CommandError(f"Organization {value} not found")
    return organization
