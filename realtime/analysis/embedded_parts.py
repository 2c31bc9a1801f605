"""The analysis parts with the embedded brain (offline: no model, no network).

- summary: what the caller wanted and what happened (tool outcomes, a transfer, how the call ended), not
  the transcript (realtime/analysis/summary.py); the plan's prompt is not used.
- structuredData: the embedded argument extractor (realtime/engine/brain/embedded/arguments.py) reads every caller
  turn against the plan's schema, as it reads a tool's arguments: e-mail addresses, dates, times, phone
  and other digit strings, listed (enum) values, numbers, yes/no, names, places and, for a property named
  like a message (notes, request, issue...), the words of the turn. A value said again in a later turn
  replaces the earlier one. Only what the caller said is filled: a property the caller did not say is left
  out (even a required one), and the agent's words are not read.
- successEvaluation needs a language model: with the embedded brain it is `skipped`, with the reason.
"""

from __future__ import annotations

from datetime import date
from typing import Any

import jsonschema

from kit.patterns import linear_validator
from realtime.analysis.summary import ToolUse, summarize_call
from realtime.engine.brain.embedded.arguments import extract, parameters_of
from realtime.engine.brain.embedded.spoken import Utterance

MODEL = "embedded"
NO_EVALUATION = "the embedded brain does not evaluate calls; successEvaluation needs LLM_PROVIDER=openai"


def summary(messages: list[tuple[str, str]], tools: list[ToolUse], ended_reason: str | None) -> str:
    return summarize_call(messages, tools, ended_reason=ended_reason)


def structured_data(schema: dict[str, Any], messages: list[tuple[str, str]], today: date) -> dict[str, Any]:
    parameters = parameters_of(schema)
    found: dict[str, Any] = {}
    for role, content in messages:
        if role != "user" or not content.strip():
            continue
        found.update(extract(parameters, Utterance(content), today, fill_text=True))
    # Each value was checked against its property by the extractor; what the whole schema refuses
    # (a rule across properties) is dropped property by property.
    validator = linear_validator(jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator))(
        schema
    )
    for error in list(validator.iter_errors(found)):
        if error.path and error.path[0] in found:
            found.pop(error.path[0], None)
    return found
