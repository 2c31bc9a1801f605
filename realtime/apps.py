from django.apps import AppConfig
from django.core import checks


class RealtimeConfig(AppConfig):
    name = "realtime"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        checks.register(check_voice_engine)


def check_voice_engine(app_configs: object = None, **kwargs: object) -> list[checks.CheckMessage]:
    """A deployment whose VOICE_ENGINE or LLM_PROVIDER cannot run is refused at `manage.py check`
    (sessions are refused too, with close code 4500 and the same message)."""
    from realtime.engine.voice import configuration_problems

    return [checks.Error(problem, id="realtime.E001") for problem in configuration_problems()]
