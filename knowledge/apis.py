"""Knowledge REST endpoints: thin views that parse, call a service and render."""

from __future__ import annotations

import functools
import threading
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
from kit import metrics
from kit.api import JsonParser, PublicApiView, content_length
from kit.errors import ApiError, response_headers
from kit.fields import parse
from knowledge import schema as _schema  # noqa: F401 - registers the OpenAPI description of uploads
from knowledge import selectors, services
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
                description="Over the API key's rate limit (`RATE_LIMITED`), or this server is handling its "
                "maximum of concurrent uploads (`UPLOADS_BUSY`, KNOWLEDGE_MAX_CONCURRENT_UPLOADS); "
                "`Retry-After` says when to try again"
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


# --- the per-process bound on concurrent uploads (docs/limits.md) -----------------------------------
UPLOADS_BUSY = "UPLOADS_BUSY"
UPLOADS_RETRY_AFTER_SECONDS = 5


class _UploadSlots:
    """KNOWLEDGE_MAX_CONCURRENT_UPLOADS uploads in this process at once; a counter under a lock (a
    non-blocking semaphore whose bound is read from settings at each request)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.in_use = 0

    def try_acquire(self) -> bool:
        with self._lock:
            if self.in_use >= settings.KNOWLEDGE_MAX_CONCURRENT_UPLOADS:
                return False
            self.in_use += 1
            return True

    def release(self) -> None:
        with self._lock:
            self.in_use -= 1


upload_slots = _UploadSlots()


def upload_bound(view: Callable[..., HttpResponse]) -> Callable[..., Any]:
    """Wrap the upload view: a POST over the bound is a 429 UPLOADS_BUSY with Retry-After. The slot is
    taken here, in the server's event loop, because under Daphne every sync view of a process runs in one
    thread: uploads queued behind a long one are counted too, not only the one running."""

    @functools.wraps(view)
    async def bounded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        run = sync_to_async(view)
        if request.method != "POST":
            return await run(request, *args, **kwargs)
        if not upload_slots.try_acquire():
            metrics.record_rate_limit_refusal("uploads")
            limit = settings.KNOWLEDGE_MAX_CONCURRENT_UPLOADS
            error = ApiError.too_many(
                f"Too many knowledge uploads in progress ({limit} at once per server process); retry shortly.",
                code=UPLOADS_BUSY,
                retry_after=UPLOADS_RETRY_AFTER_SECONDS,
            )
            response = JsonResponse(error.body(), status=429, headers=response_headers(error))
            response._has_been_logged = True  # type: ignore[attr-defined]  # Django's private flag (not in the stubs): expected under load; not a WARNING line per refusal
            return response
        try:
            return await run(request, *args, **kwargs)
        finally:
            upload_slots.release()

    return bounded
