"""System checks of the telephony setup (registered in telephony/apps.py, tagged `database`: they read the
accounts table, so they run with `manage.py check --database default`, not in every command or test run).
Their own module, so that the models are imported at the top, after the app registry is ready.
"""

from __future__ import annotations

from django.conf import settings
from django.core import checks
from django.db import DatabaseError

from telephony.models import TelephonyAccount


def check_public_base_url(
    app_configs: object = None, databases: object = None, **kwargs: object
) -> list[checks.CheckMessage]:
    """Phone calls need PUBLIC_BASE_URL (signature checks, stream URLs) and REALTIME_TOKEN_SECRET (stream
    tokens): warn when an organization has a telephony account but the service cannot answer calls."""
    try:
        if not TelephonyAccount.objects.exists():
            return []
    except DatabaseError:  # no database yet (a build step) or not migrated
        return []
    warnings: list[checks.CheckMessage] = []
    if not settings.PUBLIC_BASE_URL:
        warnings.append(
            checks.Warning(
                "A telephony account exists but PUBLIC_BASE_URL is not set: incoming calls are refused (503).",
                hint="Set PUBLIC_BASE_URL to the https address Twilio reaches this service at.",
                id="telephony.W001",
            )
        )
    if not settings.REALTIME_TOKEN_SECRET:
        warnings.append(
            checks.Warning(
                "A telephony account exists but REALTIME_TOKEN_SECRET is not set: incoming calls are refused (503).",
                hint="Set REALTIME_TOKEN_SECRET (it signs the media-stream tokens).",
                id="telephony.W002",
            )
        )
    return warnings
