"""OpenAPI of tool bodies: names, and the JSON Schemas a tool carries.

A tool's parameterSchema and responseSchema must be valid JSON Schemas (draft 2020-12: the server checks
them against the meta-schema). The description below pins the keywords integrations use (`type`,
`properties`, `required`, ...) with the types the meta-schema gives them, two levels deep, and leaves the
rest to the meta-schema, named in words. The meta-schema itself is recursive: transcribed into the document
as a component, it made Schemathesis' coverage phase take five minutes for one operation.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension, OpenApiSerializerFieldExtension

from agents.tools.serializers import MAX_SCHEMA_BYTES, RESERVED_TOOL_NAMES, TOOL_NAME
from kit.schema import string_rule

SIMPLE_TYPES = ["array", "boolean", "integer", "null", "number", "object", "string"]
TYPE_KEYWORD: dict[str, Any] = {
    "anyOf": [
        {"enum": SIMPLE_TYPES},
        {"type": "array", "items": {"enum": SIMPLE_TYPES}, "minItems": 1, "uniqueItems": True},
    ]
}
ANNOTATIONS: dict[str, Any] = {
    "$schema": {"type": "string"},
    "title": {"type": "string"},
    "description": {"type": "string"},
}
# A schema inside a schema (a property, items, additionalProperties): an object or a boolean.
SUBSCHEMA: dict[str, Any] = {
    "type": ["object", "boolean"],
    "properties": {
        **ANNOTATIONS,
        "type": TYPE_KEYWORD,
        "enum": {"type": "array"},
        "properties": {"type": "object", "additionalProperties": {"type": ["object", "boolean"]}},
        "required": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "items": {"type": ["object", "boolean"]},
    },
}
OBJECT_KEYWORDS: dict[str, Any] = {
    **ANNOTATIONS,
    "properties": {"type": "object", "additionalProperties": SUBSCHEMA},
    "required": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
    "additionalProperties": SUBSCHEMA,
}


class ParameterSchemaFieldSchema(OpenApiSerializerFieldExtension):
    target_class = "agents.tools.serializers.ParameterSchemaField"
    priority = 1

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return {
            "type": "object",
            "description": "JSON Schema of the tool's arguments (draft 2020-12 unless `$schema` names another; "
            f"at most {MAX_SCHEMA_BYTES} bytes of JSON). Arguments are an object: `type` is `object`.",
            "properties": {**OBJECT_KEYWORDS, "type": {"const": "object"}},
            "required": ["type"],
        }


class ResponseSchemaFieldSchema(OpenApiSerializerFieldExtension):
    target_class = "agents.tools.serializers.ResponseSchemaField"
    priority = 1

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return {
            "type": "object",
            "description": "JSON Schema of the tool's response (draft 2020-12 unless `$schema` names another; "
            f"at most {MAX_SCHEMA_BYTES} bytes of JSON), or null.",
            "properties": {**OBJECT_KEYWORDS, "type": TYPE_KEYWORD, "items": SUBSCHEMA},
        }


class ToolWriteSchema(OpenApiSerializerExtension):
    target_class = "agents.tools.serializers.ToolWriteSerializer"

    def map_serializer(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        if direction == "request":
            name = schema["properties"]["name"]
            name.update(string_rule(TOOL_NAME.pattern))
            name["not"] = {"enum": list(RESERVED_TOOL_NAMES)}
        return schema
