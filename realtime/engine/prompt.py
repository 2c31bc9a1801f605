"""The dynamic prompt: a webhook agent with promptType `dynamic` asks its serverUrl for its prompt at
the start of every conversation.

Request: POST to serverUrl, signed and with serverHeaders exactly like tool calls (one sending
function, realtime.engine.tools.delivery.post_event):

    {"message": {"type": "agent:assistant-request",
                 "call": {"id": <call uuid>, "agentId": <agent uuid>, "channel": "web" | "phone",
                          "from": <caller number or null>, "to": <called number or null>,
                          "variables": {<the call's per-call variables: name -> string>}}}}

The reply's identity, instructions and greeting may hold {{name}} placeholders: the session shell fills
them like the saved prompt's (docs/guides/variables.md).

Expected reply: a JSON object {"identity"?: string | null, "instructions": string, "greeting"?:
string | null}; other keys are ignored, blank identity and greeting count as absent. Instructions
must be a non-blank string. A timeout (ASSISTANT_REQUEST_TIMEOUT_SECONDS), an error status, a body
that is not JSON, another shape or a refused destination raise ProviderError with a plain-words
reason; the session shell decides what happens next.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kit.providers import ProviderError
from realtime.engine.tools.delivery import ServerEndpoint, is_empty, parse_json, post_event

ASSISTANT_REQUEST_TIMEOUT_SECONDS = 3.0
WHO = "serverUrl"


@dataclass(frozen=True)
class AssistantPrompt:
    identity: str | None
    instructions: str
    greeting: str | None


def _optional_text(reply: dict[str, Any], key: str) -> str | None:
    value = reply.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ProviderError(f"Assistant request failed: '{key}' in the reply must be a string", permanent=True)
    return value if value.strip() else None


def _prompt(reply: Any) -> AssistantPrompt:
    if not isinstance(reply, dict):
        raise ProviderError("Assistant request failed: the reply must be a JSON object", permanent=True)
    instructions = reply.get("instructions")
    if not isinstance(instructions, str) or not instructions.strip():
        raise ProviderError(
            "Assistant request failed: the reply has no 'instructions' (a non-empty string)", permanent=True
        )
    return AssistantPrompt(
        identity=_optional_text(reply, "identity"),
        instructions=instructions,
        greeting=_optional_text(reply, "greeting"),
    )


async def fetch_assistant_prompt(
    *,
    agent: Any,
    call_id: str,
    channel: str,
    from_number: str | None,
    to_number: str | None,
    variables: dict[str, str] | None = None,
    timeout_s: float = ASSISTANT_REQUEST_TIMEOUT_SECONDS,
) -> AssistantPrompt:
    endpoint = ServerEndpoint.of(agent)
    if endpoint is None:
        raise ProviderError("Assistant request failed: the agent has no serverUrl", permanent=True)
    payload = {
        "message": {
            "type": "agent:assistant-request",
            "call": {
                "id": call_id,
                "agentId": str(agent.pk),
                "channel": channel,
                "from": from_number,
                "to": to_number,
                "variables": dict(variables or {}),
            },
        }
    }
    try:
        response = await post_event(endpoint, payload, timeout_s=timeout_s, who=WHO)
        if is_empty(response):
            raise ProviderError(f"{WHO} answered with an empty body", permanent=True)
        reply = parse_json(response, WHO)
    except ProviderError as exc:
        raise type(exc)(f"Assistant request failed: {exc.message}", permanent=exc.permanent) from None
    return _prompt(reply)
