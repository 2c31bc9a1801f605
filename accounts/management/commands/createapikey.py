from typing import Any

from accounts.commands import organization_from_option
from accounts.services import apikey_create
from kit.commands import JsonCommand


class Command(JsonCommand):
    help = 'Create an API key for an organization. Prints {"apiKey": ...}; the key is shown only here.'

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--org", required=True)
        parser.add_argument("--name", default="")

    def run(self, **options: Any) -> dict[str, Any]:
        issued = apikey_create(organization=organization_from_option(options["org"]), name=options["name"])
        return {"apiKey": issued.raw_key}
