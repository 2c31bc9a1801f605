from django.apps import AppConfig
from django.contrib.admin.apps import AdminConfig
from django.core import checks


class VoiceagentConfig(AppConfig):
    """The project package as an app: it registers the deployment checks (voiceagent/checks.py), the rooms
    check (voiceagent/rooms.py) and the upkeep jobs of every app (calls/maintenance.py)."""

    name = "voiceagent"
    label = "voiceagent"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from calls import maintenance
        from calls import services as calls_services
        from calls.webhooks import events as calls_events
        from kit import background
        from knowledge import services as knowledge_services
        from realtime import services as realtime_services
        from realtime.agent_tests import worker as agent_tests_worker
        from realtime.analysis import worker as realtime_analysis
        from telephony.outbound import dispatcher as telephony_outbound
        from voiceagent.checks import check_secrets, check_shared_secret_key
        from voiceagent.rooms import check_rooms

        # The per-feature background switches of earlier releases still work, for one release: say so.
        background.warn_deprecated()

        # Not tagged `deploy`: every management command (migrate, check) refuses weak secrets in production.
        checks.register(check_secrets, checks.Tags.security)
        checks.register(check_shared_secret_key, checks.Tags.security, deploy=True)
        # Every REST resource in the package its URL names (`make lint`: manage.py check --tag rooms).
        checks.register(check_rooms, "rooms")

        # The upkeep sweep's jobs, in the order they run and are reported. Each is looked up on its module
        # at every sweep (not bound here), so the sweep runs the service as it is then.
        maintenance.register_job("closedCalls", lambda: calls_services.call_close_stale())
        maintenance.register_job("purgedLogs", lambda: calls_services.agent_log_purge())
        maintenance.register_job("failedDocuments", lambda: knowledge_services.document_fail_stuck())
        maintenance.register_job("purgedSessionTokens", lambda: realtime_services.used_session_tokens_purge())
        maintenance.register_job("disabledWebhooks", lambda: calls_events.webhook_endpoints_disable_failing())
        maintenance.register_job("purgedEvents", lambda: calls_events.call_events_purge())
        maintenance.register_job("resumedAnalyses", lambda: realtime_analysis.analysis_resume())
        maintenance.register_job("purgedRecordings", lambda: calls_services.recording_purge())
        maintenance.register_job("failedOutboundCalls", lambda: telephony_outbound.outbound_close_stuck())
        maintenance.register_job("resumedTestRuns", lambda: agent_tests_worker.test_runs_resume())


class DashboardAdminConfig(AdminConfig):
    """Django's admin with the dashboard's site (voiceagent/dashboard.py) as its default site."""

    default_site = "voiceagent.dashboard.DashboardSite"
