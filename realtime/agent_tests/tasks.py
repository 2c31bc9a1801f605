"""The Celery task of test runs (found by Celery through realtime/tasks.py)."""

from __future__ import annotations

from celery import shared_task

from realtime.agent_tests.execution import test_runs_drain


@shared_task(name="realtime.run_agent_tests", acks_late=True)
def run_agent_tests(run_id: str) -> int:
    """Queued for `run_id`: carries out attempts of every run that is due, fairly across organizations
    (that one among them), until none is left; how many attempts it took."""
    return test_runs_drain()
