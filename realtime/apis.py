"""POST /public/v1/agents/{id}/realtime-sessions: a short-lived token for a browser voice session."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from calls.budgets.serializers import BudgetExceededSchema
from calls.models import CallModality
from calls.variables import MAX_METADATA_BYTES, MAX_NAME_LENGTH, MAX_VALUE_LENGTH, MAX_VARIABLES, NAME
from kit.api import PublicApiView
from kit.errors import ApiError
from kit.fields import iso
from realtime.engine.audio import IN_RATE, OUT_RATE
from realtime.services import PROTOCOL, TRANSPORTS, RealtimeSession, realtime_session_create
from realtime.webrtc.ice import client_ice_servers


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


class IceServerSerializer(serializers.Serializer):
    urls = serializers.ListField(child=serializers.CharField(), help_text="stun:, turn: or turns: URLs.")
    username = serializers.CharField(
        required=False, help_text='TURN only: "<unix expiry>:<random id>" (coturn use-auth-secret).'
    )
    credential = serializers.CharField(required=False, help_text="TURN only: the time-limited password for `username`.")


class RealtimeWebrtcSerializer(serializers.Serializer):
    offerUrl = serializers.CharField(
        help_text="POST the client's SDP offer here (`application/sdp`, or JSON `{type, sdp}`): the answer comes "
        "back (201); PATCH sends trickle ICE candidates, DELETE ends the session. Carries the token; no API key "
        "(docs/webrtc.md)."
    )
    iceServers = IceServerSerializer(
        many=True,
        help_text="Give these to the client's RTCPeerConnection (`new RTCPeerConnection({iceServers})`); empty "
        "when the server configures no STUN or TURN server.",
    )


class RealtimeSessionSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="Single-use session token, valid 60 seconds for connecting.")
    expiresAt = serializers.DateTimeField(help_text="When the token stops being accepted for a new connection.")
    websocketUrl = serializers.CharField(help_text="The agent's WebSocket address, with the token as `token`.")
    protocol = RealtimeProtocolSerializer()
    webrtc = RealtimeWebrtcSerializer(
        required=False,
        help_text='With `"transport": "webrtc"`: where the client sends its WebRTC offer. The same token opens '
        "either the socket or the WebRTC session, whichever comes first (a client that cannot do WebRTC falls "
        "back to `websocketUrl`).",
    )


@extend_schema_field(
    {
        "type": "object",
        "propertyNames": {"type": "string", "pattern": NAME.pattern, "maxLength": MAX_NAME_LENGTH},
        "additionalProperties": {"type": "string", "maxLength": MAX_VALUE_LENGTH},
        "maxProperties": MAX_VARIABLES,
    }
)
class VariablesField(serializers.JSONField):
    """Documentation of `variables` (checked by calls.variables.variables_clean)."""


class RealtimeSessionRequestSerializer(serializers.Serializer):
    variables = VariablesField(
        required=False,
        help_text=f"Per-call variables: at most {MAX_VARIABLES} string values of at most {MAX_VALUE_LENGTH} "
        "characters, filling `{{name}}` placeholders in the agent's identity, instructions, static greeting and "
        "dynamic-prompt reply (docs/guides/variables.md). Kept by the server with the token, never in it.",
    )
    metadata = serializers.JSONField(
        required=False,
        help_text=f"Free JSON of yours (at most {MAX_METADATA_BYTES // 1024} KB): stored on the call and echoed in "
        "its detail and events, never shown to the model.",
    )
    modality = serializers.ChoiceField(
        choices=CallModality.choices,
        required=False,
        help_text="`audio` (the default): a voice session. `text`: a typed session, the same agent without audio: "
        "the socket takes `input_text` messages and answers with `transcript` messages, no `output_audio` "
        "(docs/guides/typed-sessions.md). The call record's `modality` says which.",
    )
    transport = serializers.ChoiceField(
        choices=list(TRANSPORTS),
        required=False,
        help_text="`websocket` (the default): the client connects to `websocketUrl`. `webrtc`: the answer also has "
        "`webrtc` (offerUrl, iceServers) for a browser RTCPeerConnection, audio as Opus on media tracks with the "
        "browser's echo cancellation, and the same JSON messages on a data channel named `events` "
        "(docs/webrtc.md). Not with modality `text`.",
    )
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=["tool"]),
        required=False,
        help_text='Extra events the socket sends: `["tool"]` for `tool.call` and `tool.result` messages (name, '
        "arguments, result, duration) as the agent's tools run (docs/reference/realtime-protocol.md).",
    )


class RealtimeSessionCreateApi(PublicApiView):
    @extend_schema(
        operation_id="createRealtimeSession",
        tags=["Realtime"],
        summary="Start a realtime voice session",
        description="Issues a short-lived token for one browser or app voice session with an active agent. "
        "Call it from your backend with the API key, hand `websocketUrl` to the client, and let the client "
        "connect within 60 seconds; the client never sees the API key. The body is optional: `variables` and "
        '`metadata` for the call, `modality` (`text` for a typed session), `events` (`["tool"]`) and `transport` '
        "(`webrtc`: the answer also has `webrtc.offerUrl` and `webrtc.iceServers`, docs/webrtc.md).",
        request=RealtimeSessionRequestSerializer,
        responses={
            200: RealtimeSessionSerializer,
            400: OpenApiResponse(
                description="Invalid variables, metadata, modality, events or transport (the message names what is "
                "wrong)"
            ),
            402: OpenApiResponse(
                BudgetExceededSchema,
                description="BUDGET_EXCEEDED: a `block` budget whose scope holds the session (the organization, "
                "the agent, a variable's value) is spent in its period; the body names it (`budgetId`)",
            ),
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
        body = request.data  # an absent body is {}; a JSON null, list, string or number is refused
        if not isinstance(body, dict):
            raise ApiError.invalid("The request body must be a JSON object.")
        session = realtime_session_create(
            organization=self.organization,
            agent_id=agent_id,
            variables=body.get("variables"),
            metadata=body.get("metadata"),
            modality=body.get("modality"),
            events=body.get("events"),
            transport=body.get("transport"),
        )
        return Response(realtime_session_body(session))


def realtime_session_body(session: RealtimeSession) -> dict[str, Any]:
    """The answer of a session request, the same from every endpoint that opens one (realtime-sessions,
    widget/sessions)."""
    body: dict[str, Any] = {
        "token": session.token,
        "expiresAt": iso(session.expires_at),
        "websocketUrl": session.websocket_url,
        "protocol": PROTOCOL,
    }
    if session.offer_url is not None:  # transport webrtc: TURN credentials are made for this answer
        body["webrtc"] = {"offerUrl": session.offer_url, "iceServers": client_ice_servers()}
    return body
