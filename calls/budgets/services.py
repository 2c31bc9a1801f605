"""Budgets' rules (docs/costs.md): what a budget may be (`budget_body_clean`, `budget_create`, at most
MAX_BUDGETS an organization), the `budget.threshold` events at 80% and 100% of a period's limit
(`budget_thresholds_record`, in the transaction that sets a call's cost), and the refusal of what a spent
`block` budget stops (`budget_exceeded_check`: 402 BUDGET_EXCEEDED for a new session or outbound call in
its scope; telephony answers a phone call and pauses a campaign with it).

A budget counts the ended calls in its scope that started in the period (a UTC day or calendar month):
`Call.cost_total`, set by the ledger when a call ends and grown by its analysis and recording. A live call
is never cut: what it costs counts once it ends, so a period may end above its limit."""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any
from uuid import UUID

from django.db import transaction
from django.utils import timezone

from accounts.models import Organization
from agents.models import Agent
from calls.budgets.selectors import (
    BudgetState,
    budget_get,
    budget_spent,
    budget_state,
    budgets_in_scope,
    period_bounds,
)
from calls.budgets.serializers import (
    MAX_LIMIT,
    MAX_NAME_CHARS,
    MAX_VARIABLE_VALUE_CHARS,
    MIN_LIMIT,
    PLACES,
    amount,
    budget_item,
    budget_label,
)
from calls.costs.selectors import currency_for
from calls.models import Budget, BudgetAction, BudgetPeriod, Call, EventType
from calls.variables import MAX_NAME_LENGTH, NAME
from calls.webhooks.events import event_record
from kit.errors import ApiError, validation_error
from kit.fields import iso

MAX_BUDGETS = 100
TOO_MANY_BUDGETS = "TOO_MANY_BUDGETS"
BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
# The shares of the limit announced by a budget.threshold event, once each per period.
THRESHOLDS = (80, 100)
SCOPE_KEYS = ("agentId", "variable", "organization")
_PERIOD_WORDS = {BudgetPeriod.DAY: "UTC day", BudgetPeriod.MONTH: "UTC month"}


# --- create, delete ---------------------------------------------------------------------------------


def budget_body_clean(*, organization: Organization, body: Any) -> dict[str, Any]:
    """A POST /budgets body, checked: every problem in one 400 whose `issues` name the fields (`scope`,
    `scope.agentId`, `scope.variable.name`, `period`, `limit`, `action`, `name`)."""
    if not isinstance(body, dict):
        raise ApiError.invalid("The request body must be a JSON object.")
    issues: dict[str, list[str]] = {}
    cleaned: dict[str, Any] = {"name": _name(body.get("name"), issues)}
    cleaned.update(_scope(organization, body.get("scope"), issues))
    for field, choices in (("period", BudgetPeriod.values), ("action", BudgetAction.values)):
        value = body.get(field)
        if value is None:
            issues[field] = [f"Required: {' or '.join(choices)}."]
        elif not isinstance(value, str) or value not in choices:
            issues[field] = [f"Must be {' or '.join(choices)}, not {str(value)[:40]!r}."]
        else:
            cleaned[field] = value
    cleaned["limit"] = _limit(body.get("limit"), issues)
    if issues:
        raise validation_error(issues)
    return cleaned


def _name(value: Any, issues: dict[str, list[str]]) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        issues["name"] = ["Must be a string."]
        return ""
    name = value.strip()
    if len(name) > MAX_NAME_CHARS:
        issues["name"] = [f"At most {MAX_NAME_CHARS} characters."]
    return name


def _scope(organization: Organization, value: Any, issues: dict[str, list[str]]) -> dict[str, Any]:
    """{agent_id}, {variable_name, variable_value} or {} (the organization's), from `scope`."""
    shapes = "{agentId}, {variable: {name, value}} or {organization: true}"
    if value is None:
        issues["scope"] = [f"Required: {shapes}."]
        return {}
    if not isinstance(value, dict) or not value:
        issues["scope"] = [f"Must be one of {shapes}."]
        return {}
    unknown = [key for key in value if key not in SCOPE_KEYS]
    if unknown:
        issues["scope"] = [f"Unknown key {str(unknown[0])[:40]!r}: a scope is one of {shapes}."]
        return {}
    if len(value) > 1:
        issues["scope"] = [f"One kind of scope only, not {' and '.join(value)}: {shapes}."]
        return {}
    if "agentId" in value:
        return _agent_scope(organization, value["agentId"], issues)
    if "variable" in value:
        return _variable_scope(value["variable"], issues)
    if value["organization"] is not True:
        issues["scope.organization"] = ["Must be true: the budget counts every call of the organization."]
    return {}


def _agent_scope(organization: Organization, value: Any, issues: dict[str, list[str]]) -> dict[str, Any]:
    try:
        agent_id = UUID(value) if isinstance(value, str) else None
    except ValueError:
        agent_id = None
    if agent_id is None:
        issues["scope.agentId"] = ["Must be an agent's id (a UUID)."]
        return {}
    if not Agent.objects.filter(pk=agent_id, organization=organization).exists():
        issues["scope.agentId"] = ["No agent with this id in your organization."]
        return {}
    return {"agent_id": agent_id}


def _variable_scope(value: Any, issues: dict[str, list[str]]) -> dict[str, Any]:
    if not isinstance(value, dict):
        issues["scope.variable"] = ["Must be an object {name, value}."]
        return {}
    unknown = [key for key in value if key not in ("name", "value")]
    if unknown:
        issues["scope.variable"] = [f"Unknown key {str(unknown[0])[:40]!r}: the variable is {{name, value}}."]
    name, text = value.get("name"), value.get("value")
    if not isinstance(name, str) or not NAME.fullmatch(name) or len(name) > MAX_NAME_LENGTH:
        issues["scope.variable.name"] = [
            "Required: a per-call variable's name (a letter or underscore, then letters, digits, underscores or "
            f"dots; at most {MAX_NAME_LENGTH} characters)."
        ]
    if not isinstance(text, str):
        issues["scope.variable.value"] = ["Required: the variable's value, a string."]
    elif len(text) > MAX_VARIABLE_VALUE_CHARS:
        issues["scope.variable.value"] = [f"At most {MAX_VARIABLE_VALUE_CHARS} characters."]
    if any(key.startswith("scope.variable") for key in issues):
        return {}
    return {"variable_name": name, "variable_value": text}


def _limit(value: Any, issues: dict[str, list[str]]) -> Decimal:
    if value is None:
        issues["limit"] = ["Required: a number, the most the calls in scope may cost in a period."]
        return Decimal(0)
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (isinstance(value, float) and not math.isfinite(value))
    ):
        issues["limit"] = ["Must be a number."]
        return Decimal(0)
    try:
        limit = Decimal(str(value)).quantize(PLACES, rounding=ROUND_HALF_UP)
    except InvalidOperation:
        limit = MAX_LIMIT + 1
    if limit < MIN_LIMIT:
        issues["limit"] = [f"Must be at least {MIN_LIMIT} (a positive number)."]
    elif limit > MAX_LIMIT:
        issues["limit"] = [f"Must be at most {MAX_LIMIT:,}."]
    return limit


def budget_create(*, organization: Organization, body: Any) -> Budget:
    """A new budget from a POST /budgets body (400 naming the fields; 409 TOO_MANY_BUDGETS at MAX_BUDGETS)."""
    data = budget_body_clean(organization=organization, body=body)
    with transaction.atomic():
        Organization.objects.select_for_update().filter(pk=organization.pk).first()
        if Budget.objects.filter(organization=organization).count() >= MAX_BUDGETS:
            raise ApiError.conflict(f"An organization has at most {MAX_BUDGETS} budgets.", code=TOO_MANY_BUDGETS)
        return Budget.objects.create(organization=organization, created_at=timezone.now(), **data)


def budget_delete(*, organization: Organization, budget_id: str) -> Any:
    """Deletes the budget; what it blocked is allowed again at once."""
    budget = budget_get(organization=organization, budget_id=budget_id)
    pk = budget.pk
    budget.delete()
    return pk


# --- thresholds ---------------------------------------------------------------------------------------


def _threshold(spent: Decimal, limit: Decimal) -> int:
    """The highest of THRESHOLDS that `spent` has reached (0: none)."""
    reached = [percent for percent in THRESHOLDS if spent * 100 >= limit * percent]
    return max(reached, default=0)


def budget_thresholds_record(*, call: Call) -> None:
    """Call it inside the transaction that sets the ended call's cost, once the call's row is saved (the
    event carries the call as the database holds it): for each budget whose scope holds the call, in the
    period the call started in when that is the current one, a `budget.threshold` event
    (calls/webhooks/events.py: the organization's webhooks subscribed to it, the agent's serverUrl) when
    what its calls cost has reached 80% or 100% of the limit and that share was not announced yet in the
    period. A call that crosses both announces 100 only. The budgets are locked (in id order) while they
    are read and marked, so that calls ending at once announce a threshold once. The call's own cost is
    taken from `call`, whether its row is saved yet or not."""
    if call.cost_total is None:
        return
    scoped = list(
        budgets_in_scope(organization_id=call.organization_id, agent_id=call.agent_id, variables=call.variables)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    if not scoped:
        return
    now = timezone.now()
    currency = call.cost_currency or currency_for(organization_id=call.organization_id)
    for budget in Budget.objects.select_for_update().filter(pk__in=scoped).order_by("pk"):
        start, end = period_bounds(budget.period, call.started_at)
        if not start <= now < end:
            continue  # a call of a period that is over
        spent = budget_spent(budget=budget, start=start, end=end, excluding=call.pk) + Decimal(call.cost_total)
        threshold = _threshold(spent, budget.limit)
        announced = budget.alerted_percent if budget.alerted_period_start == start else 0
        if threshold <= announced:
            continue
        budget.alerted_percent, budget.alerted_period_start = threshold, start
        budget.save(update_fields=["alerted_percent", "alerted_period_start"])
        state = BudgetState(budget=budget, spent=spent, period_start=start, period_end=end, currency=currency)
        event_record(
            call=call,
            event_type=EventType.BUDGET_THRESHOLD,
            message_fields={
                "budget": budget_item(state),
                "threshold": threshold,
                "spent": amount(spent),
                "limit": amount(budget.limit),
                "currency": currency,
            },
        )


# --- blocking -------------------------------------------------------------------------------------------


class BudgetExceeded(ApiError):
    """402 BUDGET_EXCEEDED: a `block` budget whose scope holds what was asked for is spent."""

    def __init__(self, state: BudgetState) -> None:
        budget = state.budget
        self.budget = budget
        self.state = state
        self.reason = (
            f"the budget {budget_label(budget)} ({amount(budget.limit):g} {state.currency} per "
            f"{_PERIOD_WORDS[BudgetPeriod(budget.period)]}) is spent: {amount(state.spent):g} {state.currency} "
            f"until {iso(state.period_end)}"
        )
        super().__init__(
            f"Budget exceeded: {self.reason}. New sessions and outbound calls in its scope are refused until then "
            "(live calls go on); raise its limit or delete it to allow them now.",
            status_code=402,
            code=BUDGET_EXCEEDED,
            extra={
                "budgetId": str(budget.pk),
                "limit": amount(budget.limit),
                "spent": amount(state.spent),
                "currency": state.currency,
                "period": budget.period,
                "periodEnd": iso(state.period_end),
            },
        )


def budget_exceeded_check(*, organization: Organization | UUID | str, agent_id: Any, variables: Any) -> None:
    """Raise BudgetExceeded (402 BUDGET_EXCEEDED, naming the budget) when a `block` budget whose scope holds
    a new call of `agent_id` with `variables` (the organization's, the agent's, a variable's value) has its
    limit spent in the current period; the oldest such budget is named. Nothing is locked: a live call is
    never cut, so calls that start at once may end a period a little above its limit."""
    refusal = budget_refusal(organization=organization, agent_id=agent_id, variables=variables)
    if refusal is not None:
        raise refusal


def budget_refusal(*, organization: Organization | UUID | str, agent_id: Any, variables: Any) -> BudgetExceeded | None:
    """budget_exceeded_check's answer without raising it (for telephony: a phone call refused, a campaign
    paused, a queued call not placed; `reason` says why in words): the refusal, or None."""
    organization_id = organization.pk if isinstance(organization, Organization) else organization
    blocking = budgets_in_scope(
        organization_id=organization_id,
        agent_id=agent_id,
        variables=variables if isinstance(variables, dict) else None,
    ).filter(action=BudgetAction.BLOCK)
    now = timezone.now()
    currency: str | None = None
    for budget in blocking.order_by("created_at", "id"):
        currency = currency or currency_for(organization_id=organization_id)
        state = budget_state(budget, now=now, currency=currency)
        if state.spent >= budget.limit:
            return BudgetExceeded(state)
    return None
