"""Test runs: creating one (`test_run_create`, queued once its transaction commits). Reading one:
realtime/agent_tests/selectors.py; carrying one out: realtime/agent_tests/execution.py."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from agents.models import Agent
from kit.errors import ApiError
from kit.validation import parse_uuid
from realtime.agent_tests.worker import test_run_queue
from realtime.models import AgentTest, TestRun

MAX_REPEAT = 5
MAX_TAG_LENGTH = 64


def test_run_create(
    *,
    agent: Agent,
    test_ids: list[Any] | None = None,
    tag: str = "",
    repeat: int = 1,
    queue: bool = True,
) -> TestRun:
    """A queued run of the agent's tests: those of `test_ids` (in that order), else those tagged `tag`,
    else all of them, each `repeat` times (1..5). Queued for a worker once committed (`queue=False`: the
    caller runs it itself, like `manage.py agenttest`). 400 with a clear message otherwise."""
    if isinstance(repeat, bool) or not isinstance(repeat, int) or not 1 <= repeat <= MAX_REPEAT:
        raise ApiError.field("repeat", f"must be a whole number from 1 to {MAX_REPEAT}")
    if not isinstance(tag, str) or len(tag) > MAX_TAG_LENGTH:
        raise ApiError.field("tag", f"must be a string of at most {MAX_TAG_LENGTH} characters")
    tests = AgentTest.objects.filter(agent=agent)
    if test_ids:
        if not isinstance(test_ids, list) or not all(isinstance(value, str) for value in test_ids):
            raise ApiError.field("testIds", "must be a list of test ids")
        wanted = [str(parse_uuid(value, "test")) for value in dict.fromkeys(test_ids)]
        found = {str(pk) for pk in tests.filter(pk__in=wanted).values_list("pk", flat=True)}
        unknown = [value for value in wanted if value not in found]
        if unknown:
            raise ApiError.field("testIds", f"unknown test {unknown[0]} (not a test of this agent)")
        chosen = wanted
    else:
        ids = [str(pk) for pk, tags in tests.values_list("pk", "tags") if not tag or tag in (tags or [])]
        if not ids:
            message = f"the agent has no test tagged {tag!r}" if tag else "the agent has no tests"
            raise ApiError.invalid(f"Nothing to run: {message}.")
        chosen = ids
    run = TestRun.objects.create(
        organization_id=agent.organization_id, agent=agent, test_ids=chosen, tag=tag, repeat=repeat
    )
    if queue:
        run_id = str(run.pk)
        transaction.on_commit(lambda: test_run_queue(run_id))
    return run
