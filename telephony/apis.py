"""Phone number REST endpoints: the organization's numbers and their assignment to agents."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from agents.selectors import agent_get
from kit.api import PublicApiView
from kit.fields import parse
from kit.validation import parse_uuid
from telephony import selectors
from telephony.serializers import (
    AssignedNumberSerializer,
    AssignRequestSerializer,
    AssignResponseSerializer,
    PhoneNumberSerializer,
)
from telephony.services.numbers import phone_number_assign, phone_number_unassign

TAGS = ["Phone numbers"]


class PhoneNumberListApi(PublicApiView):
    @extend_schema(
        operation_id="listPhoneNumbers",
        tags=TAGS,
        summary="List phone numbers",
        description="The organization's phone numbers (claimed in the dashboard) with the agent each is "
        "assigned to; `assignedAgentId` null means the number is free to assign.",
        responses={200: PhoneNumberSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        return Response(selectors.phone_number_list(organization=self.organization))


class AgentPhoneNumbersApi(PublicApiView):
    @extend_schema(
        operation_id="listAgentPhoneNumbers",
        tags=TAGS,
        summary="List an agent's phone numbers",
        description="The numbers assigned to the agent, earliest assignment first, with each number's "
        "handoff destination for transfer_call.",
        responses={200: AssignedNumberSerializer(many=True), 404: OpenApiResponse(description="Agent not found")},
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = agent_get(organization=self.organization, agent_id=agent_id)
        return Response(selectors.agent_phone_numbers(agent=agent))

    @extend_schema(
        operation_id="assignPhoneNumber",
        tags=TAGS,
        summary="Assign a phone number to an agent",
        request=AssignRequestSerializer,
        responses={
            201: AssignResponseSerializer,
            404: OpenApiResponse(description="Agent not found, or PHONE_NUMBER_NOT_FOUND"),
            409: OpenApiResponse(
                description="PHONE_NUMBER_NOT_CLAIMED, or PHONE_NUMBER_LIMIT_EXCEEDED (at most 25 numbers per agent)"
            ),
        },
        description="Assigns a claimed number to the agent, with an optional handoff destination for "
        "transfer_call on calls to that number. A number assigned to another agent moves to this one; "
        "assigning a number the agent already holds updates its handoffPhoneNumber.",
    )
    def post(self, request: Request, agent_id: str) -> Response:
        agent = agent_get(organization=self.organization, agent_id=agent_id)
        data = parse(AssignRequestSerializer, request.data)
        number = phone_number_assign(organization=self.organization, agent=agent, **data)
        return Response({"phoneNumberId": str(number.id)}, status=201)


class AgentPhoneNumberDetailApi(PublicApiView):
    @extend_schema(
        operation_id="unassignPhoneNumber",
        tags=TAGS,
        summary="Unassign a phone number from an agent",
        description="The number stays claimed by the organization and can be assigned again.",
        responses={
            200: AssignResponseSerializer,
            404: OpenApiResponse(description="Agent or number not found, or the number is not assigned to this agent"),
        },
    )
    def delete(self, request: Request, agent_id: str, phone_number_id: str) -> Response:
        agent = agent_get(organization=self.organization, agent_id=agent_id)
        number_id = parse_uuid(phone_number_id, "phoneNumber")
        number = phone_number_unassign(organization=self.organization, agent=agent, phone_number_id=number_id)
        return Response({"phoneNumberId": str(number.id)})
