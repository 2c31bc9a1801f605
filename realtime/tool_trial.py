"""A custom tool's test call from the dashboard: the tool runs once through the conversation's own tool
dispatcher (the same checks, delivery, egress guard, time limit and onError as in a call), and every
request it sent is kept with its response for the page (realtime/admin.py, AgentToolTestAdmin). It lives
in realtime, beside the dispatcher it drives: the agents app sits a floor below realtime."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import async_to_sync

from agents.models import Agent, AgentTool
from realtime.engine.contracts import ToolCall
from realtime.engine.tools.delivery import Exchange, watched_exchanges
from realtime.engine.tools.dispatcher import ToolDispatcher

SHOWN_CHARS = 4000
SHOWN_HEADERS = frozenset({"content-type"})  # other header values may be credentials: names only


@dataclass(frozen=True)
class ShownExchange:
    """One request of a test call as the page shows it (secrets hidden)."""

    method: str
    url: str
    headers: list[tuple[str, str]]
    body: str
    status: int | None
    content_type: str
    reply: str


@dataclass
class ToolTrial:
    offered: bool
    exchanges: list[ShownExchange] = field(default_factory=list)
    status: str | None = None  # success, error or timeout (as in the call's tool invocation log)
    result: str | None = None  # what the model gets, as JSON
    log: list[str] = field(default_factory=list)  # the agent log lines the dispatcher wrote


class _TrialRecorder:
    """The call recorder's part that the tool dispatcher uses, for a test without a call: no call record
    (webhooks get call.id null), no tool invocation stored; the agent log lines are kept for the page."""

    call = None
    channel = "web"  # no phone line: the phone-only tools (send_digits) are not offered

    def __init__(self) -> None:
        self.lines: list[str] = []

    def log(self, severity: str, message: str, **fields: Any) -> None:
        details = ", ".join(f"{name} {value}" for name, value in fields.items())
        self.lines.append(f"{severity}: {message}" + (f" ({details})" if details else ""))

    def tool_invocation(self, **fields: Any) -> None:
        pass


def _readable(data: bytes | str | None) -> str:
    if not data:
        return ""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    try:
        text = json.dumps(json.loads(text), ensure_ascii=False, indent=2)
    except (ValueError, RecursionError):
        pass
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "\n... (cut)"


def _shown(exchange: Exchange) -> ShownExchange:
    response = exchange.response
    return ShownExchange(
        method=exchange.method,
        url=exchange.url,
        headers=[
            (name, value if name.lower() in SHOWN_HEADERS else "(hidden)") for name, value in exchange.headers.items()
        ],
        body=_readable(exchange.body),
        status=response.status_code if response is not None else None,
        content_type=response.headers.get("content-type", "") if response is not None else "",
        reply=_readable(response.content) if response is not None else "",
    )


def tool_trial(*, tool: AgentTool, arguments: Any) -> ToolTrial:
    """Run the tool once through the conversation's tool dispatcher (the same checks, delivery, outbound
    guard, time limit and onError as in a call) and keep every request it sent with its response."""
    agent = Agent.objects.select_related("organization__plan").get(pk=tool.agent_id)
    return async_to_sync(_trial)(agent, tool, arguments)


async def _trial(agent: Agent, tool: AgentTool, arguments: Any) -> ToolTrial:
    recorder = _TrialRecorder()
    exchanges: list[Exchange] = []
    watching = watched_exchanges.set(exchanges)
    dispatcher = ToolDispatcher(agent=agent, recorder=recorder)  # type: ignore[arg-type]
    try:
        specs = await dispatcher.load()
        if tool.name not in {spec.name for spec in specs}:
            if not tool.enabled:
                recorder.lines.append("The tool is disabled: calls do not offer it. Enable it to test it.")
            return ToolTrial(offered=False, log=recorder.lines)
        call = ToolCall(id=f"dashboard-test-{uuid.uuid4().hex[:12]}", name=tool.name, arguments=arguments)
        outcome = await dispatcher.run(call)
    finally:
        watched_exchanges.reset(watching)
        await dispatcher.aclose()
    return ToolTrial(
        offered=True,
        exchanges=[_shown(exchange) for exchange in exchanges],
        status=outcome.status,
        result=_readable(outcome.result),
        log=recorder.lines,
    )
