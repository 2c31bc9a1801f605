"""Knowledge REST endpoints: thin views that parse, call a service and render."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.parsers import JSONParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from knowledge import selectors, services
from knowledge.serializers import (
    DocumentCreatedSerializer,
    DocumentCreateSerializer,
    DocumentDeletedSerializer,
    DocumentListItemSerializer,
)
from voiceagent.api import PublicApiView
from voiceagent.errors import ApiError
from voiceagent.fields import parse

ERRORS = {
    400: OpenApiResponse(description="Invalid body or ID; `issues` lists the fields"),
    401: OpenApiResponse(description="Missing, malformed or invalid API key"),
    404: OpenApiResponse(description="Agent or document not found (or another organization's)"),
}
# Room for multipart boundaries and headers, the name and description fields, and JSON quoting.
REQUEST_OVERHEAD_BYTES = 1024 * 1024


class KnowledgeListCreateApi(PublicApiView):
    parser_classes = [JSONParser, MultiPartParser]

    @extend_schema(
        operation_id="listKnowledgeDocuments", responses={200: DocumentListItemSerializer(many=True), **ERRORS}
    )
    def get(self, request: Request, agent_id: str) -> Response:
        return Response(selectors.document_list(organization=self.organization, agent_id=agent_id))

    @extend_schema(
        operation_id="createKnowledgeDocument",
        request={"application/json": DocumentCreateSerializer, "multipart/form-data": DocumentCreateSerializer},
        responses={
            200: DocumentCreatedSerializer,
            413: OpenApiResponse(description="Larger than the maximum upload size (KNOWLEDGE_MAX_UPLOAD_BYTES)"),
            **ERRORS,
        },
        description="Adds a document: JSON `content` (text or Markdown) or a multipart `file` (.txt, .md, .pdf). "
        "It is `processing` until its chunks are embedded, then `ready` or `failed`.",
    )
    def post(self, request: Request, agent_id: str) -> Response:
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > settings.KNOWLEDGE_MAX_UPLOAD_BYTES + REQUEST_OVERHEAD_BYTES:
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
    @extend_schema(operation_id="deleteKnowledgeDocument", responses={200: DocumentDeletedSerializer, **ERRORS})
    def delete(self, request: Request, agent_id: str, document_id: str) -> Response:
        pk = services.document_delete(organization=self.organization, agent_id=agent_id, document_id=document_id)
        return Response({"id": str(pk)})
