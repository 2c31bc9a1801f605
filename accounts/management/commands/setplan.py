from typing import Any

from accounts.commands import organization_from_option
from accounts.models import PlanCode
from accounts.services import organization_set_plan
from kit.commands import JsonCommand


class Command(JsonCommand):
    help = 'Change an organization\'s plan. Prints {"organizationId": ..., "plan": ...}.'

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--org", required=True)
        parser.add_argument("--plan", required=True, choices=PlanCode.values)

    def run(self, **options: Any) -> dict[str, Any]:
        organization = organization_set_plan(
            organization=organization_from_option(options["org"]), plan_code=options["plan"]
        )
        return {"organizationId": str(organization.id), "plan": organization.plan.code}
