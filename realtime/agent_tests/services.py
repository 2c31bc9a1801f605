"""Writes of agent tests: create, change, delete, and a test made from a recorded call. The API and the
dashboard both go through these, so both refuse exactly the same things (validation.py)."""

from __future__ import annotations

import uuid
from datetime import UTC
from typing import Any

from django.db import transaction

from accounts.models import Organization
from agents.models import Agent
from agents.selectors import agent_get
from calls.selectors import call_get
from kit.errors import ApiError
from realtime.agent_tests.selectors import (
    agent_test_get,
    agent_test_wire,
    call_caller_turns,
    call_tool_calls,
    offered_tool_names,
)
from realtime.agent_tests.validation import (
    FIELDS,
    MAX_EXPECTED_TOOL_CALLS,
    MAX_TURN_CHARS,
    MAX_TURNS,
    agent_test_body_clean,
)
from realtime.models import AgentTest, AgentTestKind

MAX_TESTS_PER_AGENT = 500


def agent_test_clean(*, agent: Agent, body: dict[str, Any]) -> dict[str, Any]:
    """The model's fields for a whole test body on `agent` (an ApiError 400 naming what is wrong)."""
    return agent_test_body_clean(body, offered=offered_tool_names(agent=agent))


def agent_test_create_for(*, agent: Agent, body: dict[str, Any]) -> AgentTest:
    fields = agent_test_clean(agent=agent, body=body)
    with transaction.atomic():
        # The agent row lock serializes creations of its tests, so the cap holds under concurrent requests.
        Agent.objects.select_for_update().filter(pk=agent.pk).first()
        if AgentTest.objects.filter(agent=agent).count() >= MAX_TESTS_PER_AGENT:
            raise ApiError.invalid(f"An agent can have at most {MAX_TESTS_PER_AGENT} tests.")
        return AgentTest.objects.create(organization_id=agent.organization_id, agent=agent, **fields)


def agent_test_create(*, organization: Organization, agent_id: str, body: dict[str, Any]) -> AgentTest:
    agent = agent_get(organization=organization, agent_id=agent_id)  # another organization's agent: 404
    return agent_test_create_for(agent=agent, body=body)


def agent_test_update_for(*, test: AgentTest, body: dict[str, Any]) -> AgentTest:
    """PATCH: the fields given replace the stored ones (null clears an optional part); the result is checked
    whole, as a new test would be."""
    merged = {**agent_test_wire(test), **{key: value for key, value in body.items() if key in FIELDS}}
    fields = agent_test_clean(agent=test.agent, body=merged)
    for name, value in fields.items():
        setattr(test, name, value)
    test.save()
    return test


def agent_test_update(*, organization: Organization, agent_id: str, test_id: str, body: dict[str, Any]) -> AgentTest:
    if not isinstance(body, dict):
        raise ApiError.invalid("The request body must be a JSON object.")
    agent = agent_get(organization=organization, agent_id=agent_id)
    test = agent_test_get(agent=agent, test_id=test_id)
    return agent_test_update_for(test=test, body=body)


def agent_test_delete(*, organization: Organization, agent_id: str, test_id: str) -> uuid.UUID:
    agent = agent_get(organization=organization, agent_id=agent_id)
    test = agent_test_get(agent=agent, test_id=test_id)
    pk = test.pk
    test.delete()
    return pk


def agent_test_from_call(*, organization: Organization, call_id: str) -> AgentTest:
    """A `reply` test replaying a recorded call: its caller turns (the first 50, each cut to 2000
    characters), its variables, and expect.toolCalls from the tools the agent called (name and arguments;
    tools the agent no longer offers are left out), or expect.noToolCalls when it called none."""
    call = call_get(organization=organization, call_id=call_id)  # another organization's call: 404
    if call.agent_id is None:
        raise ApiError.invalid("The call's agent was deleted: there is no agent to test.")
    agent = agent_get(organization=organization, agent_id=str(call.agent_id))
    turns = [text[:MAX_TURN_CHARS] for text in call_caller_turns(call=call) if text.strip()][:MAX_TURNS]
    if not turns:
        raise ApiError.invalid("The call has no caller turns to replay (nothing the caller said was recorded).")
    offered = offered_tool_names(agent=agent)
    tool_calls = [
        {"name": name, "argumentsInclude": arguments} if arguments else {"name": name}
        for name, arguments in call_tool_calls(call=call)
        if name in offered
    ][:MAX_EXPECTED_TOOL_CALLS]
    expect: dict[str, Any] = {"toolCalls": tool_calls} if tool_calls else {"noToolCalls": True}
    body: dict[str, Any] = {
        "name": f"From call {call.started_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC",
        "kind": AgentTestKind.REPLY,
        "turns": [{"user": text} for text in turns],
        "variables": call.variables or {},
        "expect": expect,
        "tags": ["from-call"],
    }
    return agent_test_create_for(agent=agent, body=body)
