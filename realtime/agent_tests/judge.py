"""The model's parts of a test run, with LLM_PROVIDER=openai: the judge of a test's `criteria`, and the
simulated caller of a `conversation` test. Both ask the configured OpenAI-compatible server (LLM_BASE_URL,
LLM_API_KEY, LLM_MODEL: the same as the brain's) for a JSON object (`response_format` json_object) with a
short fixed prompt, through the official `openai` package, like the post-call analysis
(realtime/analysis/openai_parts.py). With the embedded brain there is no model: criteria are `skipped`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django.conf import settings

from realtime.engine.brain.openai_chat import PLACEHOLDER_API_KEY, _redact, configuration_problems

JUDGE_PROMPT = (
    "You judge one conversation between a caller and an AI voice agent against one criterion. Read the "
    "transcript (the tool calls the agent made are listed in it) and decide whether the agent met the "
    'criterion. Answer with only a JSON object: {"verdict": "pass" or "fail", "reason": "one short sentence"}.'
)
CALLER_PROMPT = (
    "You play a caller phoning an AI voice agent, to test it. Stay in your role and say only your next line "
    "to the agent: one or two short spoken sentences. When your goal is reached, or the agent has clearly "
    'ended or handed over the call, set done to true. Answer with only a JSON object: {"line": "...", '
    '"done": true or false}.\n\nWho you are: {persona}\nYour goal: {goal}'
)
MAX_REASON_CHARS = 300


class ModelFailed(Exception):
    """The model could not be asked, or its answer is not usable; the message says why."""


def model_configured() -> bool:
    return settings.LLM_PROVIDER == "openai"


def transcript_text(transcript: Sequence[dict[str, Any]], tool_calls: Sequence[dict[str, Any]] = ()) -> str:
    lines = [f"{'Caller' if turn['role'] == 'user' else 'Agent'}: {turn['text']}" for turn in transcript]
    for call in tool_calls:
        lines.append(f"[tool call] {call['name']}({json.dumps(call.get('arguments') or {}, ensure_ascii=False)})")
    return "\n".join(lines) or "(nothing was said)"


def _ask(system: str, user: str) -> dict[str, Any]:
    problems = configuration_problems()
    if problems:
        raise ModelFailed("; ".join(problems))
    api_key = settings.LLM_API_KEY
    import openai  # imported on use: realtime/engine/brain/openai_chat.py says why

    client = openai.OpenAI(
        base_url=settings.LLM_BASE_URL.rstrip("/"),
        api_key=api_key or PLACEHOLDER_API_KEY,
        timeout=float(settings.CALL_ANALYSIS_TIMEOUT_SECONDS),
        max_retries=0,
    )
    try:
        completion = client.chat.completions.create(
            model=settings.LLM_MODEL.strip(),
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
            response_format={"type": "json_object"},
        )
    except openai.APIError as exc:
        raise ModelFailed(_redact(f"the model request failed: {type(exc).__name__}: {exc}", api_key)[:300]) from exc
    finally:
        client.close()
    text = (completion.choices[0].message.content or "").strip() if completion.choices else ""
    try:
        answer = json.loads(text)
    except ValueError as exc:
        raise ModelFailed("the model's answer is not JSON") from exc
    if not isinstance(answer, dict):
        raise ModelFailed("the model's answer is not a JSON object")
    return answer


def judge(criterion: str, transcript: str) -> tuple[str, str]:
    """("pass" | "fail", the model's reason) for one criterion."""
    answer = _ask(JUDGE_PROMPT, f"Criterion: {criterion}\n\nTranscript:\n{transcript}")
    verdict = str(answer.get("verdict", "")).strip().lower()
    if verdict not in ("pass", "fail"):
        raise ModelFailed(f"the judge answered no verdict (pass or fail) for criterion {criterion!r}")
    return verdict, str(answer.get("reason") or "").strip()[:MAX_REASON_CHARS]


def caller_line(*, persona: str, goal: str, transcript: str) -> str | None:
    """The simulated caller's next line, or None when it is done."""
    system = CALLER_PROMPT.replace("{persona}", persona or "a caller").replace("{goal}", goal or "ask a question")
    answer = _ask(system, f"The conversation so far:\n{transcript}\n\nYour next line?")
    line = str(answer.get("line") or "").strip()
    if answer.get("done") is True or not line:
        return None
    return line[:2000]
