from django.apps import AppConfig
from django.core import checks


class TelephonyConfig(AppConfig):
    name = "telephony"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # A database check: it reads the accounts table, so it runs with `manage.py check --database
        # default` (and before migrate), not in every management command or test run.
        checks.register(check_public_base_url, checks.Tags.database)


def check_public_base_url(
    app_configs: object = None, databases: object = None, **kwargs: object
) -> list[checks.CheckMessage]:
    """Phone calls need PUBLIC_BASE_URL (signature checks, stream URLs) and REALTIME_TOKEN_SECRET (stream
    tokens): warn when an organization has a telephony account but the service cannot answer calls."""
    from django.conf import settings
    from django.db import DatabaseError

    from telephony.models import TelephonyAccount

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
