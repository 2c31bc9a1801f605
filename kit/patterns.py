"""Regular expressions that customers write (an agent test's `replyMatches`, the `pattern` of a tool's JSON
Schema), matched in linear time: Python's `re` backtracks, so `(a+)+$` against 28 `a`s holds the thread
(and every other request of the process, through the GIL) for seconds, doubling with each character.
Every such pattern goes through this module, which matches it with Google's RE2 (the `google-re2`
binding): time linear in the text, memory bounded by the compiled program.

RE2 has no backreferences (`\\1`) and no lookaround (`(?=`, `(?!`, `(?<=`, `(?<!`): `pattern_problem`
says so, and a pattern it names is refused where it is saved. The text matched is cut to
MAX_MATCHED_CHARS characters (what a match sees past it is not looked at)."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

import re2

MAX_MATCHED_CHARS = 100_000  # the text one match looks at (an agent test's replies, a tool argument)
_MAX_PROGRAM_BYTES = 8 << 20  # RE2's own default: a pattern that would compile bigger is refused

# How RE2 names what it lacks, in its error messages.
_BACKREFERENCE = re.compile(r"invalid escape sequence: \\[1-9]|invalid perl operator: \(\?P$")
_LOOKAROUND = re.compile(r"invalid perl operator: \(\?<?[=!]")


class PatternError(ValueError):
    """The pattern cannot be matched in linear time (or is not a regular expression); the message says why."""


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is the caller's answer, not a line on stderr
    options.max_mem = _MAX_PROGRAM_BYTES
    return options


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str) -> Any:
    try:
        re.compile(pattern)  # Python's message for plain syntax errors (compiling does not backtrack)
    except (re.error, RecursionError, OverflowError) as error:
        raise PatternError(f"Not a valid regular expression: {error}.") from None
    try:
        return re2.compile(pattern, _options())
    except re2.error as error:
        reason = error.args[0].decode(errors="replace") if error.args and isinstance(error.args[0], bytes) else ""
    if _BACKREFERENCE.search(reason):
        raise PatternError(
            "Backreferences (\\1, (?P=name)) are not supported: patterns are matched in linear time (RE2)."
        )
    if _LOOKAROUND.search(reason):
        raise PatternError(
            "Lookahead and lookbehind ((?=, (?!, (?<=, (?<!) are not supported: patterns are matched in "
            "linear time (RE2)."
        )
    raise PatternError(f"Not supported by the linear-time matcher (RE2): {reason or 'cannot compile'}.")


def pattern_problem(pattern: str) -> str | None:
    """Why `pattern` cannot be used (not a regular expression, or not one RE2 runs), or None."""
    try:
        _compiled(pattern)
    except PatternError as error:
        return str(error)
    return None


def pattern_search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches somewhere in `text` (its first MAX_MATCHED_CHARS characters); PatternError
    when the pattern cannot be used."""
    return _compiled(pattern).search(text[:MAX_MATCHED_CHARS]) is not None


def schema_patterns(schema: Any) -> Iterator[tuple[str, str]]:
    """Every regular expression of a JSON Schema as (where, pattern): `pattern` values and the keys of
    `patternProperties`, at any depth."""
    stack: list[tuple[str, Any]] = [("", schema)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                yield f"{where}/pattern", node["pattern"]
            if isinstance(node.get("patternProperties"), dict):
                for key in node["patternProperties"]:
                    yield f"{where}/patternProperties", str(key)
            stack.extend((f"{where}/{key}", child) for key, child in node.items() if isinstance(child, dict | list))
        elif isinstance(node, list):
            stack.extend((f"{where}/{index}", child) for index, child in enumerate(node))


def schema_pattern_problem(schema: Any) -> str | None:
    """Why one of a JSON Schema's regular expressions cannot be used (naming where it is), or None."""
    for where, pattern in schema_patterns(schema):
        problem = pattern_problem(pattern)
        if problem is not None:
            return f"{problem} (at {where.lstrip('/')})"
    return None


def _search(pattern: str, text: str) -> bool:
    try:
        return pattern_search(pattern, text)
    except PatternError:
        return False  # a schema saved before patterns were checked: its pattern matches nothing


@functools.lru_cache(maxsize=16)
def linear_validator(cls: Any) -> Any:
    """The jsonschema validator class `cls` with `pattern`, `patternProperties` and `additionalProperties`
    matched through this module (jsonschema's own use Python's `re`)."""
    from jsonschema import ValidationError, validators

    def pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Iterator[Any]:
        if validator.is_type(instance, "string") and not _search(patrn, instance):
            yield ValidationError(f"{instance!r} does not match {patrn!r}")

    def pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        for patrn, subschema in patterns.items():
            for key, value in instance.items():
                if _search(patrn, key):
                    yield from validator.descend(value, subschema, path=key, schema_path=patrn)

    def additional_properties(validator: Any, additional: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        properties = schema.get("properties", {})
        patterns = list(schema.get("patternProperties", {}))
        extras = [
            key for key in instance if key not in properties and not any(_search(patrn, key) for patrn in patterns)
        ]
        if validator.is_type(additional, "object"):
            for extra in extras:
                yield from validator.descend(instance[extra], additional, path=extra)
        elif not additional and extras:
            listed = ", ".join(repr(extra) for extra in sorted(extras))
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({listed} {verb} unexpected)")

    return validators.extend(
        cls,
        {"pattern": pattern, "patternProperties": pattern_properties, "additionalProperties": additional_properties},
    )
