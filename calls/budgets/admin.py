"""Dashboard page of the budgets: every organization's, with what its scope has spent in the current UTC
period and its status. Budgets are written through the API (calls/budgets/services.py: its checks and the
organization's limit); staff may delete one here, which allows at once what it blocked."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from calls.budgets.selectors import BudgetState, budget_state
from calls.budgets.serializers import amount
from calls.models import Budget
from kit.fields import iso


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    list_display = ("__str__", "organization", "scope", "period", "limit", "action", "spent", "status", "created_at")
    list_filter = ("action", "period", ("organization", admin.RelatedOnlyFieldListFilter))
    search_fields = ("name", "organization__name", "agent__name", "variable_name", "variable_value")
    search_help_text = "Words of the budget's, organization's or agent's name, or a variable's name or value."
    list_select_related = ("organization", "agent")
    fields = (
        "id",
        "organization",
        "name",
        "scope",
        "period",
        "limit",
        "action",
        "spent",
        "status",
        "period_shown",
        "announced",
        "created_at",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).select_related("organization", "agent")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def _state(self, obj: Budget) -> BudgetState:
        cached = getattr(obj, "_budget_state", None)
        if cached is None:
            cached = budget_state(obj)
            obj._budget_state = cached  # type: ignore[attr-defined]  # one read per row and page
        return cached

    @admin.display(description="Scope")
    def scope(self, obj: Budget) -> str:
        if obj.agent_id is not None:
            return f"agent {obj.agent.name if obj.agent else obj.agent_id}"
        if obj.variable_name:
            return f"variable {obj.variable_name} = {obj.variable_value!r}"
        return "the whole organization"

    @admin.display(description="Spent this period")
    def spent(self, obj: Budget) -> str:
        state = self._state(obj)
        return f"{amount(state.spent):g} {state.currency}"

    @admin.display(description="Status")
    def status(self, obj: Budget) -> str:
        return self._state(obj).status

    @admin.display(description="Current period (UTC)")
    def period_shown(self, obj: Budget) -> str:
        state = self._state(obj)
        return f"{iso(state.period_start)} to {iso(state.period_end)}"

    @admin.display(description="Last threshold announced")
    def announced(self, obj: Budget) -> str:
        if not obj.alerted_percent or obj.alerted_period_start is None:
            return "-"
        return f"{obj.alerted_percent}% in the period from {iso(obj.alerted_period_start)}"
