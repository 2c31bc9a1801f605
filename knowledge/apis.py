"""Knowledge REST endpoints: thin views that parse, call a service and render."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

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
from voiceagent.api import JsonParser, PublicApiView, content_length
from voiceagent.errors import ApiError
from voiceagent.fields import parse

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
        return Response(selectors.document_list(organization=self.organization, agent_id=agent_id))

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
