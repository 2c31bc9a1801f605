from django.apps import AppConfig
from django.core import checks


class TelephonyConfig(AppConfig):
    name = "telephony"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from telephony.checks import check_public_base_url

        # A database check: it reads the accounts table, so it runs with `manage.py check --database
        # default` (and before migrate), not in every management command or test run.
        checks.register(check_public_base_url, checks.Tags.database)

        # A call that ended may free an outbound slot: the dispatcher places what waits (telephony/outbound.py).
        from calls.signals import call_ended
        from telephony.outbound import call_ended_received

        call_ended.connect(call_ended_received, dispatch_uid="telephony.outbound")
