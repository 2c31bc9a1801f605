"""Agents REST endpoints: thin views that parse, call a service and render. An agent's body carries its
phone number assignments and its list item its numbers, documents and calls of today, so the endpoints
live on the api floor (api/__init__.py), above every app they need (the agents app sits below telephony,
knowledge and calls). The writes are the agents app's (agents/services.py), the dashboard's too."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from agents import schema as _schema  # noqa: F401 - registers the OpenAPI description of agent bodies
from agents import services
from agents.serializers import (
    AgentIdSerializer,
    AgentListItemSerializer,
    AgentPatchSerializer,
    AgentUpdatedSerializer,
    AgentWriteSerializer,
)
from api.agents import selectors
from kit.api import PublicApiView, rendered_json_response
from kit.fields import iso, parse

TAGS = ["Agents"]
RULES = (
    "\n\nRules checked on the resulting agent: `name` is required; promptType `static` (the default) needs "
    "non-blank `instructions`; promptType `dynamic` needs agentType `webhook` and a `serverUrl`; greetingType "
    "`static` needs a non-blank `staticGreeting` and greetingType `dynamic` needs promptType `dynamic`; only "
    "webhook agents have a `serverUrl`. Send `phoneNumberAssignments` or the legacy `phoneNumberIds`, not both."
)
FEATURE_NOT_AVAILABLE = OpenApiResponse(
    description="FEATURE_NOT_AVAILABLE: a new non-`none` ambientSound on a plan without ambient sounds"
)
PHONE_CONFLICTS = "PHONE_NUMBER_NOT_CLAIMED or PHONE_NUMBER_LIMIT_EXCEEDED (at most 25 numbers per agent)"


class AgentListCreateApi(PublicApiView):
    @extend_schema(
        operation_id="listAgents",
        tags=TAGS,
        summary="List agents",
        description="Every agent of the organization, oldest first, with its settings and today's figures "
        "(`callsToday`, `successRate`). Use an agent's `updatedAt` as `expectedUpdatedAt` when you PATCH it.",
        responses={200: AgentListItemSerializer(many=True)},
    )
    def get(self, request: Request) -> HttpResponse:
        return rendered_json_response(request, selectors.agent_list(organization=self.organization))

    @extend_schema(
        operation_id="createAgent",
        tags=TAGS,
        summary="Create an agent",
        description="Creates an agent and answers its `id`. A new agent is always a `draft`, whatever `status` "
        "says; omitted fields take their defaults (agentType `webhook`, language `en-US`, voiceName `eve`, "
        "promptType `static`, greetingType `none`, ambientSoundVolume 0.25, ...)." + RULES,
        request=AgentWriteSerializer,
        responses={
            200: AgentIdSerializer,
            403: FEATURE_NOT_AVAILABLE,
            404: OpenApiResponse(description="PHONE_NUMBER_NOT_FOUND: an assigned number is not the organization's"),
            409: OpenApiResponse(description=PHONE_CONFLICTS),
        },
    )
    def post(self, request: Request) -> Response:
        data = parse(AgentWriteSerializer, request.data)
        agent = services.agent_create(organization=self.organization, data=data)
        return Response({"id": str(agent.id)})


class AgentDetailApi(PublicApiView):
    @extend_schema(
        operation_id="getAgent",
        tags=TAGS,
        summary="Get an agent",
        description="One agent, exactly as it appears in the agent list.",
        responses={200: AgentListItemSerializer},
    )
    def get(self, request: Request, agent_id: str) -> Response:
        return Response(selectors.agent_detail(organization=self.organization, agent_id=agent_id))

    @extend_schema(
        operation_id="replaceAgent",
        tags=TAGS,
        summary="Replace an agent",
        description="Replaces the agent's settings: omitted fields take their defaults, as on creation. An "
        "omitted `status` and omitted phone assignments are kept. Answers the new `updatedAt`. `status` "
        "`active` counts against the plan's active-agent allowance." + RULES,
        request=AgentWriteSerializer,
        responses={
            200: AgentUpdatedSerializer,
            403: FEATURE_NOT_AVAILABLE,
            404: OpenApiResponse(description="Agent not found, or PHONE_NUMBER_NOT_FOUND"),
            409: OpenApiResponse(description="AGENT_LIMIT_EXCEEDED (with `maxAgents`), " + PHONE_CONFLICTS),
        },
    )
    def put(self, request: Request, agent_id: str) -> Response:
        data = parse(AgentWriteSerializer, request.data)
        agent = services.agent_replace(organization=self.organization, agent_id=agent_id, data=data)
        return Response({"id": str(agent.id), "updatedAt": iso(agent.updated_at)})

    @extend_schema(
        operation_id="updateAgent",
        tags=TAGS,
        summary="Update an agent",
        description="Changes the given fields and keeps every other one. `expectedUpdatedAt` must be the "
        "agent's current `updatedAt` (from the list, GET, or the previous PUT or PATCH): if the agent changed "
        "since, the answer is 409 with the current `updatedAt`. Answers the new `updatedAt`, so PATCHes can be "
        "chained." + RULES,
        request=AgentPatchSerializer,
        responses={
            200: AgentUpdatedSerializer,
            403: FEATURE_NOT_AVAILABLE,
            404: OpenApiResponse(description="Agent not found, or PHONE_NUMBER_NOT_FOUND"),
            409: OpenApiResponse(
                description="Stale `expectedUpdatedAt`, AGENT_LIMIT_EXCEEDED (with `maxAgents`), " + PHONE_CONFLICTS
            ),
        },
    )
    def patch(self, request: Request, agent_id: str) -> Response:
        data = parse(AgentPatchSerializer, request.data)
        agent = services.agent_patch(organization=self.organization, agent_id=agent_id, data=data)
        return Response({"id": str(agent.id), "updatedAt": iso(agent.updated_at)})

    @extend_schema(
        operation_id="deleteAgent",
        tags=TAGS,
        summary="Delete an agent",
        description="Deletes the agent with its custom tools, MCP tool selections, knowledge documents and "
        "runtime logs. Its phone numbers are unassigned and stay claimed by the organization; its calls stay in "
        "the call history with `agentId` null. Its finished call batches are deleted with it; one still "
        "scheduled, running or paused refuses the deletion (409 AGENT_HAS_CALL_BATCHES) until it is canceled.",
        responses={
            200: AgentIdSerializer,
            409: OpenApiResponse(description="The agent has an unfinished call batch (AGENT_HAS_CALL_BATCHES)"),
        },
    )
    def delete(self, request: Request, agent_id: str) -> Response:
        deleted = services.agent_delete(organization=self.organization, agent_id=agent_id)
        return Response({"id": str(deleted)})
