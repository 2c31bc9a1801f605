from django.apps import AppConfig
from django.core import checks


class CallsConfig(AppConfig):
    name = "calls"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_delete

        from calls.models import Call
        from calls.recordings import remove_with_call
        from kit.metrics import check_metrics_token

        # A deleted call (its organization deleted) takes its recording out of the storage.
        post_delete.connect(remove_with_call, sender=Call, dispatch_uid="calls.recording_of_deleted_call")

        # The service's price book (PRICE_BOOK): a bad one stops the start with the field named.
        from django.core.exceptions import ImproperlyConfigured

        from calls.costs.selectors import default_book

        try:
            default_book()
        except ValueError as exc:
            raise ImproperlyConfigured(str(exc)) from None

        # The metrics endpoint's token (kit/metrics.py): refused when weak with DEBUG off.
        checks.register(check_metrics_token)
