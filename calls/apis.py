"""Calls and agent-logs REST endpoints: thin views that parse the query, read, and render."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from agents.selectors import agent_get
from calls import selectors
from calls.serializers import (
    AgentLogPageSchema,
    AgentLogQuery,
    CallDetailSchema,
    CallListQuery,
    CallSummarySchema,
    agent_log_item,
    call_detail,
    call_summary_item,
)
from kit.api import PublicApiView
from kit.fields import parse

BAD_QUERY = OpenApiResponse(description="Invalid query parameter or ID; `issues` lists the problems")


class CallListApi(PublicApiView):
    @extend_schema(
        operation_id="listCalls",
        tags=["Calls"],
        summary="List calls",
        parameters=[CallListQuery],
        responses={200: CallSummarySchema(many=True), 400: BAD_QUERY},
        description="The organization's calls, newest first, with duration and billing figures. Calls of a "
        "deleted agent stay, with `agentId` null. Unknown query parameters are ignored.",
    )
    def get(self, request: Request) -> Response:
        query = parse(CallListQuery, request.query_params.dict())
        rows = selectors.call_list(organization=self.organization, agent_id=query.get("agentId"), limit=query["limit"])
        return Response([call_summary_item(row) for row in rows])


class CallDetailApi(PublicApiView):
    @extend_schema(
        operation_id="getCall",
        tags=["Calls"],
        summary="Get a call",
        description="One call with its summary, transcript messages, tool invocations and model usage. "
        "Transcripts hold what callers said and may contain personal data.",
        responses={200: CallDetailSchema, 404: OpenApiResponse(description="Call not found")},
    )
    def get(self, request: Request, call_id: str) -> Response:
        call = selectors.call_get(organization=self.organization, call_id=call_id)
        return Response(call_detail(call))


class AgentLogListApi(PublicApiView):
    @extend_schema(
        operation_id="listAgentLogs",
        tags=["Logs"],
        summary="List an agent's runtime logs",
        parameters=[AgentLogQuery],
        responses={200: AgentLogPageSchema, 400: BAD_QUERY, 404: OpenApiResponse(description="Agent not found")},
        description="The agent's runtime logs of the last 24 hours, newest first, a page at a time "
        "(`pagination` says whether there are more). Unknown query parameters are ignored.",
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = agent_get(organization=self.organization, agent_id=agent_id)
        query = parse(AgentLogQuery, request.query_params.dict())
        logs, has_next = selectors.agent_log_page(
            agent=agent,
            limit=query["limit"],
            offset=query["offset"],
            severity=query.get("severity"),
            session_id=query.get("sessionId"),
        )
        return Response(
            {
                "logs": [agent_log_item(log) for log in logs],
                "pagination": {
                    "limit": query["limit"],
                    "offset": query["offset"],
                    "hasNextPage": has_next,
                    "hasPreviousPage": query["offset"] > 0,
                },
            }
        )
