"""Wire shapes of custom tools, MCP tool selections and MCP server records (camelCase, strict types)."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
from rest_framework import serializers

from agents.models import HttpMethod, McpAuthType, McpServerStatus, ToolOnError
from kit.errors import ApiError
from kit.fields import (
    HeadersField,
    JsonObjectField,
    OutboundUrlField,
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
    StrictIntegerField,
    StrictUUIDField,
)
from kit.patterns import schema_pattern_problem

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
RESERVED_TOOL_NAMES = ("search_knowledge", "transfer_call", "end_call", "send_digits")
DEFAULT_PARAMETER_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
MAX_SCHEMA_BYTES = 65536
MAX_SELECTIONS = 256


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(key) or _has_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_has_nul(item) for item in value)
    return False


def schema_problem(schema: dict[str, Any], *, arguments: bool) -> str | None:
    """Why `schema` is not a valid JSON Schema (by its meta-schema), or None."""
    try:
        # PostgreSQL's jsonb cannot hold U+0000; refused on every database alike.
        if _has_nul(schema):
            return "Not a valid JSON Schema here: its text may not contain NUL characters (U+0000)."
        size = len(json.dumps(schema))
        validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path)
        return f"Not a valid JSON Schema: {exc.message}" + (f" (at {where})" if where else "")
    except (RecursionError, ValueError, TypeError):
        return "Not a valid JSON Schema: too deeply nested or not JSON."
    if size > MAX_SCHEMA_BYTES:
        return f"At most {MAX_SCHEMA_BYTES} bytes of JSON."
    # Its patterns are matched while calls run: only those the linear-time matcher runs (kit/patterns.py).
    pattern = schema_pattern_problem(schema)
    if pattern is not None:
        return pattern
    if arguments and schema.get("type") != "object":
        return 'Tool arguments are an object: the schema needs "type": "object".'
    return None


class ParameterSchemaField(JsonObjectField):
    def to_internal_value(self, data: Any) -> dict[str, Any]:
        value = super().to_internal_value(data)
        problem = schema_problem(value, arguments=True)
        if problem:
            raise serializers.ValidationError(problem)
        return value


class ResponseSchemaField(JsonObjectField):
    def to_internal_value(self, data: Any) -> dict[str, Any]:
        value = super().to_internal_value(data)
        problem = schema_problem(value, arguments=False)
        if problem:
            raise serializers.ValidationError(problem)
        return value


class ToolWriteSerializer(serializers.Serializer):
    """POST and PUT body (PUT is a full replacement: omitted fields take these defaults)."""

    name = StrictCharField(max_length=64, trim_whitespace=False)
    description = StrictCharField(required=False, allow_blank=True, max_length=4000, default="")
    parameterSchema = ParameterSchemaField(source="parameter_schema", required=False)
    responseSchema = ResponseSchemaField(source="response_schema", required=False, allow_null=True, default=None)
    timeoutMs = StrictIntegerField(source="timeout_ms", required=False, min_value=1000, max_value=30000, default=10000)
    onError = StrictChoiceField(ToolOnError.choices, source="on_error", required=False, default="return_error")
    enabled = StrictBooleanField(required=False, default=True)
    toolUrl = OutboundUrlField(source="tool_url", required=False, allow_null=True, default=None)
    toolMethod = StrictChoiceField(HttpMethod.choices, source="tool_method", required=False, default="POST")
    toolHeaders = HeadersField(source="tool_headers", required=False, default=dict)

    def validate_name(self, value: str) -> str:
        if not TOOL_NAME.match(value):
            raise serializers.ValidationError(
                "Use 1 to 64 letters, digits, underscores or hyphens (the name is a function name for the model)."
            )
        if value in RESERVED_TOOL_NAMES:
            raise serializers.ValidationError(f"{value} is reserved for a native tool.")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs.setdefault("parameter_schema", dict(DEFAULT_PARAMETER_SCHEMA))
        return attrs


class ToolSerializer(serializers.Serializer):
    """A tool as listed (documentation of the rendered item)."""

    id = serializers.UUIDField()
    name = serializers.CharField()
    description = serializers.CharField()
    parameterSchema = serializers.DictField()
    responseSchema = serializers.DictField(allow_null=True)
    timeoutMs = serializers.IntegerField()
    onError = serializers.ChoiceField(ToolOnError.choices)
    enabled = serializers.BooleanField()
    toolUrl = serializers.CharField(allow_null=True)
    toolMethod = serializers.ChoiceField(HttpMethod.choices)
    toolHeaders = serializers.DictField(child=serializers.CharField())


class IdSerializer(serializers.Serializer):
    id = serializers.UUIDField()


class McpSelectionWriteSerializer(serializers.Serializer):
    mcpServerId = StrictUUIDField(source="server_id")
    toolName = StrictCharField(source="tool_name", max_length=128, trim_whitespace=False)
    enabled = StrictBooleanField(required=False, default=True)


class McpSelectionSerializer(serializers.Serializer):
    mcpServerId = serializers.UUIDField()
    serverName = serializers.CharField()
    serverStatus = serializers.CharField()
    toolName = serializers.CharField()
    description = serializers.CharField(allow_null=True)
    available = serializers.BooleanField(help_text="Whether the server still advertises the tool")
    enabled = serializers.BooleanField()


class McpToolDefinitionSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    inputSchema = serializers.JSONField()


class McpServerSerializer(serializers.Serializer):
    """A connected tool server as listed: no URL (it may embed a key), no credentials."""

    id = serializers.UUIDField()
    name = serializers.CharField()
    status = serializers.ChoiceField(McpServerStatus.choices)
    authType = serializers.ChoiceField(McpAuthType.choices)
    tools = McpToolDefinitionSerializer(many=True)
    lastSyncedAt = serializers.DateTimeField(allow_null=True)
    error = serializers.CharField(allow_null=True)


def parse_selections(data: Any) -> list[dict[str, Any]]:
    """PUT mcp-tools body: an array of selection items; issues are keyed by item index."""
    if not isinstance(data, list):
        raise ApiError.invalid("The request body must be a JSON array of selection items.")
    serializer = McpSelectionWriteSerializer(data=data, many=True, max_length=MAX_SELECTIONS)  # type: ignore[call-arg]  # many=True hands max_length to the ListSerializer; the stubs omit it
    serializer.is_valid(raise_exception=True)
    return [dict(item) for item in serializer.validated_data]


def parse_header_lines(lines: list[str]) -> dict[str, str]:
    """ "Name: value" lines (the ops command's --header, the dashboard's secret headers) as a dict."""
    headers: dict[str, str] = {}
    for line in lines:
        if not line.strip():
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise ApiError.field("headers", "Write each header as 'Name: value' (got a line without a name).")
        headers[name.strip()] = value.strip()
    return headers
