"""Billing arithmetic: 10-second intervals, monthly billing periods, allocation against an allowance.

Pure functions; `calls.services.call_finish` applies them under the organization's row lock.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import datetime

from calls.models import UsageClassification

BILLING_INTERVAL_SECONDS = 10


def billable_seconds(duration_seconds: int) -> int:
    """The duration rounded up to whole 10-second intervals (0 stays 0)."""
    if duration_seconds <= 0:
        return 0
    return -(-duration_seconds // BILLING_INTERVAL_SECONDS) * BILLING_INTERVAL_SECONDS


def _add_months(anchor: datetime, months: int) -> datetime:
    month_index = anchor.month - 1 + months
    year, month = anchor.year + month_index // 12, month_index % 12 + 1
    day = min(anchor.day, calendar.monthrange(year, month)[1])
    return anchor.replace(year=year, month=month, day=day)


def period_bounds(anchor: datetime, at: datetime) -> tuple[datetime, datetime] | None:
    """The monthly billing period containing `at`: [anchor + k months, anchor + k+1 months).

    None when `at` is before the anchor (the organization's billing has not started yet).
    A period anchored on the 31st ends on the last day of shorter months.
    """
    if at < anchor:
        return None
    months = (at.year - anchor.year) * 12 + (at.month - anchor.month)
    start = _add_months(anchor, months)
    if start > at:
        months -= 1
        start = _add_months(anchor, months)
    return start, _add_months(anchor, months + 1)


@dataclass(frozen=True)
class Allocation:
    included_seconds: int
    overage_seconds: int
    classification: str


def allocate(*, billable: int, remaining: int, on_trial: bool) -> Allocation:
    """Split `billable` seconds against `remaining` allowance seconds.

    `included` when fully covered (a 0-second call is), `overage` when nothing was left, `split` when
    the call crossed the boundary; on trial the same split is kept but the call is classed `trial`.
    """
    included = max(0, min(billable, remaining))
    overage = billable - included
    if on_trial:
        classification = UsageClassification.TRIAL
    elif overage == 0:
        classification = UsageClassification.INCLUDED
    elif included == 0:
        classification = UsageClassification.OVERAGE
    else:
        classification = UsageClassification.SPLIT
    return Allocation(included, overage, classification)


UNALLOCATED = UsageClassification.UNALLOCATED
