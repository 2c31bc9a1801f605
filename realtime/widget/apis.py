"""Widget keys (`/public/v1/agents/{id}/widget-keys`, with the API key) and widget sessions
(`POST /public/v1/widget/sessions`, with a publishable key from a page): thin views, docs/widget.md."""

from __future__ import annotations

from typing import Any

from django.utils.cache import patch_vary_headers
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from agents.selectors import agent_get
from calls.budgets.serializers import BudgetExceededSchema
from calls.webhooks.serializers import DeletedSchema
from kit.api import JsonParser, PublicApiView
from kit.client_address import client_address
from kit.errors import ApiError
from realtime.apis import RealtimeSessionSerializer, realtime_session_body
from realtime.widget import selectors, services
from realtime.widget.services import MAX_KEYS_PER_AGENT, MAX_ORIGINS_PER_KEY, ORIGIN, ORIGIN_NOT_ALLOWED

TAGS = ["Widget"]
NOT_FOUND = OpenApiResponse(description="Agent or widget key not found (or another organization's)")


class WidgetKeySchema(serializers.Serializer):
    id = serializers.UUIDField()
    key = serializers.CharField(help_text='The publishable key, "pk_" and 32 characters: put it in the page.')
    allowedOrigins = serializers.ListField(
        child=serializers.CharField(),
        help_text="The origins (scheme://host[:port]) of the pages that may open sessions with the key, "
        "as stored: lower case, without the scheme's default port.",
    )
    createdAt = serializers.DateTimeField()


class WidgetKeyCreateSerializer(serializers.Serializer):
    allowedOrigins = serializers.ListField(
        child=serializers.RegexField(ORIGIN.pattern, max_length=services.MAX_ORIGIN_CHARS),
        min_length=1,
        max_length=MAX_ORIGINS_PER_KEY,
        help_text=f"1 to {MAX_ORIGINS_PER_KEY} distinct origins, each `https://host` or `http://host`, with a "
        "port when it is not the scheme's default, and nothing else (no path, no wildcard), such as "
        '`["https://shop.example.com", "http://localhost:3000"]`. A bad one is a 400 naming it '
        "(`allowedOrigins.1`).",
    )


class WidgetSessionRequestSerializer(serializers.Serializer):
    key = serializers.RegexField(r"^pk_", help_text='The widget key ("pk_..."), as in the page\'s script tag.')
    transport = serializers.ChoiceField(
        ["websocket", "webrtc"],
        required=False,
        help_text="`websocket` (the default) or `webrtc`: the answer then also has `webrtc` (offerUrl, "
        "iceServers); the client falls back to `websocketUrl` when WebRTC fails (docs/webrtc.md).",
    )
    modality = serializers.ChoiceField(
        ["audio", "text"], required=False, help_text="`audio` (the default) or `text`: a typed session."
    )


class WidgetKeyListCreateApi(PublicApiView):
    @extend_schema(
        operation_id="listWidgetKeys",
        tags=TAGS,
        summary="List an agent's widget keys",
        description="The agent's publishable widget keys, oldest first, each with the origins that may use it "
        "(docs/widget.md).",
        responses={
            200: WidgetKeySchema(many=True),
            400: OpenApiResponse(description="Invalid agent ID"),
            404: NOT_FOUND,
        },
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = agent_get(organization=self.organization, agent_id=agent_id)
        return Response([selectors.widget_key_item(key) for key in selectors.widget_key_list(agent=agent)])

    @extend_schema(
        operation_id="createWidgetKey",
        tags=TAGS,
        summary="Create a widget key",
        request=WidgetKeyCreateSerializer,
        responses={
            201: WidgetKeySchema,
            400: OpenApiResponse(
                description="Invalid body or ID: `issues` names each bad origin (`allowedOrigins.0`): not http(s), "
                "a path, a wildcard, a user name, an origin listed twice, none or too many"
            ),
            404: NOT_FOUND,
            409: OpenApiResponse(
                description=f"TOO_MANY_WIDGET_KEYS: the agent has its maximum of {MAX_KEYS_PER_AGENT} widget keys"
            ),
        },
        description="A publishable key (`pk_...`) for the embeddable widget (`/static/widget/v1/widget.js`): it can "
        "do one thing, open a realtime session with this agent (POST /widget/sessions), only from a page whose "
        "`Origin` is listed, within the widget rate limits and the organization's live-call cap and budgets. "
        "It is not a secret: it goes in the page. An API key never does.",
    )
    def post(self, request: Request, agent_id: str) -> Response:
        key = services.widget_key_create(organization=self.organization, agent_id=agent_id, body=request.data)
        return Response(selectors.widget_key_item(key), status=201)


class WidgetKeyDetailApi(PublicApiView):
    @extend_schema(
        operation_id="getWidgetKey",
        tags=TAGS,
        summary="Get a widget key",
        description="One widget key of the agent, with its allowed origins.",
        responses={200: WidgetKeySchema, 400: OpenApiResponse(description="Invalid ID"), 404: NOT_FOUND},
    )
    def get(self, request: Request, agent_id: str, key_id: str) -> Response:
        key = selectors.widget_key_get(organization=self.organization, agent_id=agent_id, key_id=key_id)
        return Response(selectors.widget_key_item(key))

    @extend_schema(
        operation_id="deleteWidgetKey",
        tags=TAGS,
        summary="Delete a widget key",
        description="Deletes the key: pages that use it can open no new session (401); calls already live go on.",
        responses={200: DeletedSchema, 400: OpenApiResponse(description="Invalid ID"), 404: NOT_FOUND},
    )
    def delete(self, request: Request, agent_id: str, key_id: str) -> Response:
        deleted = services.widget_key_delete(organization=self.organization, agent_id=agent_id, key_id=key_id)
        return Response({"id": str(deleted)})


class PlainTextJsonParser(JsonParser):
    """A JSON body sent as text/plain: a page's request that needs no CORS preflight (one round trip less
    before the call starts; the widget sends its session request so)."""

    media_type = "text/plain"


PREFLIGHT_MAX_AGE_SECONDS = 600


class WidgetSessionCreateApi(PublicApiView):
    """No API key: the publishable key is in the body, the page's Origin must be among the key's."""

    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]
    parser_classes = [JsonParser, PlainTextJsonParser]

    @extend_schema(
        operation_id="createWidgetSession",
        tags=TAGS,
        summary="Start a session from a web page (widget key)",
        description="What the widget calls from a page, with no API key: the body names a widget key (`pk_...`) "
        "and the browser's `Origin` header must be one of the key's `allowedOrigins`. Answers the same session "
        "as POST /agents/{id}/realtime-sessions for the key's agent (`websocketUrl`, and `webrtc` when asked "
        "for), within the widget rate limits (per key and per client address, WIDGET_* settings) and the "
        'organization\'s live-call cap and budgets. The call\'s `metadata` is `{"widget": {"keyId", '
        '"origin"}}`. CORS: answered, preflight included, with `Access-Control-Allow-Origin` for listed origins '
        "only; the body may also be sent as `text/plain` (the same JSON), which needs no preflight.",
        request={"application/json": WidgetSessionRequestSerializer},
        responses={
            200: RealtimeSessionSerializer,
            400: OpenApiResponse(
                description="Invalid body: no `key`, a bad `transport` or `modality`, or `variables`, `metadata` or "
                "`events` (a page may not give them)"
            ),
            401: OpenApiResponse(description="INVALID_WIDGET_KEY: no such key (or it was deleted)"),
            402: OpenApiResponse(
                BudgetExceededSchema,
                description="BUDGET_EXCEEDED: a `block` budget of the organization or the agent is spent",
            ),
            403: OpenApiResponse(
                description="ORIGIN_NOT_ALLOWED: the request has no `Origin` header, or the key does not list it"
            ),
            409: OpenApiResponse(description="The key's agent is not active"),
            429: OpenApiResponse(
                description="RATE_LIMITED: too many widget sessions with this key or from this address (`limitedBy`: "
                "`widget_key` or `widget_address`), or CONCURRENT_CALL_LIMIT_EXCEEDED (the organization's live "
                "calls); `Retry-After` says when to try again"
            ),
            500: OpenApiResponse(description="Realtime sessions are not configured on this server"),
        },
    )
    def post(self, request: Request) -> Response:
        created = services.widget_session_create(
            body=request.data, origin=request.META.get("HTTP_ORIGIN"), address=client_address(request)
        )
        return Response(realtime_session_body(created.session))

    def options(self, request: Any, *args: Any, **kwargs: Any) -> Response:
        """The CORS preflight: allowed for an origin some widget key lists (the preflight carries no key)."""
        origin = services.origin_normalize(request.META.get("HTTP_ORIGIN") or "")[0]
        if origin is None or not selectors.origin_listed(origin=origin):
            raise ApiError.forbidden(
                "No widget key lists this origin: a widget session is opened only from a page whose origin the "
                "key lists.",
                code=ORIGIN_NOT_ALLOWED,
            )
        response = Response(status=204)
        response["Access-Control-Allow-Methods"] = "POST, OPTIONS"
        response["Access-Control-Allow-Headers"] = "Content-Type"
        response["Access-Control-Max-Age"] = str(PREFLIGHT_MAX_AGE_SECONDS)
        return response

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        """Access-Control-Allow-Origin for a listed origin: a session (or preflight) is only ever granted to
        one; a refusal is readable by a page whose origin some key lists (its 429's Retry-After too), never
        the ORIGIN_NOT_ALLOWED one."""
        response = super().finalize_response(request, response, *args, **kwargs)
        patch_vary_headers(response, ["Origin"])
        origin = request.META.get("HTTP_ORIGIN")
        if origin and _cors_allowed(origin, response):
            response["Access-Control-Allow-Origin"] = origin
            response["Access-Control-Expose-Headers"] = "Retry-After"
        return response


def _cors_allowed(origin: str, response: Any) -> bool:
    if response.status_code < 400:
        return True
    data = getattr(response, "data", None)
    if isinstance(data, dict) and data.get("code") == ORIGIN_NOT_ALLOWED:
        return False
    normalized = services.origin_normalize(origin)[0]
    return normalized is not None and selectors.origin_listed(origin=normalized)
