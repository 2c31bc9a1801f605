"""Call analytics: a thin REST view (docs/costs.md)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from calls.analytics import selectors
from calls.analytics.serializers import MAX_RANGE_DAYS, CallAnalyticsQuery, CallAnalyticsSchema, analytics_body
from kit.api import PublicApiView
from kit.fields import parse


class CallAnalyticsApi(PublicApiView):
    @extend_schema(
        operation_id="getCallAnalytics",
        tags=["Costs"],
        summary="Calls, minutes and cost by group",
        parameters=[CallAnalyticsQuery],
        responses={
            200: CallAnalyticsSchema,
            400: OpenApiResponse(
                description="Invalid query parameter (`issues` names it): a date that does not exist, `from` not "
                f"before `to`, a range of more than {MAX_RANGE_DAYS} days, an unknown groupBy"
            ),
        },
        description="The organization's calls that started in [`from`, `to`) (of one agent with `agentId`), "
        "grouped by agent, UTC day, direction, a per-call variable's value or a metadata key's value: per group "
        "the calls (open ones included), their minutes and the cost of those priced so far (a call is priced "
        "when it ends) in the organization's currency. Groups without calls are not listed; days come in order, "
        "other groups by cost, highest first, at most 1000 (`truncated`); `total` counts every call. Unknown "
        "query parameters are ignored.",
    )
    def get(self, request: Request) -> Response:
        query = parse(CallAnalyticsQuery, request.query_params.dict())
        analytics = selectors.call_analytics(
            organization_id=self.organization.pk,
            start=query["start"],
            end=query["end"],
            grouping=query["grouping"],
            agent_id=query["agent_id"],
        )
        return Response(analytics_body(analytics, start=query["start"], end=query["end"], grouping=query["grouping"]))
