from django.apps import AppConfig


class TelephonyConfig(AppConfig):
    name = "telephony"
    default_auto_field = "django.db.models.BigAutoField"
