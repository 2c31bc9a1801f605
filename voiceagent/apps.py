from django.apps import AppConfig
from django.contrib.admin.apps import AdminConfig
from django.core import checks


class VoiceagentConfig(AppConfig):
    """The project package as an app: it registers the deployment checks (voiceagent/checks.py)."""

    name = "voiceagent"
    label = "voiceagent"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from voiceagent.checks import check_secrets, check_shared_secret_key

        # Not tagged `deploy`: every management command (migrate, check) refuses weak secrets in production.
        checks.register(check_secrets, checks.Tags.security)
        checks.register(check_shared_secret_key, checks.Tags.security, deploy=True)


class DashboardAdminConfig(AdminConfig):
    """Django's admin with the dashboard's site (voiceagent/dashboard.py) as its default site."""

    default_site = "voiceagent.dashboard.DashboardSite"
