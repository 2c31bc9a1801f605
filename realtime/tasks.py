"""Celery tasks of the realtime app (Celery's autodiscovery imports this module)."""

from __future__ import annotations

from realtime.analysis.tasks import analyze_call

__all__ = ["analyze_call"]
