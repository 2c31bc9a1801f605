from django.apps import AppConfig
from django.core import checks
from django.db.models.signals import post_migrate


class TelephonyConfig(AppConfig):
    name = "telephony"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from agents.services import register_phone_steps
        from calls import placing
        from calls.signals import call_ended
        from telephony.agent_list import install_triggers
        from telephony.campaigns.services import on_call_ended
        from telephony.checks import check_public_base_url
        from telephony.outbound.dispatcher import call_ended_received
        from telephony.outbound.services import call_hang_up, outbound_call_request
        from telephony.services.agents import agent_numbers_replace, agent_release

        # A database check: it reads the accounts table, so it runs with `manage.py check --database
        # default` (and before migrate), not in every management command or test run.
        checks.register(check_public_base_url, checks.Tags.database)
        # Call batches: a recipient's call ended -> its outcome or a retry (telephony/campaigns/services.py).
        call_ended.connect(on_call_ended, dispatch_uid="telephony.campaigns.on_call_ended")
        # A call that ended may free an outbound slot: the dispatcher places what waits (outbound/dispatcher.py).
        call_ended.connect(call_ended_received, dispatch_uid="telephony.outbound")
        # POST /calls and POST /calls/{id}/hang-up: calls' views, telephony's work (calls/placing.py).
        placing.register(place=outbound_call_request, hang_up=call_hang_up)
        # The agent writes (agents/services.py, the API's and the dashboard's): their phone numbers' steps.
        register_phone_steps(assign=agent_numbers_replace, release=agent_release)
        # The agent list's change counter is kept by database triggers, (re)installed after every migrate.
        post_migrate.connect(install_triggers, sender=self, dispatch_uid="telephony.agent_list")
