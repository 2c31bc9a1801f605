"""Call batches (campaigns) REST endpoints: thin views that parse, call the campaigns services and render."""

from __future__ import annotations

import json
from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from calls.serializers import CallSummarySchema, call_summary_item
from kit.api import PublicApiView
from kit.errors import ApiError
from kit.fields import parse
from kit.parsers import JsonParser, MultiPartParser, refuse_unstorable
from telephony.campaigns import selectors, services
from telephony.campaigns.serializers import (
    BatchCallsQuery,
    BatchCreateSerializer,
    BatchCsvSerializer,
    BatchListQuery,
    BatchSchema,
    RecipientItemSchema,
    RecipientListQuery,
    batch_item,
    recipient_item,
)
from telephony.models import CallBatch

TAGS = ["Call batches"]
NOT_FOUND = OpenApiResponse(description="Call batch not found (or another organization's)")
INVALID = OpenApiResponse(
    description="Invalid body (`issues` names the fields): every invalid recipient row at once (a `to` that is not "
    "an E.164 number, bad variables or metadata), duplicate numbers (DUPLICATE_RECIPIENTS, with `duplicates`), more "
    "than 10,000 recipients, an empty CSV or one without a `to` column, a window whose end is not after its start, "
    "an unknown time zone, an inactive agent (AGENT_NOT_ACTIVE), a number that is not a claimed number of your "
    "organization (PHONE_NUMBER_NOT_CLAIMED), a concurrency above the plan's outbound calls. Nothing is created."
)
CONFLICT = OpenApiResponse(description="Not allowed from the batch's current status (BATCH_STATUS_CONFLICT, `status`)")


def _render(batch: CallBatch) -> dict[str, Any]:
    return batch_item(batch, selectors.batch_counts(batch_ids=[batch.pk])[batch.pk])


def _form_data(request: Request) -> dict[str, Any]:
    """The multipart form as the JSON body would be: numbers and objects parsed from their text, the
    CSV file's rows as recipients."""
    form = request.data
    upload = request.FILES.get("file")
    if upload is None:
        raise ApiError.field("file", "A CSV file is required in a multipart request (field `file`).")
    data: dict[str, Any] = {key: form.get(key) for key in ("name", "agentId", "phoneNumberId", "startAt")}
    data = {key: value for key, value in data.items() if value is not None}
    concurrency = form.get("concurrency")
    if concurrency is not None:
        data["concurrency"] = int(concurrency) if concurrency.strip().isdigit() else concurrency
    for key in ("window", "retry"):
        text = form.get(key)
        if text is not None and text.strip():
            try:
                data[key] = json.loads(text)
            except ValueError:
                raise ApiError.field(key, "Must be a JSON object (as text in a multipart form).") from None
    data["recipients"] = services.recipients_from_csv(upload.read(services.MAX_CSV_BYTES + 1))
    # What was decoded here (the JSON texts, the CSV's cells: `recipients.<row>.variables.<column>`, rows
    # counted from 0 after the header) is checked as a JSON body is by its parser.
    refuse_unstorable(data)
    return data


class BatchListCreateApi(PublicApiView):
    parser_classes = [JsonParser, MultiPartParser]

    @extend_schema(
        operation_id="listCallBatches",
        tags=TAGS,
        summary="List call batches",
        parameters=[BatchListQuery],
        responses={200: BatchSchema(many=True), 400: OpenApiResponse(description="Invalid query parameter")},
        description="The organization's call batches, newest first, with their status and counts per state and "
        "outcome. Unknown query parameters are ignored.",
    )
    def get(self, request: Request) -> Response:
        query = parse(BatchListQuery, request.query_params.dict())
        rows = selectors.batch_page(
            organization=self.organization, limit=query["limit"], offset=query["offset"], status=query.get("status")
        )
        return Response([batch_item(batch, counts) for batch, counts in rows])

    @extend_schema(
        operation_id="createCallBatch",
        tags=TAGS,
        summary="Create a call batch (campaign)",
        request={"application/json": BatchCreateSerializer, "multipart/form-data": BatchCsvSerializer},
        responses={
            201: BatchSchema,
            400: INVALID,
            403: OpenApiResponse(description="The plan has no outbound calls (OUTBOUND_NOT_ALLOWED)"),
            404: OpenApiResponse(description="agentId is not one of your agents"),
            503: OpenApiResponse(
                description="TELEPHONY_NOT_CONFIGURED: this service has no PUBLIC_BASE_URL or REALTIME_TOKEN_SECRET"
            ),
            413: OpenApiResponse(description="The CSV file is larger than 10 MB"),
        },
        description="The agent calls every recipient from the number, after `startAt`, inside the `window` (in its "
        "time zone), at most `concurrency` calls at once, retrying the outcomes in `retry.retryOn`. JSON with "
        "`recipients`, or multipart/form-data with a CSV `file` (header row with `to`; every other column is a "
        "variable) and the other fields as text (`window` and `retry` as JSON). The batch starts `scheduled`.",
    )
    def post(self, request: Request) -> Response:
        from_csv = request.content_type.startswith("multipart/")
        data = parse(BatchCreateSerializer, _form_data(request) if from_csv else request.data)
        batch = services.batch_create(organization=self.organization, data=data, from_csv=from_csv)
        return Response(_render(batch), status=201)


class BatchDetailApi(PublicApiView):
    @extend_schema(
        operation_id="getCallBatch",
        tags=TAGS,
        summary="Get a call batch",
        responses={200: BatchSchema, 404: NOT_FOUND},
        description="One batch with its status and counts per state and outcome.",
    )
    def get(self, request: Request, batch_id: str) -> Response:
        return Response(_render(selectors.batch_get(organization=self.organization, batch_id=batch_id)))


class BatchCallsApi(PublicApiView):
    @extend_schema(
        operation_id="listCallBatchCalls",
        tags=TAGS,
        summary="List a call batch's calls",
        parameters=[BatchCallsQuery],
        responses={200: CallSummarySchema(many=True), 404: NOT_FOUND},
        description="The calls the batch placed (every attempt), newest first, as in the call list.",
    )
    def get(self, request: Request, batch_id: str) -> Response:
        batch = selectors.batch_get(organization=self.organization, batch_id=batch_id)
        query = parse(BatchCallsQuery, request.query_params.dict())
        rows = selectors.batch_calls(batch=batch, limit=query["limit"], offset=query["offset"])
        return Response([call_summary_item(row) for row in rows])


class BatchRecipientsApi(PublicApiView):
    @extend_schema(
        operation_id="listCallBatchRecipients",
        tags=TAGS,
        summary="List a call batch's recipients",
        parameters=[RecipientListQuery],
        responses={200: RecipientItemSchema(many=True), 404: NOT_FOUND},
        description="The batch's recipients in list order, each with its state, outcome, attempts and latest call.",
    )
    def get(self, request: Request, batch_id: str) -> Response:
        batch = selectors.batch_get(organization=self.organization, batch_id=batch_id)
        query = parse(RecipientListQuery, request.query_params.dict())
        rows = selectors.batch_recipients(
            batch=batch,
            limit=query["limit"],
            offset=query["offset"],
            state=query.get("state"),
            outcome=query.get("outcome"),
        )
        return Response([recipient_item(row) for row in rows])


def _action(operation_id: str, summary: str, description: str) -> Any:
    return extend_schema(
        operation_id=operation_id,
        tags=TAGS,
        summary=summary,
        request=None,
        responses={200: BatchSchema, 404: NOT_FOUND, 409: CONFLICT},
        description=description,
    )


class BatchPauseApi(PublicApiView):
    @_action("pauseCallBatch", "Pause a call batch", "No new call is placed until it is resumed; live calls go on.")
    def post(self, request: Request, batch_id: str) -> Response:
        batch = selectors.batch_get(organization=self.organization, batch_id=batch_id)
        return Response(_render(services.batch_pause(batch=batch)))


class BatchResumeApi(PublicApiView):
    @_action("resumeCallBatch", "Resume a call batch", "A paused batch places calls again (inside its window).")
    def post(self, request: Request, batch_id: str) -> Response:
        batch = selectors.batch_get(organization=self.organization, batch_id=batch_id)
        return Response(_render(services.batch_resume(batch=batch)))


class BatchCancelApi(PublicApiView):
    @_action(
        "cancelCallBatch",
        "Cancel a call batch",
        "Recipients not called yet end `canceled`; queued and ringing calls are canceled; live calls go on to "
        "their end and are not retried.",
    )
    def post(self, request: Request, batch_id: str) -> Response:
        batch = selectors.batch_get(organization=self.organization, batch_id=batch_id)
        return Response(_render(services.batch_cancel(batch=batch)))
