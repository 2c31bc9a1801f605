"""POST /public/v1/agents/{id}/realtime-sessions: a short-lived token for a browser voice session."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from kit.api import PublicApiView
from kit.fields import iso
from realtime.engine.audio import IN_RATE, OUT_RATE
from realtime.services import PROTOCOL, realtime_session_create


# OpenAPI descriptions of the response (one class per shape: a serializer field instance cannot be shared
# by two parents, which is how the protocol once lost its inputAudio).
class RealtimeInputAudioSerializer(serializers.Serializer):
    encoding = serializers.ChoiceField(["pcm16"], help_text="Mono 16-bit little-endian PCM, base64 in messages.")
    sampleRate = serializers.ChoiceField([IN_RATE], help_text="Samples per second the client sends.")


class RealtimeOutputAudioSerializer(serializers.Serializer):
    encoding = serializers.ChoiceField(["pcm16"], help_text="Mono 16-bit little-endian PCM, base64 in messages.")
    sampleRate = serializers.ChoiceField([OUT_RATE], help_text="Samples per second the server sends.")


class RealtimeProtocolSerializer(serializers.Serializer):
    inputAudio = RealtimeInputAudioSerializer(help_text="Audio the client sends in `input_audio` messages.")
    outputAudio = RealtimeOutputAudioSerializer(help_text="Audio the server sends in `output_audio` messages.")


class RealtimeSessionSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="Single-use session token, valid 60 seconds for connecting.")
    expiresAt = serializers.DateTimeField(help_text="When the token stops being accepted for a new connection.")
    websocketUrl = serializers.CharField(help_text="The agent's WebSocket address, with the token as `token`.")
    protocol = RealtimeProtocolSerializer()


class RealtimeSessionCreateApi(PublicApiView):
    @extend_schema(
        operation_id="createRealtimeSession",
        tags=["Realtime"],
        summary="Start a realtime voice session",
        description="Issues a short-lived token for one browser or app voice session with an active agent. "
        "Call it from your backend with the API key, hand `websocketUrl` to the client, and let the client "
        "connect within 60 seconds; the client never sees the API key. No request body.",
        request=None,
        responses={
            200: RealtimeSessionSerializer,
            404: OpenApiResponse(description="Agent not found"),
            409: OpenApiResponse(description="The agent is not active"),
            429: OpenApiResponse(
                description="Over the API key's rate limit (`RATE_LIMITED`), or the organization holds its "
                "plan's concurrent calls (`CONCURRENT_CALL_LIMIT_EXCEEDED`, with `maxConcurrentCalls`); "
                "`Retry-After` says when to try again"
            ),
            500: OpenApiResponse(
                description="Realtime sessions are not configured on this server "
                "(REALTIME_WS_URL or REALTIME_TOKEN_SECRET)"
            ),
        },
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
