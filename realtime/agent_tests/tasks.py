"""The Celery task of test runs (found by Celery through realtime/tasks.py)."""

from __future__ import annotations

from celery import shared_task

from realtime.agent_tests.execution import test_run_execute


@shared_task(name="realtime.run_agent_tests", acks_late=True)
def run_agent_tests(run_id: str) -> str:
    """One test run: its final status, or "" when it was not queued (or another worker has it)."""
    return test_run_execute(run_id=run_id)
