"""One call's analysis, from its pending mark to its stored result.

`analysis_run(call_id)` takes the pending analysis (calls.services.call_analysis_claim: a lease, so two
workers never run it at once and a dead worker's analysis is taken again after CALL_ANALYSIS_LEASE_SECONDS),
reads the agent's plan and the transcript, runs each enabled part with the configured brain and stores
the result with calls.services.call_analysis_save. The statuses:

- `skipped`: nothing to analyse or nothing asked (no caller words, every part off, the agent deleted), or
  every enabled part was skipped by the brain;
- `failed`: a part failed (the reasons in `error`, the parts that did run are kept);
- `completed`: every enabled part ran (a part the brain cannot do, such as the embedded brain's success
  evaluation, is `skipped` in `parts`, its reason in `error`).
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError

from agents.analysis_plan import enabled_parts
from agents.models import Agent
from calls.models import AnalysisStatus
from calls.selectors import AnalysisInput, call_analysis_input
from calls.services import call_analysis_claim, call_analysis_save
from calls.summary import SPEAKERS
from kit.redaction import categories_of, redact_for_agent
from realtime.analysis import embedded_parts
from realtime.analysis.openai_parts import OpenAIAnalyst, PartFailed
from realtime.analysis.selectors import call_happenings

logger = logging.getLogger(__name__)


def lease() -> timedelta:
    return timedelta(seconds=max(1, int(settings.CALL_ANALYSIS_LEASE_SECONDS)))


def analysis_run(*, call_id: Any) -> str:
    """Run and store one call's analysis; returns its status ("" when it was not pending or another
    worker holds it). Failures of a part are part of the result; an unexpected error is stored as
    `failed` (a database error leaves the analysis pending: the sweep tries again after the lease)."""
    if not call_analysis_claim(call_id=call_id, lease=lease()):
        return ""
    found = call_analysis_input(call_id=call_id)
    if found is None:
        return ""
    found = redacted_input(found)
    try:
        analysis = analyze(found)
    except DatabaseError:
        raise
    except Exception as exc:
        logger.exception("the analysis of call %s failed unexpectedly", call_id)
        analysis = {"status": AnalysisStatus.FAILED, "error": f"Unexpected error ({type(exc).__name__})"}
    stored = call_analysis_save(call_id=call_id, analysis=analysis)
    return analysis["status"] if stored else ""


def redacted_input(found: AnalysisInput) -> AnalysisInput:
    """The input as an agent with redactPii lets it be read: every message redacted (kit/redaction.py), so
    that neither the extractor nor a model reads what the call record does not keep (messages stored
    before the setting was turned on, and what is only found as a whole, such as a birth date that the
    extractor would store as a bare date)."""
    redaction = Agent.objects.filter(calls=found.call_id).values("redact_pii", "language").first()
    if not redaction or not categories_of(redaction["redact_pii"]):
        return found
    messages = [(role, redact_for_agent(redaction, content)) for role, content in found.messages]
    return dataclasses.replace(found, messages=messages)


def _redacted(call_id: Any, text: str) -> str:
    """A stored text of the call as its agent's redactPii lets it be read (see redacted_input)."""
    redaction = Agent.objects.filter(calls=call_id).values("redact_pii", "language").first()
    if not redaction or not categories_of(redaction["redact_pii"]):
        return text
    return redact_for_agent(redaction, text)


def _skipped(reason: str) -> dict[str, Any]:
    return {"status": AnalysisStatus.SKIPPED, "parts": {}, "error": reason, "model": None}


def analyze(found: AnalysisInput) -> dict[str, Any]:
    """The analysis of one call (not stored)."""
    if found.plan is None:
        return _skipped("The agent was deleted before the call was analysed.")
    parts = enabled_parts(found.plan)
    if not parts:
        return _skipped("Every part of the agent's analysisPlan is off.")
    if not any(role == "user" and content.strip() for role, content in found.messages):
        return _skipped("The caller said nothing: there is nothing to analyse.")
    if settings.LLM_PROVIDER == "openai":
        return _openai(found, parts)
    return _embedded(found, parts)


def _result(
    statuses: dict[str, str], values: dict[str, Any], reasons: list[str], model: str | None, usage: dict[str, int]
) -> dict[str, Any]:
    if any(status == AnalysisStatus.FAILED for status in statuses.values()):
        overall = AnalysisStatus.FAILED
    elif all(status == AnalysisStatus.SKIPPED for status in statuses.values()):
        overall = AnalysisStatus.SKIPPED
    else:
        overall = AnalysisStatus.COMPLETED
    return {
        "status": overall,
        **values,
        "parts": statuses,
        "model": model,
        "usage": usage,
        "error": "; ".join(reasons) or None,
    }


def _embedded(found: AnalysisInput, parts: list[str]) -> dict[str, Any]:
    statuses: dict[str, str] = {}
    values: dict[str, Any] = {}
    reasons: list[str] = []
    plan = found.plan or {}
    for part in parts:
        if part == "summary":
            tools, ended_reason = call_happenings(call_id=found.call_id)
            tools = [dataclasses.replace(use, response=_redacted(found.call_id, use.response)) for use in tools]
            values["summary"] = embedded_parts.summary(found.messages, tools, ended_reason)
        elif part == "structuredData":
            schema = plan["structuredData"]["schema"]
            values["structuredData"] = embedded_parts.structured_data(schema, found.messages, found.started_at.date())
        else:
            statuses[part] = AnalysisStatus.SKIPPED
            reasons.append(f"{part}: {embedded_parts.NO_EVALUATION}")
            continue
        statuses[part] = AnalysisStatus.COMPLETED
    return _result(statuses, values, reasons, embedded_parts.MODEL, {"inputTokens": 0, "outputTokens": 0})


# The transcript sent to the model, at most (a long call keeps its start and its end).
MAX_TRANSCRIPT_CHARS = 60_000


def transcript_text(messages: list[tuple[str, str]]) -> str:
    text = "\n".join(f"{SPEAKERS[role]}: {content.strip()}" for role, content in messages if role in SPEAKERS)
    if len(text) <= MAX_TRANSCRIPT_CHARS:
        return text
    head = MAX_TRANSCRIPT_CHARS // 3
    tail = MAX_TRANSCRIPT_CHARS - head
    return text[:head] + "\n[... the middle of the call is left out ...]\n" + text[-tail:]


def _openai(found: AnalysisInput, parts: list[str]) -> dict[str, Any]:
    plan = found.plan or {}
    statuses: dict[str, str] = {}
    values: dict[str, Any] = {}
    reasons: list[str] = []
    try:
        analyst = OpenAIAnalyst(transcript=transcript_text(found.messages), language=found.language)
    except PartFailed as exc:
        for part in parts:
            statuses[part] = AnalysisStatus.FAILED
        return _result(statuses, {}, [f"{', '.join(parts)}: {exc}"], settings.LLM_MODEL or None, _no_usage())
    try:
        for part in parts:
            settings_of = plan[part]
            try:
                if part == "summary":
                    values[part] = analyst.summary(settings_of.get("prompt"))
                elif part == "structuredData":
                    values[part] = analyst.structured_data(settings_of["schema"], settings_of.get("prompt"))
                else:
                    values[part] = analyst.success_evaluation(settings_of["rubric"], settings_of["scale"])
            except PartFailed as exc:
                statuses[part] = AnalysisStatus.FAILED
                reasons.append(f"{part}: {exc}")
                continue
            statuses[part] = AnalysisStatus.COMPLETED
    finally:
        analyst.close()
    usage = {"inputTokens": analyst.input_tokens, "outputTokens": analyst.output_tokens}
    return _result(statuses, values, reasons, analyst.answered_model, usage)


def _no_usage() -> dict[str, int]:
    return {"inputTokens": 0, "outputTokens": 0}
