"""Text that can be stored: the one rule for strings that come from outside (request bodies, socket
messages, uploaded CSV cells). A lone UTF-16 surrogate (`"\\ud800"`, which JSON's escapes allow) cannot be
encoded as UTF-8, and NUL (`"\\u0000"`) is refused by PostgreSQL's text columns: either one would fail the
write after the side effects it follows, and poison every later read of the row. They are refused at the
edge, naming the field; `storable` mends text that is already inside (old rows, a provider's reply)."""

from __future__ import annotations

import re
from typing import Any

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def text_problem(value: str) -> str | None:
    """Why `value` cannot be stored as text, or None when it can."""
    found = _UNSTORABLE.search(value)
    if found is None:
        return None
    if found.group() == "\x00":
        return "Must not contain the NUL character (\\u0000)."
    return "Must not contain a lone UTF-16 surrogate (\\ud800-\\udfff): it is not a Unicode character."


# The integers JSON written by the API can carry (orjson's: 64-bit, signed or not).
INTEGER_RANGE = (-(2**63), 2**64 - 1)
INTEGER_PROBLEM = f"Integers must lie between {INTEGER_RANGE[0]} and {INTEGER_RANGE[1]}."


def unstorable_field(value: Any, path: str = "") -> tuple[str, str] | None:
    """The first string in a decoded JSON value (keys included) that cannot be stored, or integer that
    could not be written back (beyond 64 bits), as (field path, reason): the path names object keys with
    dots and list items by index (`variables.name`, `turns.0.text`; the empty path is the value itself).
    None when every value can be stored."""
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem is not None:
                return where, problem
        elif isinstance(item, int) and not INTEGER_RANGE[0] <= item <= INTEGER_RANGE[1]:
            return where, INTEGER_PROBLEM
        elif isinstance(item, dict):
            children: list[tuple[str, Any]] = []
            for key, child in item.items():
                name = f"{where}.{key}" if where else str(key)
                if isinstance(key, str) and (problem := text_problem(key)) is not None:
                    return (where or "body"), f"A key {problem[0].lower()}{problem[1:]}"
                children.append((name, child))
            stack.extend(reversed(children))
        elif isinstance(item, list):
            stack.extend(reversed([(f"{where}.{i}" if where else str(i), child) for i, child in enumerate(item)]))
    return None


def storable(value: str) -> str:
    """`value` with what cannot be stored mended: a lone surrogate becomes U+FFFD, NUL is dropped."""
    return _UNSTORABLE.sub(lambda found: "" if found.group() == "\x00" else "\ufffd", value)


def storable_value(value: Any) -> Any:
    """`value` (text, or a decoded JSON value: strings in lists and dicts, keys included) mended as `storable`
    mends text; anything else as it is."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, list | tuple):
        return [storable_value(item) for item in value]
    if isinstance(value, dict):
        return {storable_value(key): storable_value(item) for key, item in value.items()}
    return value
