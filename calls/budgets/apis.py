"""Budgets: thin REST views (`/public/v1/budgets`, docs/reference/api.md#budgets)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from calls.budgets import selectors, services
from calls.budgets.serializers import BudgetCreateSerializer, BudgetSchema, budget_item
from calls.webhooks.serializers import DeletedSchema
from kit.api import PublicApiView

TAGS = ["Budgets"]
INVALID = OpenApiResponse(
    description="Invalid body or ID (`issues` names the fields): no scope or more than one kind of scope, an "
    "agentId that is not one of your agents, a bad variable name, a period other than day or month, an action "
    "other than alert or block, a limit that is not a positive number"
)
NOT_FOUND = OpenApiResponse(description="Budget not found (or another organization's)")


class BudgetListApi(PublicApiView):
    @extend_schema(
        operation_id="listBudgets",
        tags=TAGS,
        summary="List budgets",
        description="The organization's budgets, newest first, each with what its scope has spent in the current "
        "UTC period and its status.",
        responses={200: BudgetSchema(many=True)},
    )
    def get(self, request: Request) -> Response:
        return Response([budget_item(state) for state in selectors.budget_list(organization=self.organization)])

    @extend_schema(
        operation_id="createBudget",
        tags=TAGS,
        summary="Create a budget",
        request=BudgetCreateSerializer,
        responses={
            201: BudgetSchema,
            400: INVALID,
            409: OpenApiResponse(description="TOO_MANY_BUDGETS: the organization has its maximum of 100 budgets"),
        },
        description="A spending limit over the calls of an agent, of a per-call variable's value or of the whole "
        "organization, per UTC day or month: `budget.threshold` events at 80% and 100% of it (call events, "
        "docs/reference/webhooks.md); with `action` `block`, once it is spent, new realtime sessions and "
        "outbound calls in its scope are refused with 402 `BUDGET_EXCEEDED`, phone calls to its agents are "
        "refused and campaigns in scope pause. A live call is never cut.",
    )
    def post(self, request: Request) -> Response:
        budget = services.budget_create(organization=self.organization, body=request.data)
        return Response(budget_item(selectors.budget_state(budget)), status=201)


class BudgetDetailApi(PublicApiView):
    @extend_schema(
        operation_id="getBudget",
        tags=TAGS,
        summary="Get a budget",
        description="One budget, with what its scope has spent in the current UTC period.",
        responses={200: BudgetSchema, 400: INVALID, 404: NOT_FOUND},
    )
    def get(self, request: Request, budget_id: str) -> Response:
        budget = selectors.budget_get(organization=self.organization, budget_id=budget_id)
        return Response(budget_item(selectors.budget_state(budget)))

    @extend_schema(
        operation_id="deleteBudget",
        tags=TAGS,
        summary="Delete a budget",
        description="Deletes the budget: what it blocked is allowed again at once.",
        responses={200: DeletedSchema, 400: INVALID, 404: NOT_FOUND},
    )
    def delete(self, request: Request, budget_id: str) -> Response:
        deleted = services.budget_delete(organization=self.organization, budget_id=budget_id)
        return Response({"id": str(deleted)})
