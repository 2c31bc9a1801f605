from django.apps import AppConfig
from django.core import checks
from django.db.models.signals import post_migrate


class TelephonyConfig(AppConfig):
    name = "telephony"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from calls.signals import call_ended
        from telephony.agent_list import install_triggers
        from telephony.campaigns.services import on_call_ended
        from telephony.checks import check_public_base_url
        from telephony.outbound import call_ended_received

        # A database check: it reads the accounts table, so it runs with `manage.py check --database
        # default` (and before migrate), not in every management command or test run.
        checks.register(check_public_base_url, checks.Tags.database)
        # Call batches: a recipient's call ended -> its outcome or a retry (telephony/campaigns/services.py).
        call_ended.connect(on_call_ended, dispatch_uid="telephony.campaigns.on_call_ended")
        # A call that ended may free an outbound slot: the dispatcher places what waits (telephony/outbound.py).
        call_ended.connect(call_ended_received, dispatch_uid="telephony.outbound")
        # The agent list's change counter is kept by database triggers, (re)installed after every migrate.
        post_migrate.connect(install_triggers, sender=self, dispatch_uid="telephony.agent_list")
