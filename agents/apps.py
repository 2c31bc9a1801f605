from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from accounts.signals import demo_organization_created
        from agents.demo import demo_agent_create

        demo_organization_created.connect(demo_agent_create, dispatch_uid="agents.demo_agent")
