from django.contrib import admin

from knowledge.models import AgentKnowledgeIndex, KnowledgeChunk, KnowledgeDocument
from knowledge.services import document_remove


class ReadOnlyAdmin(admin.ModelAdmin):
    """Documents are added through the public API (validation, extraction, ingestion) only."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(KnowledgeDocument)
class KnowledgeDocumentAdmin(ReadOnlyAdmin):
    list_display = ("name", "agent", "organization", "type", "status", "chunk_count", "size_bytes", "created_at")
    list_filter = ("status", "type", "organization")
    search_fields = ("name", "description", "id", "agent__name", "agent__id", "organization__name")
    list_select_related = ("agent", "organization")
    exclude = ("pages",)
    readonly_fields = ("id", "created_at", "updated_at")
    ordering = ("-created_at",)

    def has_delete_permission(self, request, obj=None) -> bool:
        return admin.ModelAdmin.has_delete_permission(self, request, obj)

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
