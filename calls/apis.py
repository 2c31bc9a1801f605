"""Calls and agent-logs REST endpoints: thin views that parse the query, read, and render. Placing an
outbound call (POST /calls) and hanging one up (POST /calls/{id}/hang-up) go through the operations
telephony registers in calls/placing.py."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.selectors import agent_get
from calls import placing, selectors, services
from calls.budgets.serializers import BudgetExceededSchema
from calls.recordings import recording_response, signature_valid
from calls.serializers import (
    AgentLogPageSchema,
    AgentLogQuery,
    CallDetailSchema,
    CallListQuery,
    CallSummarySchema,
    OutboundCallRequestSerializer,
    agent_log_item,
    call_detail,
    call_summary_item,
)
from kit.api import PublicApiView
from kit.errors import ApiError
from kit.fields import parse

BAD_QUERY = OpenApiResponse(description="Invalid query parameter or ID; `issues` lists the problems")


def _detail(request: Request, organization: Any, call_id: Any) -> dict[str, Any]:
    detail = call_detail(selectors.call_get(organization=organization, call_id=str(call_id)))
    if detail["recordingUrl"] and detail["recordingUrl"].startswith("/"):  # no PUBLIC_BASE_URL: this host
        detail["recordingUrl"] = request.build_absolute_uri(detail["recordingUrl"])
    return detail


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

    @extend_schema(
        operation_id="createCall",
        tags=["Calls"],
        summary="Place an outbound call",
        request=OutboundCallRequestSerializer,
        responses={
            201: CallDetailSchema,
            400: OpenApiResponse(
                description="Invalid body: `to` not E.164, blocked or premium-rate; PHONE_NUMBER_NOT_CLAIMED; "
                "AGENT_NOT_ACTIVE; TELEPHONY_ACCOUNT_MISSING; bad variables or metadata"
            ),
            402: OpenApiResponse(
                BudgetExceededSchema,
                description="BUDGET_EXCEEDED: a `block` budget whose scope holds the call (the organization, the "
                "agent, a variable's value) is spent in its period; the body names it (`budgetId`)",
            ),
            403: OpenApiResponse(description="OUTBOUND_NOT_ALLOWED: the plan places no outbound calls"),
            404: OpenApiResponse(description="Agent not found"),
            503: OpenApiResponse(
                description="TELEPHONY_NOT_CONFIGURED: this service has no PUBLIC_BASE_URL or REALTIME_TOKEN_SECRET"
            ),
        },
        description="Queues a call from one of the organization's numbers to `to`, talked by the agent: the "
        "answer is the call (`status` `queued`, `direction` `outbound`). It is placed within the plan's "
        "`max_outbound_calls` (more wait `queued`), then goes `ringing`, `active` once answered, and ends "
        "`completed`, or `no-answer`, `busy`, `canceled` or `failed` (with its `endedReason`) when never answered.",
    )
    def post(self, request: Request) -> Response:
        body = request.data
        if not isinstance(body, dict):
            raise ApiError.invalid("The request body must be a JSON object.")
        call = placing.call_place(
            organization=self.organization,
            agent_id=body.get("agentId"),
            phone_number_id=body.get("phoneNumberId"),
            to=body.get("to"),
            variables=body.get("variables"),
            metadata=body.get("metadata"),
        )
        return Response(_detail(request, self.organization, call.pk), status=201)


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
        return Response(_detail(request, self.organization, call_id))


class CallHangUpApi(PublicApiView):
    @extend_schema(
        operation_id="hangUpCall",
        tags=["Calls"],
        summary="Hang up or cancel a call",
        request=None,
        responses={
            200: CallDetailSchema,
            404: OpenApiResponse(description="Call not found"),
            409: OpenApiResponse(description="CALL_ENDED: the call has already ended"),
        },
        description="Ends a live call, phone or browser (it ends a moment later with `endedReason` "
        "`agent-ended-call`); cancels a `queued` or `ringing` outbound call at once (`canceled`, the carrier "
        "told). Answers the call as it is now.",
    )
    def post(self, request: Request, call_id: str) -> Response:
        call = selectors.call_get(organization=self.organization, call_id=call_id)
        call = placing.call_hang_up(call=call)
        return Response(_detail(request, self.organization, call.pk))


# Range is described in words, not declared as a header parameter: Schemathesis (ignored_auth) mistakes the
# configured API key for generated data on operations with header parameters.
RANGE_NOTE = (
    " Supports one HTTP byte range (`Range: bytes=0-1023`, `bytes=1024-` or `bytes=-500`): 206 with "
    "Content-Range; a range that is malformed, several ranges or beyond the end: 416."
)
AUDIO = {
    (200, "audio/ogg"): OpenApiResponse(OpenApiTypes.BINARY, description="The whole recording (Ogg/Opus, stereo)"),
    (206, "audio/ogg"): OpenApiResponse(OpenApiTypes.BINARY, description="The requested byte range"),
}
NO_RECORDING = OpenApiResponse(description="Call not found, or it has no recording")
BAD_RANGE = OpenApiResponse(description="Range not satisfiable")


class CallRecordingApi(PublicApiView):
    @extend_schema(
        operation_id="getCallRecording",
        tags=["Calls"],
        summary="Download a call's recording",
        responses={**AUDIO, 404: NO_RECORDING, 416: BAD_RANGE},
        description="The call's recording as Ogg/Opus, stereo: the caller on the left channel, the agent on the "
        "right as the caller heard it (cut at barge-in). Recorded for agents with `recordingEnabled`, stored once "
        "the call has ended (a few seconds later)." + RANGE_NOTE,
    )
    def get(self, request: Request, call_id: str) -> HttpResponseBase:
        call = selectors.call_get(organization=self.organization, call_id=call_id)
        return recording_response(request._request, call)

    @extend_schema(
        operation_id="deleteCallRecording",
        tags=["Calls"],
        summary="Delete a call's recording",
        request=None,
        responses={204: OpenApiResponse(description="Deleted"), 404: NO_RECORDING},
        description="Removes the recording from the storage; the call keeps its transcript, `recordingUrl` is null.",
    )
    def delete(self, request: Request, call_id: str) -> Response:
        call = selectors.call_get(organization=self.organization, call_id=call_id)
        services.call_recording_delete(call=call)
        return Response(status=204)


class SignedRecordingApi(APIView):
    """recordingUrl: no API key, the URL's signature and expiry are the credential."""

    authentication_classes: list[type] = []
    permission_classes: list[type] = []

    @extend_schema(
        operation_id="getSignedRecording",
        tags=["Calls"],
        summary="A call's recording at its signed URL",
        parameters=[
            OpenApiParameter("expires", OpenApiTypes.STR, required=True, description="Unix time the URL expires."),
            OpenApiParameter("signature", OpenApiTypes.STR, required=True, description="The URL's signature."),
        ],
        responses={
            **AUDIO,
            403: OpenApiResponse(description="The URL expired or its signature is wrong"),
            404: NO_RECORDING,
            416: BAD_RANGE,
        },
        description="The `recordingUrl` of a call detail: the recording (as GET /calls/{callId}/recording) without "
        "an API key, until the URL expires (RECORDING_URL_TTL_SECONDS after the call detail was read)." + RANGE_NOTE,
    )
    def get(self, request: Request, call_id: str) -> HttpResponseBase:
        call = selectors.call_with_recording(call_id=call_id)
        expires, signature = request.query_params.get("expires", ""), request.query_params.get("signature", "")
        if not signature_valid(call, expires=expires, signature=signature):
            raise ApiError.forbidden("This recording link has expired or is not valid", code="RECORDING_LINK_INVALID")
        return recording_response(request._request, call)


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
