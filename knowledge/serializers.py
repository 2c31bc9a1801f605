"""Wire shapes of knowledge documents."""

from __future__ import annotations

from rest_framework import serializers

from kit.fields import StrictCharField
from knowledge.models import DocumentStatus, DocumentType


class DocumentCreateSerializer(serializers.Serializer):
    """JSON mode: content (+ name, description). Multipart mode: file (+ name, description)."""

    content = StrictCharField(required=False, allow_blank=True, trim_whitespace=False)
    file = serializers.FileField(required=False, allow_empty_file=True, max_length=255)
    name = StrictCharField(required=False, allow_blank=False, max_length=200)
    description = StrictCharField(required=False, allow_null=True, allow_blank=True, max_length=1000)


# OpenAPI descriptions of the two request forms (parsing uses DocumentCreateSerializer for both).
class DocumentContentSerializer(serializers.Serializer):
    """JSON mode: the document's text or Markdown in `content`."""

    content = StrictCharField(
        allow_blank=True, trim_whitespace=False, help_text="Text or Markdown, with at least one visible character."
    )
    name = StrictCharField(
        required=False, allow_blank=False, max_length=200, help_text="Suggested from the content when omitted."
    )
    description = StrictCharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=1000,
        help_text="Suggested from the content when omitted; null stays null.",
    )


class DocumentFileSerializer(serializers.Serializer):
    """Multipart mode: a .txt or .md file (UTF-8) or a .pdf with extractable text in `file`."""

    file = serializers.FileField(help_text="A .txt, .md, .markdown or .pdf file.")
    name = StrictCharField(
        required=False, allow_blank=False, max_length=200, help_text="Suggested from the text when omitted."
    )
    description = StrictCharField(
        required=False, allow_blank=True, max_length=1000, help_text="Suggested from the text when omitted."
    )


class DocumentCreatedSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    description = serializers.CharField(allow_null=True)


class DocumentDeletedSerializer(serializers.Serializer):
    id = serializers.UUIDField()


class DocumentListItemSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    description = serializers.CharField(allow_null=True)
    type = serializers.ChoiceField(DocumentType.choices)
    sizeBytes = serializers.IntegerField()
    status = serializers.ChoiceField(DocumentStatus.choices)
    error = serializers.CharField(allow_null=True)
    chunkCount = serializers.IntegerField()
    createdAt = serializers.DateTimeField()
