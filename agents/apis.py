"""Agents REST endpoints: thin views that parse, call a service and render."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from agents import selectors, services
from agents.serializers import (
    AgentIdSerializer,
    AgentListItemSerializer,
    AgentPatchSerializer,
    AgentWriteSerializer,
)
from voiceagent.api import PublicApiView
from voiceagent.fields import parse

ERRORS = {
    400: OpenApiResponse(description="Invalid body or agent ID; `issues` lists the fields"),
    401: OpenApiResponse(description="Missing, malformed or invalid API key"),
}


class AgentListCreateApi(PublicApiView):
    @extend_schema(operation_id="listAgents", responses={200: AgentListItemSerializer(many=True), **ERRORS})
    def get(self, request: Request) -> Response:
        return Response(selectors.agent_list(organization=self.organization))

    @extend_schema(
        operation_id="createAgent",
        request=AgentWriteSerializer,
        responses={
            200: AgentIdSerializer,
            403: OpenApiResponse(description="FEATURE_NOT_AVAILABLE (ambient sound on this plan)"),
            404: OpenApiResponse(description="PHONE_NUMBER_NOT_FOUND"),
            409: OpenApiResponse(description="PHONE_NUMBER_NOT_CLAIMED or PHONE_NUMBER_LIMIT_EXCEEDED"),
            **ERRORS,
        },
        description="Creates an agent. A new agent is always a draft, whatever `status` says.",
    )
    def post(self, request: Request) -> Response:
        data = parse(AgentWriteSerializer, request.data)
        agent = services.agent_create(organization=self.organization, data=data)
        return Response({"id": str(agent.id)})


class AgentDetailApi(PublicApiView):
    @extend_schema(
        operation_id="replaceAgent",
        request=AgentWriteSerializer,
        responses={
            200: AgentIdSerializer,
            403: OpenApiResponse(description="FEATURE_NOT_AVAILABLE"),
            404: OpenApiResponse(description="Agent not found, or PHONE_NUMBER_NOT_FOUND"),
            409: OpenApiResponse(description="AGENT_LIMIT_EXCEEDED (with maxAgents), PHONE_NUMBER_NOT_CLAIMED, ..."),
            **ERRORS,
        },
        description="Replaces the agent. Omitted fields take their defaults; omitted `status` and phone "
        "assignments are kept.",
    )
    def put(self, request: Request, agent_id: str) -> Response:
        data = parse(AgentWriteSerializer, request.data)
        agent = services.agent_replace(organization=self.organization, agent_id=agent_id, data=data)
        return Response({"id": str(agent.id)})

    @extend_schema(
        operation_id="updateAgent",
        request=AgentPatchSerializer,
        responses={
            200: AgentIdSerializer,
            403: OpenApiResponse(description="FEATURE_NOT_AVAILABLE"),
            404: OpenApiResponse(description="Agent not found, or PHONE_NUMBER_NOT_FOUND"),
            409: OpenApiResponse(description="Stale expectedUpdatedAt, AGENT_LIMIT_EXCEEDED, ..."),
            **ERRORS,
        },
        description="Updates the given fields; `expectedUpdatedAt` (the agent's current `updatedAt`) is required.",
    )
    def patch(self, request: Request, agent_id: str) -> Response:
        data = parse(AgentPatchSerializer, request.data)
        agent = services.agent_patch(organization=self.organization, agent_id=agent_id, data=data)
        return Response({"id": str(agent.id)})
