"""Reads of the budgets, always scoped by organization: the list and one by id, the UTC period a moment
falls in, what the calls in a budget's scope cost in a period, the budgets whose scope holds a call, and
the currency they are counted in."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Q, QuerySet, Sum
from django.db.models.fields.json import KeyTransform
from django.utils import timezone

from accounts.models import Organization
from calls.costs.selectors import currency_for
from calls.models import OPEN_STATUSES, Budget, BudgetPeriod, Call
from kit.db import row_get

# The currency of an organization without a price book of its own when PRICE_BOOK names none.


@dataclass(frozen=True)
class BudgetState:
    """A budget in one period: what the calls in its scope that started in it cost (ended calls only)."""

    budget: Budget
    spent: Decimal
    period_start: datetime
    period_end: datetime
    currency: str

    @property
    def status(self) -> str:
        """ok, warning (80% spent) or exceeded (the whole limit spent)."""
        if self.spent >= self.budget.limit:
            return "exceeded"
        if self.spent * 100 >= self.budget.limit * 80:
            return "warning"
        return "ok"


def period_bounds(period: str, at: datetime) -> tuple[datetime, datetime]:
    """The UTC day or calendar month that `at` falls in: [start, end)."""
    at = at.astimezone(UTC)
    if period == BudgetPeriod.DAY:
        start = at.replace(hour=0, minute=0, second=0, microsecond=0)
        return start, start + timedelta(days=1)
    start = at.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    end = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
    return start, end


def scope_calls(budget: Budget) -> QuerySet[Call]:
    """The organization's calls a budget counts: its agent's, those whose variable has its value, or all."""
    calls = Call.objects.filter(organization_id=budget.organization_id)
    if budget.agent_id is not None:
        return calls.filter(agent_id=budget.agent_id)
    if budget.variable_name:
        # A key transform built by hand: a name may hold what a lookup string would split (`a__b`). Compared as
        # JSON (the value a JSON string), which both databases do alike.
        variable = KeyTransform(budget.variable_name, "variables")
        return calls.alias(budget_variable=variable).filter(budget_variable=budget.variable_value)
    return calls


def budget_spent(*, budget: Budget, start: datetime, end: datetime, excluding: Any = None) -> Decimal:
    """The cost of the ended calls in the budget's scope that started in [start, end) (`excluding`: one
    call left out, the one whose cost is being set)."""
    calls = (
        scope_calls(budget)
        .filter(started_at__gte=start, started_at__lt=end, cost_total__isnull=False)
        .exclude(status__in=OPEN_STATUSES)
    )
    if excluding is not None:
        calls = calls.exclude(pk=excluding)
    total = calls.aggregate(total=Sum("cost_total"))["total"]
    return Decimal(total or 0)


def budget_state(budget: Budget, *, now: datetime | None = None, currency: str | None = None) -> BudgetState:
    """The budget in the period of `now` (now by default)."""
    start, end = period_bounds(budget.period, now or timezone.now())
    return BudgetState(
        budget=budget,
        spent=budget_spent(budget=budget, start=start, end=end),
        period_start=start,
        period_end=end,
        currency=currency or currency_for(organization_id=budget.organization_id),
    )


def budget_list(*, organization: Organization) -> list[BudgetState]:
    """The organization's budgets, newest first, each in its current period."""
    now = timezone.now()
    currency = currency_for(organization_id=organization.pk)
    budgets = Budget.objects.filter(organization=organization).select_related("agent").order_by("-created_at", "-id")
    return [budget_state(budget, now=now, currency=currency) for budget in budgets]


def budget_get(*, organization: Organization, budget_id: str) -> Budget:
    """One of the organization's budgets (another organization's is not found, like an unknown one)."""
    budgets = Budget.objects.filter(organization=organization)
    return row_get(budgets, budget_id, what="budget", missing="Budget not found")


def budgets_in_scope(*, organization_id: Any, agent_id: Any, variables: dict[str, Any] | None) -> QuerySet[Budget]:
    """The organization's budgets whose scope holds a call of `agent_id` with `variables`: the
    organization's, the agent's, and those of each variable's value."""
    scope = Q(agent__isnull=True, variable_name="")
    if agent_id is not None:
        scope |= Q(agent_id=agent_id)
    for name, value in (variables or {}).items():
        if isinstance(name, str) and isinstance(value, str):
            scope |= Q(agent__isnull=True, variable_name=name, variable_value=value)
    return Budget.objects.filter(organization_id=organization_id).filter(scope)
