from typing import Any

from calls.maintenance import run_maintenance
from voiceagent.commands import JsonCommand


class Command(JsonCommand):
    help = (
        "Close stale active calls as failed and purge agent logs past the retention window (once); "
        'prints {"closedCalls": N, "purgedLogs": M}.'
    )

    def run(self, **options: Any) -> dict[str, Any]:
        return run_maintenance()
