from typing import Any

from django.core.management.base import CommandError
from django.utils.dateparse import parse_datetime

from kit.commands import JsonCommand
from telephony.campaigns.services import batch_tick


class Command(JsonCommand):
    help = (
        'Place the due calls of every call batch once (e.g. by cron with BATCH_TICK_SECONDS=0). Prints {"placed": n}.'
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--at", default=None, help="Act as if it were this ISO 8601 time (default: now).")

    def run(self, **options: Any) -> dict[str, Any]:
        now = None
        if options["at"]:
            now = parse_datetime(options["at"])
            if now is None or now.tzinfo is None:
                raise CommandError("--at must be an ISO 8601 time with its offset, e.g. 2026-01-05T09:00:00Z")
        return {"placed": batch_tick(now)}
