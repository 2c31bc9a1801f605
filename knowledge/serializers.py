"""Wire shapes of knowledge documents."""

from __future__ import annotations

from rest_framework import serializers

from knowledge.models import DocumentStatus, DocumentType
from voiceagent.fields import StrictCharField


class DocumentCreateSerializer(serializers.Serializer):
    """JSON mode: content (+ name, description). Multipart mode: file (+ name, description)."""

    content = StrictCharField(required=False, allow_blank=True, trim_whitespace=False)
    file = serializers.FileField(required=False, allow_empty_file=True, max_length=255)
    name = StrictCharField(required=False, allow_blank=False, max_length=200)
    description = StrictCharField(required=False, allow_null=True, allow_blank=True, max_length=1000)


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
