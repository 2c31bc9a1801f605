"""Database session settings that the service relies on."""

import json
import os
import subprocess
import sys
from pathlib import Path

from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def _options_for(database_url: str) -> dict:
    script = (
        "import json, django; django.setup(); from django.conf import settings; "
        "print(json.dumps(settings.DATABASES['default'].get('OPTIONS', {}), default=str))"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "voiceagent.settings", "DATABASE_URL": database_url}
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_postgresql_sessions_run_without_jit_compilation(db):
    # JIT compiling the agent list cost ~320 ms per request once the calls table held 100,000 rows.
    assert "-c jit=off" in _options_for("postgres://user@127.0.0.1:5432/voiceagent")["options"]
    # An explicit option in the URL comes after ours, so an operator can turn JIT back on.
    assert _options_for("postgres://user@127.0.0.1:5432/va?options=-c%20jit%3Don")["options"].endswith("jit=on")
    if connection.vendor == "postgresql":  # and the live session of this run has it off
        with connection.cursor() as cursor:
            cursor.execute("SHOW jit")
            assert cursor.fetchone()[0] == "off"
