"""Reads of the post-call analysis beyond its input (calls.selectors.call_analysis_input): what happened
in the call, for the summary without a language model (realtime/analysis/summary.py)."""

from __future__ import annotations

from typing import Any

from calls.models import Call, ToolInvocation
from realtime.analysis.summary import ToolUse


def call_happenings(*, call_id: Any) -> tuple[list[ToolUse], str | None]:
    """The call's tool calls in order (name, status, result) and why it ended."""
    tools = [
        ToolUse(name=name, status=status, response=response)
        for name, status, response in ToolInvocation.objects.filter(call_id=call_id)
        .order_by("created_at", "sequence")
        .values_list("tool_name", "status", "response")
    ]
    ended_reason = Call.objects.filter(pk=call_id).values_list("ended_reason", flat=True).first()
    return tools, ended_reason
