"""Dashboard: knowledge documents (upload through the knowledge services, the document page with its
description and chunks, delete) and read-only lists of chunks and index versions."""

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from agents.dashboard import ServiceModelForm
from kit.fields import parse
from knowledge.models import AgentKnowledgeIndex, KnowledgeChunk, KnowledgeDocument
from knowledge.serializers import DocumentCreateSerializer
from knowledge.services import OMITTED, document_create, document_remove


class ReadOnlyAdmin(admin.ModelAdmin):
    """Documents are added through the knowledge services only (validation, extraction, ingestion)."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class DocumentUploadForm(ServiceModelForm):
    """An upload, saved through document_create as the API's multipart upload is (same checks and
    limits): a valid form is a stored document, queued for indexing; an invalid one stored nothing."""

    file = forms.FileField(help_text="A .txt, .md or .markdown file in UTF-8, or a .pdf with text.")
    issue_fields = {"file": "file", "name": "name", "description": "description"}

    class Meta:
        model = KnowledgeDocument
        fields = ("agent", "file", "name", "description")
        help_texts = {
            "name": "Optional: suggested from the text when blank.",
            "description": "Optional: suggested from the text when blank. Search results show it to the model.",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["name"].required = False

    def save_through_service(self) -> KnowledgeDocument:
        data = self.cleaned_data
        body: dict[str, Any] = {"file": data["file"]}
        if data.get("name"):
            body["name"] = data["name"]
        if data.get("description"):
            body["description"] = data["description"]
        parsed = parse(DocumentCreateSerializer, body)
        agent = data["agent"]
        return document_create(
            organization=agent.organization,
            agent_id=str(agent.pk),
            upload=parsed["file"],
            name=parsed.get("name"),
            description=parsed.get("description", OMITTED),
        )


class KnowledgeChunkInline(admin.TabularInline):
    """The document's chunks in reading order, as search finds them."""

    model = KnowledgeChunk
    fields = ("position", "page", "heading_path", "token_count", "text")
    readonly_fields = fields
    extra = 0
    can_delete = False
    ordering = ("position",)

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(KnowledgeDocument)
class KnowledgeDocumentAdmin(ReadOnlyAdmin):
    list_display = ("name", "agent", "organization", "type", "status", "chunk_count", "size_bytes", "created_at")
    list_filter = ("status", "type", "organization")
    search_fields = ("name", "description", "id", "agent__name", "agent__id", "organization__name")
    list_select_related = ("agent", "organization")
    autocomplete_fields = ("agent",)
    fields = (
        "name",
        "description",
        "agent",
        "organization",
        "status",
        "error",
        "type",
        "chunk_count",
        "size_bytes",
        "id",
        "created_at",
        "updated_at",
    )
    readonly_fields = ("id", "created_at", "updated_at")
    inlines = [KnowledgeChunkInline]
    ordering = ("-created_at",)

    def has_add_permission(self, request, obj=None) -> bool:
        return admin.ModelAdmin.has_add_permission(self, request)

    def has_delete_permission(self, request, obj=None) -> bool:
        return admin.ModelAdmin.has_delete_permission(self, request, obj)

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        if obj is None:
            kwargs["form"] = DocumentUploadForm
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ("agent", "file", "name", "description") if obj is None else self.fields

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return () if obj is None else self.readonly_fields

    def get_inlines(self, request: HttpRequest, obj: Any) -> Any:
        return self.inlines if obj is not None else []

    def save_model(self, request, obj, form, change) -> None:
        """Nothing left to do: the upload form's validation stored the document through the service."""

    def response_add(self, request: HttpRequest, obj: KnowledgeDocument, post_url_continue: Any = None) -> HttpResponse:
        # To the document's page: its status (processing, then ready or failed), description and chunks.
        super().response_add(request, obj, post_url_continue)  # its success message
        return HttpResponseRedirect(reverse("admin:knowledge_knowledgedocument_change", args=[obj.pk]))

    # Through the service, so that chunks go and every process's search cache is refreshed.
    def delete_model(self, request, obj: KnowledgeDocument) -> None:
        document_remove(document=obj)

    def delete_queryset(self, request, queryset) -> None:
        for document in queryset:
            document_remove(document=document)

    def get_deleted_objects(self, objs, request):
        # A document's chunks go with it; they are not deletable on their own.
        deleted, counts, _, protected = super().get_deleted_objects(objs, request)
        return deleted, counts, set(), protected


@admin.register(KnowledgeChunk)
class KnowledgeChunkAdmin(ReadOnlyAdmin):
    list_display = ("document", "position", "page", "token_count", "heading_path")
    list_filter = ("document__type", "document__organization")
    search_fields = ("text", "document__name", "document__id", "agent__name")
    list_select_related = ("document",)
    exclude = ("embedding",)
    raw_id_fields = ("document", "agent")


@admin.register(AgentKnowledgeIndex)
class AgentKnowledgeIndexAdmin(ReadOnlyAdmin):
    list_display = ("agent", "version", "updated_at")
    search_fields = ("agent__name", "agent__id")
    list_select_related = ("agent",)
