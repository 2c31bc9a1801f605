"""Management commands as an operator runs them: the JSON a command of kit.commands.JsonCommand prints, and
`manage.py` in a subprocess with the documented production variables."""

from __future__ import annotations

import io
import json
import os
import secrets
import subprocess
import sys
from typing import Any

from django.core.management import call_command

from testing.daphne import REPO


def command_json(name: str, *args: str) -> Any:
    """Run `manage.py <name> <args>` and read what it printed (CommandError when it refuses)."""
    out = io.StringIO()
    call_command(name, *args, stdout=out)
    return json.loads(out.getvalue())


def settelephony(*args: str) -> dict[str, Any]:
    result: dict[str, Any] = command_json("settelephony", *args)
    return result


def documented_production_env() -> dict[str, str]:
    """deploy/env.example's variables, its empty secrets filled the way it says."""
    values: dict[str, str] = {}
    for line in (REPO / "deploy" / "env.example").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip()
    for name in ("SECRET_KEY", "REALTIME_TOKEN_SECRET", "METRICS_TOKEN"):
        assert values[name] == "", f"secrets ship empty: {name}"
        values[name] = secrets.token_urlsafe(48)
    return values


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # Only the variables given: nothing from the test run's environment (DEBUG, DATABASE_URL...) leaks in.
    clean = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR", "VIRTUAL_ENV")}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env={**clean, "LOG_LEVEL": "WARNING", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
