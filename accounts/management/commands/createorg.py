from typing import Any

from accounts.models import PlanCode
from accounts.services import organization_create
from kit.commands import JsonCommand


class Command(JsonCommand):
    help = 'Create an organization with an API key. Prints {"organizationId": ..., "apiKey": ...}.'

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument("--plan", required=True, choices=PlanCode.values)

    def run(self, **options: Any) -> dict[str, Any]:
        organization, issued = organization_create(name=options["name"], plan_code=options["plan"])
        return {"organizationId": str(organization.id), "apiKey": issued.raw_key}
