"""POST /public/v1/agents/{id}/test-runs, GET /public/v1/test-runs/{id} and POST /public/v1/test-runs/{id}/cancel
(docs/guides/agent-test-runs.md)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from agents.selectors import agent_get
from kit.api import PublicApiView
from kit.errors import ApiError
from realtime.agent_tests.runs import MAX_REPEAT, test_run_cancel, test_run_create
from realtime.agent_tests.selectors import test_run_get, test_run_json


class TestRunRequestSerializer(serializers.Serializer):
    testIds = serializers.ListField(
        child=serializers.UUIDField(), required=False, help_text="The tests to run, in order (default: all)."
    )
    tag = serializers.CharField(required=False, help_text="Run the agent's tests with this tag.")
    repeat = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_REPEAT, help_text="Attempts per test (1-5, default 1)."
    )


class TestRunQueuedSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    status = serializers.ChoiceField(["queued"])


class TestAttemptSerializer(serializers.Serializer):
    verdict = serializers.ChoiceField(["pass", "fail", "error", "skipped"])
    reasons = serializers.ListField(child=serializers.CharField(), help_text="Each failed expectation, by name.")
    transcript = serializers.ListField(child=serializers.DictField(), help_text='[{"role", "text"}]')
    toolCalls = serializers.ListField(
        child=serializers.DictField(), help_text='[{"name", "arguments", "result", "status", "mocked"}]'
    )
    latencyMs = serializers.ListField(
        child=serializers.IntegerField(allow_null=True), help_text="Per caller turn: until the agent began answering."
    )
    criteria = serializers.ListField(
        child=serializers.DictField(), help_text='[{"criterion", "verdict": pass|fail|skipped, "reason"}]'
    )
    transferred = serializers.BooleanField()
    ended = serializers.BooleanField()
    flow = serializers.DictField(
        allow_null=True,
        required=False,
        help_text='The agent\'s flow as the attempt left it: {"path": [node ids], "collected": {name: value}} '
        "(collected values redacted as the transcript); null for an agent without a flow.",
    )


class TestResultSerializer(serializers.Serializer):
    testId = serializers.UUIDField()
    name = serializers.CharField()
    kind = serializers.CharField()
    passRate = serializers.FloatField(allow_null=True, help_text="Passed attempts / judged attempts.")
    attempts = TestAttemptSerializer(many=True)


class TestRunSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    agentId = serializers.UUIDField()
    status = serializers.ChoiceField(["queued", "running", "completed", "failed", "cancelled"])
    testIds = serializers.ListField(child=serializers.UUIDField())
    tag = serializers.CharField()
    repeat = serializers.IntegerField()
    passed = serializers.IntegerField(help_text="Attempts that passed.")
    failed = serializers.IntegerField(help_text="Attempts that failed.")
    errored = serializers.IntegerField(help_text="Attempts with an error verdict.")
    error = serializers.CharField(allow_null=True, help_text="Why the run itself failed (status failed).")
    results = TestResultSerializer(many=True)
    createdAt = serializers.DateTimeField()
    startedAt = serializers.DateTimeField(allow_null=True)
    finishedAt = serializers.DateTimeField(allow_null=True)


class TestRunCreateApi(PublicApiView):
    @extend_schema(
        operation_id="createTestRun",
        tags=["Agent tests"],
        summary="Run an agent's tests",
        description="Queues a run of the agent's tests (`testIds`, else those with `tag`, else all), each "
        "`repeat` times, in the background through the real runtime with mocked tools; read it with "
        "GET /test-runs/{id}.",
        request=TestRunRequestSerializer,
        responses={
            202: TestRunQueuedSerializer,
            400: OpenApiResponse(
                description="repeat outside 1-5, an unknown test id, no test to run, or more attempts (tests x "
                "repeat) than TEST_RUNS_MAX_ATTEMPTS (code TEST_RUN_TOO_BIG)"
            ),
            404: OpenApiResponse(description="Agent not found"),
            429: OpenApiResponse(
                description="The organization has TEST_RUNS_MAX_UNFINISHED_PER_ORGANIZATION runs queued or running "
                "(code TEST_RUNS_BUSY; Retry-After)"
            ),
        },
    )
    def post(self, request: Request, agent_id: str) -> Response:
        body = request.data  # {} without a body; a JSON null is no object
        if not isinstance(body, dict):
            raise ApiError.invalid("The request body must be a JSON object.")
        agent = agent_get(organization=self.organization, agent_id=agent_id)
        test_ids = body.get("testIds")
        if test_ids is not None and not isinstance(test_ids, list):
            raise ApiError.field("testIds", "must be a list of test ids")
        tag = body.get("tag", "")
        if "tag" in body and (not isinstance(tag, str) or not tag.strip()):
            raise ApiError.field("tag", "must name a tag (leave tag out to run every test)")
        run = test_run_create(agent=agent, test_ids=test_ids or None, tag=tag, repeat=body.get("repeat", 1))
        return Response({"id": str(run.pk), "status": "queued"}, status=202)


class TestRunDetailApi(PublicApiView):
    @extend_schema(
        operation_id="getTestRun",
        tags=["Agent tests"],
        summary="Get a test run",
        description="The run's status and counts, and per test its attempts (verdict, reasons, transcript, tool "
        "calls, latency per turn) and pass rate.",
        responses={200: TestRunSerializer, 404: OpenApiResponse(description="Test run not found")},
    )
    def get(self, request: Request, run_id: str) -> Response:
        return Response(test_run_json(test_run_get(organization=self.organization, run_id=run_id)))


class TestRunCancelApi(PublicApiView):
    @extend_schema(
        operation_id="cancelTestRun",
        tags=["Agent tests"],
        summary="Cancel a test run",
        description="Stops a queued or running run: it answers `cancelled` at once, and its worker stops before the "
        "next attempt (attempts already stored are kept). Cancelling a cancelled run answers it again.",
        request=None,
        responses={
            200: TestRunSerializer,
            404: OpenApiResponse(description="Test run not found"),
            409: OpenApiResponse(description="The run is already over, completed or failed (code TEST_RUN_FINISHED)"),
        },
    )
    def post(self, request: Request, run_id: str) -> Response:
        return Response(test_run_json(test_run_cancel(organization=self.organization, run_id=run_id)))
