import json
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from accounts.models import Organization
from accounts.services import organization_create
from accounts.signals import demo_organization_created

DEMO_FILE = settings.VAR_DIR / "demo.json"


class Command(BaseCommand):
    help = "First run only: create a demo organization and API key and print them (kept in var/demo.json)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--base-url",
            default="",
            help="The address the service is served on, for the example command printed "
            "(default: PUBLIC_BASE_URL, else http://127.0.0.1:8000; `make run` gives its own).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        base = (options["base_url"] or settings.PUBLIC_BASE_URL or "http://127.0.0.1:8000").rstrip("/")
        example = f"Try: curl -H 'Authorization: Bearer <apiKey>' {base}/public/v1/agents"
        if DEMO_FILE.exists():
            demo = json.loads(DEMO_FILE.read_text())
            if Organization.objects.filter(pk=demo["organizationId"]).exists():
                self.stdout.write(
                    f"Demo organization {demo['organizationId']} (key printed on first run, in var/demo.json)\n"
                    + example
                )
                return
        organization, issued = organization_create(name="Demo", plan_code="studio", key_name="demo")
        demo = {"organizationId": str(organization.id), "apiKey": issued.raw_key}
        DEMO_FILE.write_text(json.dumps(demo))
        DEMO_FILE.chmod(0o600)
        # The apps above accounts add their part (the agents app: the demo agent, recording its calls).
        lines = [
            str(line)
            for _, line in demo_organization_created.send(sender=self.__class__, organization=organization)
            if line
        ]
        self.stdout.write(
            "Created the demo organization (Studio plan).\n"
            f"  organizationId: {demo['organizationId']}\n"
            f"  apiKey:         {demo['apiKey']}\n" + "".join(f"{line}\n" for line in lines) + example
        )
