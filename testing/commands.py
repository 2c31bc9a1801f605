"""Management commands as an operator runs them: the JSON a command of kit.commands.JsonCommand prints."""

from __future__ import annotations

import io
import json
from typing import Any

from django.core.management import call_command


def command_json(name: str, *args: str) -> Any:
    """Run `manage.py <name> <args>` and read what it printed (CommandError when it refuses)."""
    out = io.StringIO()
    call_command(name, *args, stdout=out)
    return json.loads(out.getvalue())


def settelephony(*args: str) -> dict[str, Any]:
    result: dict[str, Any] = command_json("settelephony", *args)
    return result
