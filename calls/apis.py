"""Calls and agent-logs REST endpoints: thin views that parse the query, read, and render."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
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
from voiceagent.api import PublicApiView
from voiceagent.fields import parse

ERRORS = {
    400: OpenApiResponse(description="Invalid query parameter or ID; `issues` lists the problems"),
    401: OpenApiResponse(description="Missing, malformed or invalid API key"),
}


class CallListApi(PublicApiView):
    @extend_schema(
        operation_id="listCalls",
        parameters=[
            OpenApiParameter("agentId", OpenApiTypes.UUID, description="Only calls of this agent"),
            OpenApiParameter("limit", OpenApiTypes.INT, description="1 to 100, default 25"),
        ],
        responses={200: CallSummarySchema(many=True), **ERRORS},
        description="Calls of the organization, newest first. Unknown query parameters are ignored.",
    )
    def get(self, request: Request) -> Response:
        query = parse(CallListQuery, request.query_params.dict())
        rows = selectors.call_list(organization=self.organization, agent_id=query.get("agentId"), limit=query["limit"])
        return Response([call_summary_item(row) for row in rows])


class CallDetailApi(PublicApiView):
    @extend_schema(
        operation_id="getCall",
        responses={200: CallDetailSchema, 404: OpenApiResponse(description="Call not found"), **ERRORS},
    )
    def get(self, request: Request, call_id: str) -> Response:
        call = selectors.call_get(organization=self.organization, call_id=call_id)
        return Response(call_detail(call))


class AgentLogListApi(PublicApiView):
    @extend_schema(
        operation_id="listAgentLogs",
        parameters=[
            OpenApiParameter("limit", OpenApiTypes.INT, description="1 to 100, default 25"),
            OpenApiParameter("offset", OpenApiTypes.INT, description="Entries to skip, default 0"),
            OpenApiParameter("severity", OpenApiTypes.STR, enum=["debug", "info", "warn", "error"]),
            OpenApiParameter("sessionId", OpenApiTypes.STR, description="6-character session id"),
        ],
        responses={200: AgentLogPageSchema, 404: OpenApiResponse(description="Agent not found"), **ERRORS},
        description="The agent's runtime logs of the last 24 hours, newest first.",
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
