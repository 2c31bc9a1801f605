"""Helpers for the ops commands: each prints exactly one JSON object on stdout."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from kit.errors import ApiError


class JsonCommand(BaseCommand):
    """An ops command whose result is one JSON object; failures exit non-zero with the reason."""

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            result = self.run(**options)
        except ApiError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(json.dumps(result, default=str))

    def run(self, **options: Any) -> dict[str, Any]:
        raise NotImplementedError
