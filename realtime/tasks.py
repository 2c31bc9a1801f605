"""Celery tasks of the realtime app (Celery's autodiscovery imports this module)."""

from __future__ import annotations

from realtime.agent_tests.tasks import run_agent_tests
from realtime.analysis.tasks import analyze_call

__all__ = ["analyze_call", "run_agent_tests"]
