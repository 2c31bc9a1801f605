"""The analysis parts with LLM_PROVIDER=openai: one Chat Completions request per part (the same server,
model and key as the openai brain: LLM_BASE_URL, LLM_API_KEY, LLM_MODEL; each request may take
CALL_ANALYSIS_TIMEOUT_SECONDS, default 60, as the whole transcript is read), asking for
a JSON object (`response_format` json_object, which every OpenAI-compatible server knows) and checking the
answer with jsonschema: against the plan's schema for structuredData, against a fixed shape for the
summary and the success evaluation. An answer that is not JSON or not valid gets one repair request (the
answer and the validation error are sent back); when the repaired answer is still invalid the part fails
with the reason. A transport error (timeout, refused connection, HTTP error) fails the part at once.

The request goes straight to LLM_BASE_URL, not through kit.egress, like the brain's: the address is the
operator's deployment setting. Error texts never contain the API key.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import jsonschema
from django.conf import settings
from jsonschema.exceptions import best_match

from kit.patterns import linear_validator
from realtime.engine.brain.openai_chat import PLACEHOLDER_API_KEY, _detail, _redact, configuration_problems
from realtime.engine.instructions import language_name

logger = logging.getLogger(__name__)

SUMMARY_SHAPE: dict[str, Any] = {
    "type": "object",
    "properties": {"summary": {"type": "string", "minLength": 1}},
    "required": ["summary"],
}
PASS_FAIL_SHAPE: dict[str, Any] = {
    "type": "object",
    "properties": {"result": {"type": "boolean"}, "reasoning": {"type": "string"}},
    "required": ["result", "reasoning"],
}
SCORE_SHAPE: dict[str, Any] = {
    "type": "object",
    "properties": {"result": {"type": "integer", "minimum": 1, "maximum": 10}, "reasoning": {"type": "string"}},
    "required": ["result", "reasoning"],
}
MAX_ERROR_CHARS = 300


class PartFailed(Exception):
    """The part could not be worked out; the message says why (shown in `analysis.error`)."""


@dataclass
class OpenAIAnalyst:
    """The parts of one call's analysis, sharing one HTTP client; `usage` sums every request's tokens."""

    transcript: str
    language: str
    input_tokens: int = 0
    output_tokens: int = 0
    model: str = ""
    _client: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        problems = configuration_problems()
        if problems:
            raise PartFailed("; ".join(problems))
        self.model = settings.LLM_MODEL.strip()
        self._api_key = settings.LLM_API_KEY
        base_url = settings.LLM_BASE_URL.rstrip("/")
        parts = urlsplit(base_url)
        self._server = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
        import openai  # imported on use: realtime/engine/brain/openai_chat.py says why

        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=self._api_key or PLACEHOLDER_API_KEY,
            timeout=float(settings.CALL_ANALYSIS_TIMEOUT_SECONDS),
            max_retries=0,  # one request per part (and one repair): what the usage and the docs say
        )
        self._answered_model = ""

    def close(self) -> None:
        self._client.close()

    @property
    def answered_model(self) -> str:
        return self._answered_model or self.model

    # --- the parts -----------------------------------------------------------------------------------
    def summary(self, prompt: str | None) -> str:
        system = (
            "You summarize phone calls between a caller and an AI voice agent for the agent's owner. Write two "
            f"to four plain sentences in {language_name(self.language)}: why the caller called, what was done "
            'or agreed, and what is left to do. Answer with a JSON object: {"summary": "..."}.'
        )
        answer = self._ask(system, prompt, SUMMARY_SHAPE, "the summary shape")
        return str(answer["summary"]).strip()

    def structured_data(self, schema: dict[str, Any], prompt: str | None) -> dict[str, Any]:
        system = (
            "You extract data from the transcript of a phone call between a caller and an AI voice agent. "
            "Answer with one JSON object that is valid against this JSON Schema (leave out a property the "
            "call does not tell, unless the schema requires it):\n" + json.dumps(schema, ensure_ascii=False)
        )
        return self._ask(system, prompt, schema, "the plan's schema")

    def success_evaluation(self, rubric: str, scale: str) -> dict[str, Any]:
        if scale == "1-10":
            shape, result = SCORE_SHAPE, "an integer from 1 (failed) to 10 (fully met)"
        else:
            shape, result = PASS_FAIL_SHAPE, "true when the call met the rubric, false otherwise"
        system = (
            "You evaluate the transcript of a phone call between a caller and an AI voice agent against the "
            f'rubric below. Answer with a JSON object: {{"result": {result}, "reasoning": "one or two '
            f'sentences in {language_name(self.language)}"}}.\n\nRubric:\n{rubric}'
        )
        answer = self._ask(system, None, shape, "the evaluation shape")
        return {"result": answer["result"], "reasoning": str(answer["reasoning"]).strip(), "scale": scale}

    # --- one request, and its repair -------------------------------------------------------------------
    def _ask(self, system: str, prompt: str | None, schema: dict[str, Any], what: str) -> dict[str, Any]:
        if prompt:
            system += f"\n\nInstructions from the agent's owner:\n{prompt}"
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": f"The transcript:\n\n{self.transcript}"},
        ]
        validator = linear_validator(
            jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        )(schema)
        text = self._complete(messages)
        problem, value = _check(text, validator)
        if problem is None:
            return value
        messages += [
            {"role": "assistant", "content": text},
            {
                "role": "user",
                "content": f"That answer is not valid: {problem}. Answer again with only the corrected JSON object.",
            },
        ]
        text = self._complete(messages)
        problem, value = _check(text, validator)
        if problem is None:
            return value
        raise PartFailed(f"the model's answer is not valid against {what} after one repair: {problem}")

    def _complete(self, messages: list[dict[str, Any]]) -> str:
        request: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "response_format": {"type": "json_object"},
        }
        if settings.LLM_TEMPERATURE is not None:
            request["temperature"] = settings.LLM_TEMPERATURE
        import openai  # imported on use: realtime/engine/brain/openai_chat.py says why

        try:
            response = self._client.chat.completions.create(**request)
        except openai.APITimeoutError:
            seconds = settings.CALL_ANALYSIS_TIMEOUT_SECONDS
            raise PartFailed(f"the language model did not answer within {seconds:g} s") from None
        except openai.APIConnectionError:
            raise PartFailed(f"cannot reach the language model server ({self._server})") from None
        except openai.APIStatusError as exc:
            detail = _detail(exc.body, self._api_key)
            raise PartFailed(
                f"the language model server answered HTTP {exc.status_code}" + (f": {detail}" if detail else "")
            ) from None
        except openai.APIError as exc:
            detail = _redact(exc.message, self._api_key)
            raise PartFailed(f"the language model server reported an error: {detail}") from None
        usage = getattr(response, "usage", None)
        if usage is not None:
            self.input_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
            self.output_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
        self._answered_model = getattr(response, "model", "") or self._answered_model
        choices = getattr(response, "choices", None) or []
        content = choices[0].message.content if choices else None
        return content or ""


def _check(text: str, validator: Any) -> tuple[str | None, Any]:
    """(None, the value) when `text` is a JSON object valid against the schema, else (why, None)."""
    try:
        value = json.loads(text)
    except ValueError:
        return "it is not JSON", None
    if not isinstance(value, dict):
        return "it is not a JSON object", None
    error = best_match(validator.iter_errors(value))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path)
        message = error.message if len(error.message) <= MAX_ERROR_CHARS else error.message[:MAX_ERROR_CHARS] + "…"
        return message + (f" (at {where})" if where else ""), None
    return None, value
