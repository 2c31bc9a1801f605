from typing import Any

from calls.maintenance import run_maintenance
from kit.commands import JsonCommand


class Command(JsonCommand):
    help = (
        "One upkeep sweep: close stale active calls as failed, purge agent logs past the retention window, "
        "fail knowledge documents stuck in processing, purge spent session tokens, fail outbound calls the carrier "
        'never reported on; prints {"closedCalls": N, "purgedLogs": M, "failedDocuments": D, '
        '"purgedSessionTokens": T, "purgedRecordings": R, "failedOutboundCalls": O} (and the other jobs).'
    )

    def run(self, **options: Any) -> dict[str, Any]:
        return run_maintenance(strict=True)
