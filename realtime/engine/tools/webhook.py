"""Custom tools of webhook agents: one signed `agent:tool-call` event POSTed to the agent's serverUrl.

The reply is the result: a JSON object as it is, another JSON value as {"result": value}, an empty
2xx body as {}. Anything else (an error status, a body that is not JSON) is a failure.
"""

from __future__ import annotations

from typing import Any

from realtime.engine.tools.base import CallContext, ToolKind, as_object
from realtime.engine.tools.delivery import ServerEndpoint, is_empty, parse_json, post_event

WHO = "The tool"


class WebhookTool(ToolKind):
    kind = "webhook"

    def __init__(self, *, name: str, endpoint: ServerEndpoint, timeout_s: float) -> None:
        self.name = name
        self.endpoint = endpoint
        self.timeout_s = timeout_s

    async def invoke(self, arguments: dict[str, Any], *, tool_call_id: str, context: CallContext) -> dict[str, Any]:
        payload = {
            "message": {
                "type": "agent:tool-call",
                "call": {"id": context.call_id, "agentId": context.agent_id},
                "toolCall": {"id": tool_call_id, "name": self.name, "arguments": arguments},
            }
        }
        response = await post_event(self.endpoint, payload, timeout_s=self.timeout_s, who=WHO)
        if is_empty(response):
            return {}
        return as_object(parse_json(response, WHO))
