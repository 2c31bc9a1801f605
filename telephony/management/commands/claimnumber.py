from typing import Any

from accounts.commands import organization_from_option
from kit.commands import JsonCommand
from telephony.models import PhoneNumberStatus, SetupStatus
from telephony.services.numbers import phone_number_claim


class Command(JsonCommand):
    help = 'Record a phone number claimed by an organization. Prints {"id": ...}.'

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--org", required=True)
        parser.add_argument("--number", required=True, help="E.164, for example +14155550123")
        parser.add_argument("--country", default=None, help="Two-letter code; default: from the number")
        parser.add_argument("--status", default=PhoneNumberStatus.CLAIMED, choices=PhoneNumberStatus.values)
        parser.add_argument("--friendly-name", default="")
        parser.add_argument(
            "--setup-status",
            default=SetupStatus.READY,
            choices=[SetupStatus.READY, SetupStatus.PENDING],
            help="ready (default): the number's voice webhook already points at this service (set by hand); "
            "pending: point it with the dashboard action 'Point at this service'",
        )

    def run(self, **options: Any) -> dict[str, Any]:
        number = phone_number_claim(
            organization=organization_from_option(options["org"]),
            number=options["number"],
            country=options["country"],
            status=options["status"],
            friendly_name=options["friendly_name"],
            setup_status=options["setup_status"],
        )
        return {"id": str(number.id)}
