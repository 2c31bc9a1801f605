"""Outbound call endpoints: POST /calls (place a call) and POST /calls/{id}/hang-up. They live in
telephony, above calls (the list of calls, GET /calls, is calls' own view, extended here with POST)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from calls.apis import CallListApi
from calls.selectors import call_get
from calls.serializers import CallDetailSchema, call_detail
from kit.api import PublicApiView
from kit.errors import ApiError
from telephony.outbound import call_hang_up, outbound_call_request


class OutboundCallRequestSerializer(serializers.Serializer[Any]):
    """The body of POST /calls (described here; checked by telephony.outbound.outbound_call_request)."""

    agentId = serializers.UUIDField(help_text="The active agent that talks on the call.")
    phoneNumberId = serializers.UUIDField(help_text="A number claimed by the organization, the call's caller id.")
    to = serializers.CharField(help_text="The number to call, in E.164 format, for example +14155550123.")
    variables = serializers.DictField(
        child=serializers.CharField(),
        required=False,
        help_text="Per-call variables ({{name}} placeholders in the agent's prompt and greeting): string values.",
    )
    metadata = serializers.JSONField(required=False, help_text="Free JSON (at most 16 KB), stored and echoed.")


def _detail(call_id: Any, request: Request, organization: Any) -> dict[str, Any]:
    detail = call_detail(call_get(organization=organization, call_id=str(call_id)))
    if detail.get("recordingUrl") and detail["recordingUrl"].startswith("/"):
        detail["recordingUrl"] = request.build_absolute_uri(detail["recordingUrl"])
    return detail


class CallListCreateApi(CallListApi):
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
        call = outbound_call_request(
            organization=self.organization,
            agent_id=body.get("agentId"),
            phone_number_id=body.get("phoneNumberId"),
            to=body.get("to"),
            variables=body.get("variables"),
            metadata=body.get("metadata"),
        )
        return Response(_detail(call.pk, request, self.organization), status=201)


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
        call = call_get(organization=self.organization, call_id=call_id)
        call = call_hang_up(call=call)
        return Response(_detail(call.pk, request, self.organization))
