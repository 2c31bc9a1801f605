"""A call's per-turn latency summary, stored on the call when it ends and shown as `latency` in the
call detail and on the dashboard's call page: the number of answered caller turns and, for each
stage the engine measured (kit.metrics.TURN_STAGES), the median and 95th percentile in ms.

    {"turns": 3, "endOfTurnMs": {"p50": 310, "p95": 480}, "recognitionMs": {...}, "firstTokenMs": {...},
     "firstAudioMs": {...}, "totalMs": {...}}

A stage the engine does not measure (recognition on the speech-to-speech engine, whose provider
listens) is null.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

# Stage name (kit.metrics.TURN_STAGES) -> key in the stored summary and the API.
STAGE_KEYS = {
    "end_of_turn": "endOfTurnMs",
    "recognition": "recognitionMs",
    "first_token": "firstTokenMs",
    "first_audio": "firstAudioMs",
    "total": "totalMs",
}


def percentile(values: Sequence[float], fraction: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default), of a non-empty sequence."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def latency_summary(turns: Sequence[Mapping[str, float | None]]) -> dict[str, Any] | None:
    """The summary of a call's answered turns (each a mapping stage -> ms or None); None without turns."""
    if not turns:
        return None
    summary: dict[str, Any] = {"turns": len(turns)}
    for stage, key in STAGE_KEYS.items():
        values = [float(value) for turn in turns if (value := turn.get(stage)) is not None]
        summary[key] = (
            {"p50": round(percentile(values, 0.5)), "p95": round(percentile(values, 0.95))} if values else None
        )
    return summary
