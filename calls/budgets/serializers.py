"""Wire names of the budgets (`/public/v1/budgets`): the representation, and the OpenAPI descriptions of the
request (checked by calls.budgets.services.budget_body_clean) and of the answers."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from calls.budgets.selectors import BudgetState
from calls.models import Budget, BudgetAction, BudgetPeriod
from calls.variables import MAX_NAME_LENGTH, NAME
from kit.fields import iso

MAX_NAME_CHARS = 200
MAX_VARIABLE_VALUE_CHARS = 500  # Budget.variable_value
MIN_LIMIT = Decimal("0.000001")
MAX_LIMIT = Decimal(999_999_999_999)  # Budget.limit: 18 digits, 6 of them decimals
PLACES = Decimal("0.000001")
UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
STATUSES = ("ok", "warning", "exceeded")


def amount(value: Decimal) -> float:
    """A sum of money as a JSON number, rounded to 6 places."""
    return float(value.quantize(PLACES))


def scope_item(budget: Budget) -> dict[str, Any]:
    if budget.agent_id is not None:
        return {"agentId": str(budget.agent_id)}
    if budget.variable_name:
        return {"variable": {"name": budget.variable_name, "value": budget.variable_value}}
    return {"organization": True}


def budget_item(state: BudgetState) -> dict[str, Any]:
    budget = state.budget
    return {
        "id": str(budget.id),
        "name": budget.name or None,
        "scope": scope_item(budget),
        "period": budget.period,
        "limit": amount(budget.limit),
        "action": budget.action,
        "currency": state.currency,
        "spent": amount(state.spent),
        "periodStart": iso(state.period_start),
        "periodEnd": iso(state.period_end),
        "status": state.status,
        "createdAt": iso(budget.created_at),
    }


def budget_label(budget: Budget) -> str:
    """How messages name a budget: its name in quotes, else its id."""
    return f"'{budget.name}'" if budget.name else str(budget.id)


# --- OpenAPI descriptions ---------------------------------------------------------------------------

_AGENT_SCOPE = {
    "type": "object",
    "properties": {"agentId": {"type": "string", "format": "uuid", "pattern": UUID_PATTERN}},
    "required": ["agentId"],
    "additionalProperties": False,
}
_VARIABLE_SCOPE = {
    "type": "object",
    "properties": {
        "variable": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "pattern": f"^{NAME.pattern}$", "maxLength": MAX_NAME_LENGTH},
                "value": {"type": "string", "maxLength": MAX_VARIABLE_VALUE_CHARS},
            },
            "required": ["name", "value"],
            "additionalProperties": False,
        }
    },
    "required": ["variable"],
    "additionalProperties": False,
}
_ORGANIZATION_SCOPE = {
    "type": "object",
    "properties": {"organization": {"type": "boolean", "enum": [True]}},
    "required": ["organization"],
    "additionalProperties": False,
}


@extend_schema_field(
    {
        "oneOf": [_AGENT_SCOPE, _VARIABLE_SCOPE, _ORGANIZATION_SCOPE],
        "description": "Whose calls count: `{agentId}` one agent's, `{variable: {name, value}}` those whose "
        "per-call variable `name` has `value`, `{organization: true}` every call of the organization.",
    }
)
class ScopeField(serializers.JSONField):
    """Documentation of `scope` (checked by calls.budgets.services.budget_body_clean)."""


class BudgetCreateSerializer(serializers.Serializer):
    name = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, max_length=MAX_NAME_CHARS, help_text="Your label."
    )
    scope = ScopeField()
    period = serializers.ChoiceField(choices=BudgetPeriod.choices, help_text="A UTC day or a UTC calendar month.")
    limit = serializers.DecimalField(
        max_digits=18,
        decimal_places=6,
        min_value=MIN_LIMIT,
        max_value=MAX_LIMIT,
        coerce_to_string=False,
        help_text="The most the calls in scope may cost in a period, in the organization's price-book currency "
        "(a JSON number; kept to 6 decimal places).",
    )
    action = serializers.ChoiceField(
        choices=BudgetAction.choices,
        help_text="`alert`: budget.threshold events at 80% and 100% only. `block`: also, once the limit is spent, "
        "new sessions and outbound calls in scope are refused (402 BUDGET_EXCEEDED) and campaigns in scope "
        "pause; live calls go on.",
    )


class BudgetSchema(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField(allow_null=True)
    scope = ScopeField()
    period = serializers.ChoiceField(choices=BudgetPeriod.choices)
    limit = serializers.FloatField()
    action = serializers.ChoiceField(choices=BudgetAction.choices)
    currency = serializers.CharField(help_text="The organization's price-book currency (ISO 4217).")
    spent = serializers.FloatField(
        help_text="What the ended calls in scope that started in the current period cost (rounded to 6 places)."
    )
    periodStart = serializers.DateTimeField(help_text="The current period's start (UTC).")
    periodEnd = serializers.DateTimeField(help_text="The current period's end (UTC), when `spent` starts again at 0.")
    status = serializers.ChoiceField(
        choices=STATUSES, help_text="`warning` from 80% of the limit spent, `exceeded` from 100%."
    )
    createdAt = serializers.DateTimeField()


class BudgetExceededSchema(serializers.Serializer):
    error = serializers.CharField(help_text="Names the budget, its limit and period.")
    code = serializers.ChoiceField(choices=["BUDGET_EXCEEDED"])
    budgetId = serializers.UUIDField()
    limit = serializers.FloatField()
    spent = serializers.FloatField()
    currency = serializers.CharField()
    period = serializers.ChoiceField(choices=BudgetPeriod.choices)
    periodEnd = serializers.DateTimeField(help_text="When the period ends and the budget allows calls again.")
