"""OpenAPI of knowledge uploads: JSON `content` and multipart `file` are two forms, never mixed."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension

from kit.schema import FORBIDDEN_PROPERTIES, WS, string_rule

# knowledge.extraction: control characters other than tab, newline, carriage return and form feed are binary.
TEXT = "[^\\u0000-\\u0008\\u000b\\u000e-\\u001f\\u007f]"
VISIBLE_TEXT = f"[^{WS}\\u0000-\\u0008\\u000b\\u000e-\\u001f\\u007f]"


class DocumentContentSchema(OpenApiSerializerExtension):
    target_class = "knowledge.serializers.DocumentContentSerializer"

    def map_serializer(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        # Text with something to index in it (not only white space).
        schema["properties"]["content"].update(string_rule(f"^{TEXT}*{VISIBLE_TEXT}{TEXT}*$"))
        schema[FORBIDDEN_PROPERTIES] = ["file"]  # a file is for multipart requests
        return schema


class DocumentFileSchema(OpenApiSerializerExtension):
    target_class = "knowledge.serializers.DocumentFileSerializer"

    def map_serializer(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        schema[FORBIDDEN_PROPERTIES] = ["content"]  # content is for JSON requests
        return schema
