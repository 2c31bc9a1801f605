"""Per-call variables and metadata (docs/guides/variables.md).

`variables`: an object of string values (at most MAX_VARIABLES keys of at most MAX_NAME_LENGTH
characters, each value at most MAX_VALUE_LENGTH characters); `{{name}}` placeholders in the agent's
instructions, static greeting and dynamic-prompt reply are filled from them and from the built-ins
(`call.from`, `call.to`, `now`, `agent.name`). `metadata`: free JSON of at most MAX_METADATA_BYTES,
stored and echoed, never shown to the model.

The same rules hold wherever a client gives them: realtime sessions, outbound calls, batch recipients.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kit.errors import ApiError

MAX_VARIABLES = 50
MAX_NAME_LENGTH = 64
MAX_VALUE_LENGTH = 1000
MAX_METADATA_BYTES = 16 * 1024
# A variable's name: letters, digits, underscores and dots (built-ins are dotted), starting with a letter.
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
# A placeholder: {{ name }} (spaces inside the braces allowed).
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}")


def variables_clean(value: Any, *, field: str = "variables") -> dict[str, str]:
    """The variables given, checked: a 400 (ApiError) naming what is wrong, else a copy."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ApiError.field(field, "Must be an object of string values.")
    if len(value) > MAX_VARIABLES:
        raise ApiError.field(field, f"At most {MAX_VARIABLES} variables are allowed, not {len(value)}.")
    cleaned: dict[str, str] = {}
    for name, text in value.items():
        if not isinstance(name, str) or not NAME.fullmatch(name) or len(name) > MAX_NAME_LENGTH:
            raise ApiError.field(
                field,
                f"{str(name)[:80]!r} is not a valid variable name (a letter or underscore, then letters, digits, "
                f"underscores or dots; at most {MAX_NAME_LENGTH} characters).",
            )
        if not isinstance(text, str):
            raise ApiError.field(field, f"The value of {name!r} must be a string.")
        if len(text) > MAX_VALUE_LENGTH:
            raise ApiError.field(field, f"The value of {name!r} is longer than {MAX_VALUE_LENGTH} characters.")
        cleaned[name] = text
    return cleaned


def metadata_clean(value: Any, *, field: str = "metadata") -> Any:
    """The metadata given (any JSON value; None when absent): a 400 when larger than 16 KB as JSON."""
    if value is None:
        return None
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    if size > MAX_METADATA_BYTES:
        raise ApiError.field(field, f"Must be at most {MAX_METADATA_BYTES} bytes as JSON, not {size}.")
    return value


def placeholders_fill(text: str, values: dict[str, str]) -> tuple[str, list[str]]:
    """`text` with each {{name}} replaced by its value (an unknown name by nothing), and the unknown
    names in order of first appearance."""
    unknown: list[str] = []

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in values:
            return values[name]
        if name not in unknown:
            unknown.append(name)
        return ""

    return PLACEHOLDER.sub(replace, text), unknown
