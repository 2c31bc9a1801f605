"""Tools of connected MCP servers, called through the conversation's session with that server
(agents.tools.mcp.McpSession: one per server per conversation, opened on first use).

Result: the tool's structuredContent when it is an object, else {"text": <its text blocks joined by
newlines, cut to MAX_TEXT_CHARS characters>}. A tool error result (isError) is a failure whose
message for the brain is the tool's own text; the agent log only says that the tool reported an error.
"""

from __future__ import annotations

from typing import Any

from agents.tools.mcp import McpFailure, McpSession, McpTimeout
from realtime.engine.tools.base import CallContext, ToolError, ToolKind, ToolTimeout, seconds_words

MAX_TEXT_CHARS = 4000
MAX_ERROR_CHARS = 1000


class McpTool(ToolKind):
    kind = "mcp"

    def __init__(self, *, session: McpSession, tool_name: str, timeout_s: float) -> None:
        self.session = session
        self.tool_name = tool_name  # the server's name for it (the brain may know it by a cleaned name)
        self.timeout_s = timeout_s

    async def invoke(self, arguments: dict[str, Any], *, tool_call_id: str, context: CallContext) -> dict[str, Any]:
        try:
            reply = await self.session.call_tool(self.tool_name, arguments, timeout_s=self.timeout_s)
        except McpTimeout:
            raise ToolTimeout(f"The tool did not answer within {seconds_words(self.timeout_s)}") from None
        except McpFailure as failure:
            raise ToolError(f"The tool server failed: {failure.message}") from None
        text = "\n".join(reply["content"])
        if reply["isError"]:
            raise ToolError(
                text[:MAX_ERROR_CHARS] or "The tool reported an error",
                permanent=True,
                log_reason="the tool reported an error",
            )
        structured = reply["structuredContent"]
        if isinstance(structured, dict):
            return structured
        return {"text": text[:MAX_TEXT_CHARS]}
