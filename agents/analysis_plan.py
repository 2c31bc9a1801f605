"""An agent's `analysisPlan`: what is worked out of each of its calls once the call has ended.

Three parts, each run by the configured brain after the call (realtime/analysis/):
- `summary` {enabled, prompt?}: a short summary of the call (on by default);
- `structuredData` {enabled, schema, prompt?}: the fields to extract, a JSON Schema of type object whose
  every property has a description (it tells the model, or the embedded extractor, what to look for);
- `successEvaluation` {enabled, rubric, scale}: whether the call met the rubric, `pass-fail` or `1-10`.

A part left out of the plan takes its default (summary on, the others off); a part that is sent without
`enabled` is on. The plan is stored normalized (every part with every key), so readers need no defaults.
"""

from __future__ import annotations

from typing import Any

from agents.models import DEFAULT_ANALYSIS_PLAN, default_analysis_plan
from agents.tools.serializers import schema_problem

SCALES = ("pass-fail", "1-10")
MAX_PROMPT_CHARS = 4000
MAX_PROPERTIES = 100

DEFAULT_PLAN = DEFAULT_ANALYSIS_PLAN
PART_KEYS = {
    "summary": ("enabled", "prompt"),
    "structuredData": ("enabled", "schema", "prompt"),
    "successEvaluation": ("enabled", "rubric", "scale"),
}


class PlanError(ValueError):
    """An invalid plan; the message names the key (`structuredData.schema: ...`)."""


def default_plan() -> dict[str, Any]:
    """A fresh copy of the default plan (the model field's default)."""
    return default_analysis_plan()


def normalize_plan(value: Any) -> dict[str, Any]:
    """The plan as stored, from a request body's `analysisPlan`; PlanError when it is not valid."""
    if not isinstance(value, dict):
        raise PlanError("Must be a JSON object with summary, structuredData and successEvaluation.")
    problem = _bad_character(value)
    if problem:
        raise PlanError(problem)
    unknown = sorted(set(value) - set(PART_KEYS))
    if unknown:
        raise PlanError(f"Unknown key {unknown[0]!r}; the parts are summary, structuredData and successEvaluation.")
    plan = default_plan()
    for part, keys in PART_KEYS.items():
        if part not in value:
            continue
        given = value[part]
        if not isinstance(given, dict):
            raise PlanError(f"{part}: must be a JSON object.")
        extra = sorted(set(given) - set(keys))
        if extra:
            raise PlanError(f"{part}: unknown key {extra[0]!r} (allowed: {', '.join(keys)}).")
        enabled = given.get("enabled", True)
        if not isinstance(enabled, bool):
            raise PlanError(f"{part}.enabled: must be true or false.")
        plan[part]["enabled"] = enabled
        for key in keys:
            if key == "enabled" or key not in given:
                continue
            plan[part][key] = _value(part, key, given[key])
    structured = plan["structuredData"]
    if structured["enabled"] and structured["schema"] is None:
        raise PlanError("structuredData.schema: required when structuredData is enabled.")
    evaluation = plan["successEvaluation"]
    if evaluation["enabled"] and not evaluation["rubric"]:
        raise PlanError("successEvaluation.rubric: required when successEvaluation is enabled.")
    return plan


def _bad_character(value: Any, depth: int = 0) -> str | None:
    """Lone surrogates, which no database column can keep (U+0000 is each field's own rule)."""
    if depth > 64:
        return "Nested too deeply."
    if isinstance(value, str):
        surrogate = next((c for c in value if 0xD800 <= ord(c) <= 0xDFFF), None)
        if surrogate is not None:
            return f"Surrogate characters are not allowed: U+{ord(surrogate):04X}."
        return None
    if isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    elif isinstance(value, list):
        items = value
    else:
        return None
    return next((found for item in items if (found := _bad_character(item, depth + 1))), None)


def _value(part: str, key: str, value: Any) -> Any:
    where = f"{part}.{key}"
    if key in ("prompt", "rubric"):
        if value is None:
            return None
        if not isinstance(value, str):
            raise PlanError(f"{where}: must be a string.")
        if "\x00" in value:
            raise PlanError(f"{where}: may not contain NUL characters.")
        if len(value) > MAX_PROMPT_CHARS:
            raise PlanError(f"{where}: at most {MAX_PROMPT_CHARS} characters.")
        return value if value.strip() else None  # kept as written; blank is none
    if key == "scale":
        if value not in SCALES:
            raise PlanError(f"{where}: must be one of {', '.join(SCALES)}.")
        return value
    if key == "schema":
        if value is None:
            return None
        return _schema(where, value)
    raise AssertionError(key)


def _schema(where: str, schema: Any) -> dict[str, Any]:
    if not isinstance(schema, dict):
        raise PlanError(f"{where}: must be a JSON Schema object.")
    problem = schema_problem(schema, arguments=False)
    if problem:
        raise PlanError(f"{where}: {problem}")
    if schema.get("type") != "object":
        raise PlanError(f'{where}: the extracted data is an object: the schema needs "type": "object".')
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        raise PlanError(f"{where}: needs at least one property under properties.")
    if len(properties) > MAX_PROPERTIES:
        raise PlanError(f"{where}: at most {MAX_PROPERTIES} properties.")
    for name, prop in properties.items():
        description = prop.get("description") if isinstance(prop, dict) else None
        if not isinstance(description, str) or not description.strip():
            raise PlanError(f"{where}: property {name!r} needs a description (it says what to extract).")
    return schema


def enabled_parts(plan: dict[str, Any] | None) -> list[str]:
    """The parts of a stored plan that are on, in their fixed order."""
    plan = plan or DEFAULT_PLAN
    return [part for part in PART_KEYS if (plan.get(part) or {}).get("enabled")]
