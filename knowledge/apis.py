"""Knowledge REST endpoints: thin views that parse, call a service and render."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from agents.selectors import agent_get
from kit.api import JsonParser, PublicApiView, content_length
from kit.errors import ApiError, response_headers
from kit.fields import parse
from knowledge import admission, selectors, services
from knowledge import schema as _schema  # noqa: F401 - registers the OpenAPI description of uploads
from knowledge.serializers import (
    DocumentContentSerializer,
    DocumentCreatedSerializer,
    DocumentCreateSerializer,
    DocumentDeletedSerializer,
    DocumentFileSerializer,
    DocumentListItemSerializer,
)

TAGS = ["Knowledge"]
NOT_FOUND = OpenApiResponse(description="Agent or document not found (or another organization's)")
# Room for multipart boundaries and headers, the name and description fields, and JSON quoting.
REQUEST_OVERHEAD_BYTES = 1024 * 1024


class KnowledgeListCreateApi(PublicApiView):
    parser_classes = [JsonParser, MultiPartParser]

    def max_body_bytes(self) -> int | None:
        return None  # the upload has its own limit, answered with `maxBytes` (below)

    @extend_schema(
        operation_id="listKnowledgeDocuments",
        tags=TAGS,
        summary="List an agent's knowledge documents",
        description="The agent's documents, oldest first, with their indexing status: `processing` until "
        "the text is chunked and embedded, then `ready` (with `chunkCount`) or `failed` (with `error`).",
        responses={200: DocumentListItemSerializer(many=True), 404: NOT_FOUND},
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = agent_get(organization=self.organization, agent_id=agent_id)
        return Response(selectors.document_list(agent=agent))

    @extend_schema(
        operation_id="createKnowledgeDocument",
        tags=TAGS,
        summary="Add a knowledge document",
        request={
            "application/json": DocumentContentSerializer,
            "multipart/form-data": DocumentFileSerializer,
        },
        responses={
            200: DocumentCreatedSerializer,
            400: OpenApiResponse(
                description="Invalid body or agent ID (`issues` names the fields), or no text to index: neither "
                "or both of content and file, another file type, text that is not UTF-8 or holds control "
                "characters, a PDF that cannot be read or has no extractable text, an empty document"
            ),
            404: NOT_FOUND,
            413: OpenApiResponse(
                description="Larger than the maximum upload size (KNOWLEDGE_MAX_UPLOAD_BYTES); `maxBytes` gives it"
            ),
            429: OpenApiResponse(
                description="Over the API key's rate limit (`RATE_LIMITED`), or over a bound on documents being "
                "processed (`UPLOADS_BUSY`): this server process's (KNOWLEDGE_MAX_CONCURRENT_UPLOADS: uploads "
                "being received plus documents being indexed) or the organization's (documents `processing`, "
                "KNOWLEDGE_MAX_PROCESSING_PER_ORGANIZATION); `Retry-After` says when to try again, `limit` gives the bound"
            ),
        },
        description="Adds a document to the agent's knowledge: JSON with `content` (text or Markdown), or "
        "multipart/form-data with a `file` (.txt, .md or .markdown in UTF-8, or .pdf). Answers at once; the "
        "document is `processing` until its chunks are embedded, then `ready` or `failed`. Omitted `name` and "
        "`description` are suggested from the text.",
    )
    def post(self, request: Request, agent_id: str) -> Response:
        if content_length(request) > settings.KNOWLEDGE_MAX_UPLOAD_BYTES + REQUEST_OVERHEAD_BYTES:
            raise services.too_large()
        # The organization's bound, before the body (on disk so far) is parsed.
        ticket = getattr(request, "upload_ticket", None)
        if ticket is not None:
            ticket.assign(self.organization.pk)
        processing = selectors.document_processing_count(organization_id=self.organization.pk)
        if admission.organization_full(organization_id=self.organization.pk, processing=processing):
            raise admission.busy("organization")
        try:
            body = request.data
        except RequestDataTooBig:
            raise services.too_large() from None
        data = parse(DocumentCreateSerializer, body)
        if request.content_type.startswith("multipart/") and "content" in data:
            raise ApiError.field("content", "content is for JSON requests; in multipart requests send a file.")
        document = services.document_create(
            organization=self.organization,
            agent_id=agent_id,
            content=data.get("content"),
            upload=data.get("file"),
            name=data.get("name"),
            description=data.get("description", services.OMITTED),
        )
        return Response({"id": str(document.id), "name": document.name, "description": document.description})


class KnowledgeDetailApi(PublicApiView):
    @extend_schema(
        operation_id="deleteKnowledgeDocument",
        tags=TAGS,
        summary="Delete a knowledge document",
        description="Deletes the document and its chunks: searches no longer find its text.",
        responses={200: DocumentDeletedSerializer, 404: NOT_FOUND},
    )
    def delete(self, request: Request, agent_id: str, document_id: str) -> Response:
        pk = services.document_delete(organization=self.organization, agent_id=agent_id, document_id=document_id)
        return Response({"id": str(pk)})


# --- the bounds on documents being processed (knowledge/admission.py, docs/operations/limits.md) ---------------
def upload_bound(view: Callable[..., HttpResponse]) -> Callable[..., Any]:
    """Wrap the upload view: a POST over the process's bound is a 429 UPLOADS_BUSY with Retry-After. The slot is
    taken here, in the server's event loop, because under Daphne every sync view of a process runs in one
    thread: uploads queued behind a long one are counted too, not only the one running. Under the service's
    server the slot was taken earlier, as the upload's headers arrived, and one over the bound was refused
    before its body was read (voiceagent/bodies.py)."""

    @functools.wraps(view)
    async def bounded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        run = sync_to_async(view)
        if request.method != "POST":
            return await run(request, *args, **kwargs)
        # Taken by the server as the upload's headers arrived (voiceagent/bodies.py), else here.
        scope = getattr(request, "scope", None) or {}
        ticket = scope.get(admission.SCOPE_KEY) or admission.ticket_take()
        if ticket is None:
            error = admission.busy("process")
            response = JsonResponse(error.body(), status=429, headers=response_headers(error))
            response._has_been_logged = True  # type: ignore[attr-defined]  # Django's private flag (not in the stubs): expected under load; not a WARNING line per refusal
            return response
        request.upload_ticket = ticket  # type: ignore[attr-defined]  # read by the view once it knows the organization
        try:
            return await run(request, *args, **kwargs)
        finally:
            ticket.release()

    return bounded
