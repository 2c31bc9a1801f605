"""Figures the benches print."""

from __future__ import annotations


def percentile(values: list[float], percent: float) -> float:
    """The nearest-rank percentile (0-100) of `values`."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(percent / 100 * (len(ordered) - 1))))]
