from django.apps import AppConfig
from django.core import checks


class CallsConfig(AppConfig):
    name = "calls"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from kit.metrics import check_metrics_token

        # The metrics endpoint's token (kit/metrics.py): refused when weak with DEBUG off.
        checks.register(check_metrics_token)
