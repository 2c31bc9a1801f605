"""POST /public/v1/agents/{id}/realtime-sessions: a short-lived token for a browser voice session."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from realtime.services import PROTOCOL, realtime_session_create
from voiceagent.api import PublicApiView
from voiceagent.fields import iso

_AUDIO = inline_serializer(
    "RealtimeAudioFormat", {"encoding": serializers.CharField(), "sampleRate": serializers.IntegerField()}
)
RealtimeSessionSchema = inline_serializer(
    "RealtimeSession",
    {
        "token": serializers.CharField(),
        "expiresAt": serializers.DateTimeField(),
        "websocketUrl": serializers.CharField(),
        "protocol": inline_serializer("RealtimeProtocol", {"inputAudio": _AUDIO, "outputAudio": _AUDIO}),
    },
)


class RealtimeSessionCreateApi(PublicApiView):
    @extend_schema(
        operation_id="createRealtimeSession",
        request=None,
        responses={
            200: RealtimeSessionSchema,
            400: OpenApiResponse(description="Invalid agent ID"),
            401: OpenApiResponse(description="Missing, malformed or invalid API key"),
            404: OpenApiResponse(description="Agent not found"),
            409: OpenApiResponse(description="The agent is not active"),
            500: OpenApiResponse(description="REALTIME_WS_URL or REALTIME_TOKEN_SECRET is not configured"),
        },
        description="A session token valid 60 seconds for opening the agent's WebSocket once. No body.",
    )
    def post(self, request: Request, agent_id: str) -> Response:
        session = realtime_session_create(organization=self.organization, agent_id=agent_id)
        return Response(
            {
                "token": session.token,
                "expiresAt": iso(session.expires_at),
                "websocketUrl": session.websocket_url,
                "protocol": PROTOCOL,
            }
        )
