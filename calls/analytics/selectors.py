"""Reads of call analytics (docs/costs.md): an organization's calls of a range grouped in one query, and the
dashboard's cost figures (cost per day and per agent of every organization).

The range is of the calls' start: [start, end). Every call of it counts in `calls` and `minutes` (open ones
too, with the seconds they have so far: none until they end); `cost` sums the calls priced so far (a call is
priced when it ends: `cost_total` is null while it is open) in one currency, the organization's, and the
costs of calls priced in another (its price book changed currency within the range) are given apart.
Days are UTC days.
"""

from __future__ import annotations

import heapq
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Count, F, Max, Sum
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import TruncDate
from django.utils import timezone

from calls.costs.selectors import currency_for
from calls.models import Call

# The most groups an answer lists (those of the highest cost); the totals still count every call.
MAX_ROWS = 1000
PLACES = Decimal("0.000001")
ZERO = Decimal(0)

AGENT, DAY, DIRECTION, VARIABLE, METADATA = "agent", "day", "direction", "variable", "metadata"


class JsonKeyText(KeyTextTransform):
    """A top-level key of a JSON column as text, alike on both databases: what PostgreSQL's `->>` answers
    (a string as itself, a number or boolean as JSON writes it, a JSON null or a missing key as NULL). On
    SQLite Django's KeyTextTransform answers a JSON null as 'null' and a number as a number: made the same."""

    def as_sqlite(self, compiler: Any, connection: Any, **extra_context: Any) -> tuple[str, Any]:
        lhs, params, keys = self.preprocess_lhs(compiler, connection)
        path = "$" + "".join(f".{json.dumps(key)}" for key in keys)  # Django's compile_json_path for object keys
        sql = (
            f"(CASE JSON_TYPE({lhs}, %s) WHEN 'null' THEN NULL WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' "
            f"ELSE CAST(JSON_EXTRACT({lhs}, %s) AS TEXT) END)"
        )
        return sql, (*params, path, *params, path)


class UtcDate(TruncDate):
    """The UTC day of a moment. On SQLite the stored text's first ten characters (Django keeps a moment there
    as UTC text, "2025-03-03 10:00:00.123456"): Django's TruncDate calls a Python function per row, four
    times as slow (bench/analytics.py, 33,000 calls: 159 ms against 38 ms)."""

    def __init__(self, expression: Any, **extra: Any) -> None:
        super().__init__(expression, tzinfo=UTC, **extra)

    def as_sqlite(self, compiler: Any, connection: Any, **extra_context: Any) -> tuple[str, Any]:
        sql, params = compiler.compile(self.lhs)
        return f"SUBSTR({sql}, 1, 10)", params


@dataclass(frozen=True)
class Grouping:
    """What the calls are grouped by: agent, day, direction, or a variable's or a metadata key's value."""

    kind: str
    name: str = ""  # the variable's name or the metadata key

    def __str__(self) -> str:
        return f"{self.kind}.{self.name}" if self.name else self.kind

    def expression(self) -> Any:
        if self.kind == AGENT:
            return F("agent_id")
        if self.kind == DAY:
            return UtcDate("started_at")
        if self.kind == DIRECTION:
            return F("direction")
        return JsonKeyText(self.name, "variables" if self.kind == VARIABLE else "metadata")


@dataclass
class Group:
    key: Any  # the agent's id (UUID), the day (date), the direction, the value (text); None: calls without one
    label: str | None = None  # grouped by agent: the agent's name on its calls
    calls: int = 0
    seconds: int = 0
    cost: Decimal = ZERO


@dataclass
class Analytics:
    currency: str
    rows: list[Group]  # at most MAX_ROWS
    truncated: bool  # more groups than rows: the rows are those of the highest cost
    total: Group
    other_currencies: dict[str, Decimal] = field(default_factory=dict)  # costs priced in another currency


def _places(value: Decimal) -> Decimal:
    return value.quantize(PLACES)


def _listed(grouping: Grouping, groups: list[Group], most: int) -> list[Group]:
    """Days in order; any other groups by cost, then calls, highest first (then by value, calls without one
    last): the first `most` of them."""
    if grouping.kind == DAY:
        return sorted(groups, key=lambda g: g.key)[:most]
    return heapq.nsmallest(most, groups, key=lambda g: (-g.cost, -g.calls, g.key is None, g.key or ""))


def call_analytics(
    *,
    organization_id: Any,
    start: datetime,
    end: datetime,
    grouping: Grouping,
    agent_id: Any = None,
    currency: str | None = None,
    max_rows: int | None = None,
) -> Analytics:
    """The organization's calls that started in [start, end) (of one agent when given), grouped: one GROUP
    BY query, the range read through the (organization, started_at) index (PostgreSQL scans the table when the
    range is most of it); `currency` is the organization's today unless given."""
    currency = currency or currency_for(organization_id=organization_id)
    max_rows = MAX_ROWS if max_rows is None else max_rows
    calls = Call.objects.filter(organization_id=organization_id, started_at__gte=start, started_at__lt=end)
    if agent_id is not None:
        calls = calls.filter(agent_id=agent_id)
    aggregates: dict[str, Any] = {"calls": Count("pk"), "seconds": Sum("duration_seconds"), "cost": Sum("cost_total")}
    if grouping.kind == AGENT:
        aggregates["label"] = Max("agent_name")
    found = calls.order_by().annotate(key=grouping.expression()).values("key", "cost_currency").annotate(**aggregates)
    groups: dict[Any, Group] = {}
    total = Group(None)
    other: dict[str, Decimal] = defaultdict(Decimal)
    for row in found:
        group = groups.get(row["key"])
        if group is None:
            group = groups[row["key"]] = Group(row["key"])
        seconds = row["seconds"] or 0
        group.calls += row["calls"]
        group.seconds += seconds
        total.calls += row["calls"]
        total.seconds += seconds
        if row["key"] is not None and row.get("label") is not None:
            group.label = max(group.label or "", row["label"])
        if row["cost"] is not None:
            if row["cost_currency"] in (currency, ""):
                group.cost += row["cost"]
                total.cost += row["cost"]
            else:
                other[row["cost_currency"]] += row["cost"]
    rows = _listed(grouping, list(groups.values()), max_rows)
    for group in (*rows, total):
        group.cost = _places(group.cost)
    return Analytics(
        currency=currency,
        rows=rows,
        truncated=len(groups) > max_rows,
        total=total,
        other_currencies={name: _places(other[name]) for name in sorted(other)},
    )


# --- the dashboard's usage page -------------------------------------------------------------------


@dataclass
class AgentCost:
    agent_id: Any  # None: calls of deleted agents
    name: str
    calls: int  # its priced calls
    cost: Decimal


@dataclass
class OrganizationCosts:
    """An organization's priced calls over the days shown, in the currency most of them were priced in."""

    currency: str  # "": no call priced in the days shown
    days: list[dict[str, Any]]  # {"day": date, "cost": Decimal}, every day, zeros included
    agents: list[AgentCost]  # highest cost first
    total: Decimal
    other_currencies: dict[str, Decimal]  # the costs of calls priced in any other currency


def usage_window(*, days: int, at: datetime | None = None) -> tuple[date, datetime, datetime]:
    """The first of the `days` UTC days ending today, and the range [its 00:00, tomorrow's 00:00) in UTC."""
    today = timezone.now().astimezone(UTC).date() if at is None else at.astimezone(UTC).date()
    first = today - timedelta(days=days - 1)
    return first, datetime.combine(first, time.min, UTC), datetime.combine(today + timedelta(days=1), time.min, UTC)


def organization_costs(
    *, organization_ids: list[Any], days: int = 30, at: datetime | None = None
) -> dict[Any, OrganizationCosts]:
    """Per organization, the cost of its calls priced so far by the UTC day they started and by agent, over
    the `days` days ending today (two grouped queries, whatever the number of organizations)."""
    first, start, end = usage_window(days=days, at=at)
    priced = Call.objects.filter(
        organization_id__in=organization_ids, started_at__gte=start, started_at__lt=end, cost_total__isnull=False
    ).order_by()
    by_day = priced.annotate(day=UtcDate("started_at")).values("organization_id", "day", "cost_currency")
    by_day = by_day.annotate(cost=Sum("cost_total"), calls=Count("pk"))
    by_agent = priced.values("organization_id", "agent_id", "cost_currency").annotate(
        cost=Sum("cost_total"), calls=Count("pk"), name=Max("agent_name")
    )
    day_rows: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    agent_rows: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for row in by_day:
        day_rows[row["organization_id"]].append(row)
    for row in by_agent:
        agent_rows[row["organization_id"]].append(row)
    shown = [first + timedelta(days=n) for n in range(days)]
    result: dict[Any, OrganizationCosts] = {}
    for organization_id in organization_ids:
        counted: Counter[str] = Counter()
        for row in day_rows[organization_id]:
            counted[row["cost_currency"]] += row["calls"]
        ranked = sorted(counted.items(), key=lambda item: (-item[1], item[0]))
        currency = ranked[0][0] if ranked else ""
        per_day: dict[date, Decimal] = defaultdict(Decimal)
        other: dict[str, Decimal] = defaultdict(Decimal)
        for row in day_rows[organization_id]:
            if row["cost_currency"] == currency:
                per_day[row["day"]] += row["cost"]
            else:
                other[row["cost_currency"]] += row["cost"]
        agents = [
            AgentCost(
                row["agent_id"],
                row["name"] if row["agent_id"] is not None else "deleted agents",
                row["calls"],
                _places(row["cost"]),
            )
            for row in agent_rows[organization_id]
            if row["cost_currency"] == currency
        ]
        result[organization_id] = OrganizationCosts(
            currency=currency,
            days=[{"day": day, "cost": _places(per_day[day])} for day in shown],
            agents=sorted(agents, key=lambda a: (-a.cost, -a.calls, a.name)),
            total=_places(sum(per_day.values(), ZERO)),
            other_currencies={name: _places(other[name]) for name in sorted(other)},
        )
    return result
