"""Reads of agent tests (organization-scoped through the agent), of their runs, and of the tools an agent offers."""

from __future__ import annotations

import re
from typing import Any

from django.db.models import QuerySet

from accounts.models import Organization
from agents.models import Agent
from calls.models import Call, CallMessage, MessageRole, ToolInvocation
from kit.db import row_get
from kit.fields import iso
from realtime.models import AgentTest, TestAttempt, TestRun
from realtime.selectors import session_tools_get

# What realtime/engine/tools/dispatcher.py does to a name before offering it (MCP tools keep their own name
# on the server; the model, and so a test, knows them by this one).
_UNSAFE_NAME_CHARACTERS = re.compile(r"[^A-Za-z0-9_-]")
NATIVE_RESERVED = frozenset({"search_knowledge", "transfer_call", "end_call", "send_digits"})


def offered_tool_names(*, agent: Agent) -> list[str]:
    """The tools a test session of `agent` (channel web) is offered, by the name the model sees, in the
    dispatcher's order: its enabled custom tools (webhook agents with a serverUrl; http tools with a toolUrl),
    its usable MCP selections, then search_knowledge (a ready document), transfer_call (a handoff number)
    and end_call (unless turned off). Reads the database only; opens no session and contacts nothing."""
    setup = session_tools_get(agent=agent, to_number=None)
    names: list[str] = []
    for tool in setup.custom_tools:
        if tool.name in NATIVE_RESERVED or tool.name in names:
            continue
        if agent.agent_type == "webhook" and not agent.server_url:
            continue
        if agent.agent_type == "http" and not tool.tool_url:
            continue
        names.append(tool.name)
    for _server, definition in setup.mcp_tools:
        name = _UNSAFE_NAME_CHARACTERS.sub("_", str(definition.get("name") or ""))[:64]
        if name and name not in NATIVE_RESERVED and name not in names:
            names.append(name)
    if setup.has_knowledge:
        names.append("search_knowledge")
    if setup.handoff_phone_number:
        names.append("transfer_call")
    if agent.end_call_enabled:
        names.append("end_call")
    return names


def agent_test_get(*, agent: Agent, test_id: str) -> AgentTest:
    """The agent's test; a non-UUID id is a 400, a test of another agent (or organization) a 404."""
    return row_get(AgentTest.objects.filter(agent=agent), test_id, what="test", missing="Test not found")


def agent_test_list(*, agent: Agent, tag: str | None = None) -> QuerySet[AgentTest]:
    tests = AgentTest.objects.filter(agent=agent).order_by("created_at", "id")
    if tag:
        # JSON containment is not on every database: the tag filter runs over the (few) names in Python.
        ids = [pk for pk, tags in tests.values_list("pk", "tags") if tag in (tags or [])]
        tests = tests.filter(pk__in=ids)
    return tests


def agent_test_page(*, agent: Agent, limit: int, offset: int, tag: str | None = None) -> list[AgentTest]:
    """Oldest first (the order a run takes them in)."""
    return list(agent_test_list(agent=agent, tag=tag)[offset : offset + limit])


def agent_test_item(test: AgentTest) -> dict[str, Any]:
    return {
        "id": str(test.id),
        "agentId": str(test.agent_id),
        "name": test.name,
        "kind": test.kind,
        "turns": test.turns,
        "caller": test.caller,
        "variables": test.variables,
        "toolMocks": test.tool_mocks,
        "expect": test.expect,
        "tags": test.tags,
        "allowRealTools": test.allow_real_tools,
        "createdAt": iso(test.created_at),
        "updatedAt": iso(test.updated_at),
    }


def agent_test_wire(test: AgentTest) -> dict[str, Any]:
    """The stored test as a request body (PATCH merges the body given into it)."""
    item = agent_test_item(test)
    return {
        key: item[key]
        for key in ("name", "kind", "turns", "caller", "variables", "toolMocks", "expect", "tags", "allowRealTools")
    }


def agent_test_runs(*, agent: Agent, limit: int = 50) -> list[TestRun]:
    return list(TestRun.objects.filter(agent=agent).order_by("-created_at", "-id")[:limit])


def call_caller_turns(*, call: Call) -> list[str]:
    """What the caller said in `call`, turn by turn (the stored transcript: redacted if the agent redacts)."""
    return list(
        CallMessage.objects.filter(call=call, role=MessageRole.USER)
        .order_by("occurred_at", "sequence")
        .values_list("content", flat=True)
    )


def call_tool_calls(*, call: Call) -> list[tuple[str, dict[str, Any]]]:
    """(tool name, arguments) of every tool the agent called in `call`, in order."""
    rows = ToolInvocation.objects.filter(call=call).order_by("created_at", "sequence")
    return [
        (name, request if isinstance(request, dict) else {})
        for name, request in rows.values_list("tool_name", "request")
    ]


def test_run_get(*, organization: Organization, run_id: str) -> TestRun:
    """The organization's run; a non-UUID id is a 400, another organization's run a 404."""
    return row_get(
        TestRun.objects.filter(organization=organization), run_id, what="test run", missing="Test run not found"
    )


def _pass_rate(attempts: list[dict[str, Any]]) -> float | None:
    judged = [attempt for attempt in attempts if attempt.get("verdict") != "skipped"]
    if not judged:
        return None
    return round(sum(1 for attempt in judged if attempt.get("verdict") == "pass") / len(judged), 4)


def test_run_results(run: TestRun) -> list[dict[str, Any]]:
    """Per test attempted (in the run's order): {"testId", "name", "kind", "passRate", "attempts"}, from the
    run's attempt rows."""
    results: dict[int, dict[str, Any]] = {}
    rows = TestAttempt.objects.filter(run=run).order_by("position", "number")
    for position, test_id, name, kind, result in rows.values_list("position", "test_id", "name", "kind", "result"):
        entry = results.setdefault(
            position, {"testId": str(test_id), "name": name, "kind": kind, "passRate": None, "attempts": []}
        )
        entry["attempts"].append(result)
    for entry in results.values():
        entry["passRate"] = _pass_rate(entry["attempts"])
    return list(results.values())


def test_run_json(run: TestRun) -> dict[str, Any]:
    return {
        "id": str(run.pk),
        "agentId": str(run.agent_id),
        "status": run.status,
        "testIds": [str(value) for value in run.test_ids],
        "tag": run.tag,
        "repeat": run.repeat,
        "passed": run.passed,
        "failed": run.failed,
        "errored": run.errored,
        "error": run.error or None,
        "results": test_run_results(run),
        "createdAt": iso(run.created_at),
        "startedAt": iso(run.started_at) if run.started_at else None,
        "finishedAt": iso(run.finished_at) if run.finished_at else None,
    }
