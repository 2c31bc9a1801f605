"""The Celery task of the post-call analysis (found by Celery through realtime/tasks.py)."""

from __future__ import annotations

from celery import shared_task

from realtime.analysis.runner import analysis_run


@shared_task(name="realtime.analyze_call", acks_late=True)
def analyze_call(call_id: str) -> str:
    """One call's post-call analysis: its status, or "" when it was not pending (or another worker has it)."""
    return analysis_run(call_id=call_id)
