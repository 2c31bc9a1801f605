"""REST for agent tests (docs/guides/agent-tests.md): thin views over selectors.py and services.py."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from agents.selectors import agent_get
from kit.api import PublicApiView
from kit.errors import ApiError
from kit.fields import parse
from realtime.agent_tests import schema as _schema  # noqa: F401 - registers the OpenAPI description of test bodies
from realtime.agent_tests import selectors, services
from realtime.agent_tests.serializers import (
    AgentTestDeletedSchema,
    AgentTestListQuery,
    AgentTestPatchSerializer,
    AgentTestSchema,
    AgentTestWriteSerializer,
)

TAGS = ["Agent tests"]
INVALID = OpenApiResponse(
    description="Invalid body or ID (`issues` names the place, e.g. `toolMocks.0.tool`): an unknown tool in a mock "
    "or an expected tool call, an invalid replyMatches regular expression, a reply test without turns, a mock "
    "with both or neither of result and error, ..."
)
NOT_FOUND = OpenApiResponse(description="Agent or test not found (or another organization's)")


def _body(request: Request) -> dict[str, Any]:
    if not isinstance(request.data, dict):
        raise ApiError.invalid("The request body must be a JSON object.")
    return dict(request.data)


class AgentTestListCreateApi(PublicApiView):
    @extend_schema(
        operation_id="listAgentTests",
        tags=TAGS,
        summary="List an agent's tests",
        parameters=[AgentTestListQuery],
        responses={200: AgentTestSchema(many=True), 400: INVALID, 404: NOT_FOUND},
        description="The agent's tests, oldest first (the order a run takes them in). Unknown query parameters "
        "are ignored.",
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = agent_get(organization=self.organization, agent_id=agent_id)
        query = parse(AgentTestListQuery, request.query_params.dict())
        tests = selectors.agent_test_page(
            agent=agent, limit=query["limit"], offset=query["offset"], tag=query.get("tag")
        )
        return Response([selectors.agent_test_item(test) for test in tests])

    @extend_schema(
        operation_id="createAgentTest",
        tags=TAGS,
        summary="Create an agent test",
        request=AgentTestWriteSerializer,
        responses={201: AgentTestSchema, 400: INVALID, 404: NOT_FOUND},
        description="Creates a test of the agent and answers it. Runs: POST /agents/{id}/test-runs.",
    )
    def post(self, request: Request, agent_id: str) -> Response:
        agent = agent_get(organization=self.organization, agent_id=agent_id)  # 404 before the body's rules
        test = services.agent_test_create_for(agent=agent, body=_body(request))
        return Response(selectors.agent_test_item(test), status=201)


class AgentTestDetailApi(PublicApiView):
    @extend_schema(
        operation_id="getAgentTest",
        tags=TAGS,
        summary="Get an agent test",
        description="One test of the agent, as stored (the JSON parts in the shapes the API takes).",
        responses={200: AgentTestSchema, 400: INVALID, 404: NOT_FOUND},
    )
    def get(self, request: Request, agent_id: str, test_id: str) -> Response:
        agent = agent_get(organization=self.organization, agent_id=agent_id)
        return Response(selectors.agent_test_item(selectors.agent_test_get(agent=agent, test_id=test_id)))

    @extend_schema(
        operation_id="updateAgentTest",
        tags=TAGS,
        summary="Change an agent test",
        request=AgentTestPatchSerializer,
        responses={200: AgentTestSchema, 400: INVALID, 404: NOT_FOUND},
        description="Replaces the fields given (the JSON parts whole: toolMocks, expect, ...) and answers the test.",
    )
    def patch(self, request: Request, agent_id: str, test_id: str) -> Response:
        test = services.agent_test_update(
            organization=self.organization, agent_id=agent_id, test_id=test_id, body=_body(request)
        )
        return Response(selectors.agent_test_item(test))

    @extend_schema(
        operation_id="deleteAgentTest",
        tags=TAGS,
        summary="Delete an agent test",
        responses={200: AgentTestDeletedSchema, 400: INVALID, 404: NOT_FOUND},
        description="Deletes the test. Runs that included it keep its results.",
    )
    def delete(self, request: Request, agent_id: str, test_id: str) -> Response:
        deleted = services.agent_test_delete(organization=self.organization, agent_id=agent_id, test_id=test_id)
        return Response({"id": str(deleted)})


class CallTestCreateApi(PublicApiView):
    @extend_schema(
        operation_id="createTestFromCall",
        tags=TAGS,
        summary="Make a test from a recorded call",
        request=None,
        responses={
            201: AgentTestSchema,
            400: OpenApiResponse(
                description="Invalid ID, the call's agent was deleted, or the call has no caller turns"
            ),
            404: OpenApiResponse(description="Call not found (or another organization's)"),
        },
        description="Turns a recorded call into a `reply` test of its agent, to pin down a regression found in "
        "production: its caller turns (the stored transcript, redacted if the agent redacts), its variables, "
        "expect.toolCalls from the tools the agent called (name and arguments; tools it no longer offers are "
        'left out) or expect.noToolCalls when it called none; named "From call <date>", tagged `from-call`. '
        "Edit it with PATCH (replyContains, criteria, ...).",
    )
    def post(self, request: Request, call_id: str) -> Response:
        test = services.agent_test_from_call(organization=self.organization, call_id=call_id)
        return Response(selectors.agent_test_item(test), status=201)
