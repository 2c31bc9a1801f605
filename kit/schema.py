"""The OpenAPI side of the public API kit: the error shape and what every operation shares.

Views document their success shape and the errors particular to them (`OpenApiResponse(description=...)`).
The post-processing hook below completes every operation the same way, so the schema cannot forget one:
path IDs are UUIDs, every 4xx/5xx response carries the error shape, and the errors that come from the
shared machinery (authentication, path IDs, query parsing, body parsing) are listed where they apply.
"""

from __future__ import annotations

from typing import Any, cast

from django.core.validators import RegexValidator
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import build_basic_type
from drf_spectacular.types import OpenApiTypes

ERROR_COMPONENT = "Error"
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The error shape of every 4xx and 5xx answer.",
    "properties": {
        "error": {"type": "string", "description": "What went wrong, for a person to read."},
        "code": {
            "type": "string",
            "description": "A stable code for errors a program may handle, e.g. AGENT_LIMIT_EXCEEDED, "
            "FEATURE_NOT_AVAILABLE, PHONE_NUMBER_NOT_FOUND, PHONE_NUMBER_NOT_CLAIMED, PHONE_NUMBER_LIMIT_EXCEEDED, "
            "RATE_LIMITED, CONCURRENT_CALL_LIMIT_EXCEEDED, UPLOADS_BUSY, DUPLICATE_RECIPIENTS, AGENT_NOT_ACTIVE, "
            "OUTBOUND_NOT_ALLOWED, TELEPHONY_ACCOUNT_MISSING, CALL_ENDED, BATCH_STATUS_CONFLICT, AGENT_HAS_CALL_BATCHES.",
        },
        "issues": {
            "type": "object",
            "description": 'Validation failures by field (nested fields and list items are dotted: "tools.0.name").',
            "additionalProperties": {"type": "array", "items": {"type": "string"}},
        },
        "maxAgents": {"type": "integer", "description": "With AGENT_LIMIT_EXCEEDED: the plan's active-agent cap."},
        "maxBytes": {"type": "integer", "description": "With a 413: the size limit in bytes."},
        "retryAfter": {
            "type": "integer",
            "description": "With a 429: seconds to wait before retrying (also the Retry-After header).",
        },
        "limit": {
            "type": "number",
            "description": "With RATE_LIMITED: the API key's sustained requests per second (a widget session's "
            "refusal: the sessions per second of the limit it met).",
        },
        "burst": {"type": "integer", "description": "With RATE_LIMITED: the API key's (or widget limit's) burst."},
        "limitedBy": {
            "type": "string",
            "enum": ["widget_key", "widget_address"],
            "description": "With RATE_LIMITED from POST /widget/sessions: the widget key's limit, or the client "
            "address's.",
        },
        "maxConcurrentCalls": {
            "type": "integer",
            "description": "With CONCURRENT_CALL_LIMIT_EXCEEDED: the plan's cap on live calls.",
        },
        "duplicates": {
            "type": "array",
            "items": {"type": "string"},
            "description": "With DUPLICATE_RECIPIENTS: the numbers that appear more than once in the call batch.",
        },
        "status": {"type": "string", "description": "With BATCH_STATUS_CONFLICT: the call batch's current status."},
        "updatedAt": {
            "type": "string",
            "format": "date-time",
            "description": "With a stale expectedUpdatedAt (409): the agent's current updatedAt.",
        },
    },
    "required": ["error"],
}

# What the shared machinery can answer, and when it applies to an operation.
UNAUTHORIZED = "Missing, malformed or invalid API key (`Authorization: Bearer <API key>`)."
BAD_REQUEST = (
    "Invalid request: a path ID that is not a UUID, an invalid query parameter or body; `issues` names the fields."
)
NOT_FOUND = "Not found, or it belongs to another organization."
TOO_LARGE = "The request body is too large."
RATE_LIMITED = (
    "Over the API key's rate limit (`RATE_LIMITED`: the plan's requests per second and burst); "
    "`Retry-After` (whole seconds) says when to try again."
)
UNSUPPORTED = "Unsupported Content-Type: the body must be {types}."

# An operation extension (extend_schema(extensions=...)) for a JSON array body: its maxItems.
REQUEST_MAX_ITEMS = "x-request-max-items"

PATH_ID_DESCRIPTIONS = {
    "agent_id": "The agent's ID.",
    "tool_id": "The custom tool's ID.",
    "document_id": "The knowledge document's ID.",
    "call_id": "The call's ID.",
    "phone_number_id": "The phone number's ID.",
    "webhook_id": "The webhook's ID.",
    "delivery_id": "The delivery's ID.",
}


# --- request strings: the checks DRF and the strict fields make, as patterns --------------------------
# Regular expressions are read by ECMA 262 (the OpenAPI dialect), Python (the server) and Rust (fuzzers):
# classes, groups and quantifiers only (no lookaround, which generators cannot use). White space is spelled
# out because Python's str.strip() also removes U+001C-U+001F and U+0085, which ECMA's \s does not match.
# DRF trims before it counts, so a trimmed field's length limit is in its pattern, not in maxLength.
WS = "\\s\\u001c-\\u001f\\u0085"
VISIBLE = f"[^{WS}\\u0000]"  # DRF's CharField refuses NUL anywhere
ANY = "[^\\u0000]"
# The pattern an extension computed for a string field, and whether it encodes the length limit.
# drf-spectacular adds maxLength/minLength (and a oneOf for blank-allowed fields with a pattern) after
# extensions run; the hook below puts the pattern in place at the end.
STRING_PATTERN = "x-string-pattern"
LENGTH_IN_PATTERN = "x-length-in-pattern"
# Properties an object may not have (set to the `false` schema by the hook, after drf-spectacular's own
# post-processing, which expects every property to be an object).
FORBIDDEN_PROPERTIES = "x-forbidden-properties"


def trimmed_body(*, max_length: int | None, allow_blank: bool, middle: str = ANY) -> str:
    """What a trimmed value may be: visible at both ends, at most max_length long."""
    if max_length == 1:
        body = VISIBLE
    else:
        repeat = "*" if max_length is None else f"{{0,{max_length - 2}}}"
        body = f"{VISIBLE}(?:{middle}{repeat}{VISIBLE})?"
    return f"(?:{body})?" if allow_blank else body


def trimmed(body: str) -> str:
    """A pattern for a field DRF trims: `body` (the trimmed value) with any white space around it."""
    return f"^[{WS}]*(?:{body})[{WS}]*$"


def string_rule(pattern: str, *, length_in_pattern: bool = False) -> dict[str, Any]:
    return {STRING_PATTERN: pattern, LENGTH_IN_PATTERN: length_in_pattern}


def _regex_body(field: Any) -> str | None:
    for validator in field.validators:
        if isinstance(validator, RegexValidator):
            return validator.regex.pattern.removeprefix("^").removesuffix("$")  # type: ignore[union-attr]  # compiled by RegexValidator.__init__
    return None


def char_field_rule(field: Any) -> dict[str, Any]:
    """The pattern of a DRF CharField in a request."""
    regex = _regex_body(field)
    if not field.trim_whitespace:
        return string_rule(f"^(?:{regex})$" if regex else f"^{ANY}*$")
    if regex:
        return string_rule(trimmed(regex))
    body = trimmed_body(max_length=field.max_length, allow_blank=field.allow_blank)
    return string_rule(trimmed(body), length_in_pattern=True)


E164_PATTERN = trimmed("\\+[1-9][0-9]{1,14}")
# kit.validation.url_problem on what urllib.parse.urlsplit makes of the URL: scheme http or https (any
# case), a host, no user information, a port from 0 to 65535, no white space, at most 2048 characters (here:
# a host of at most 1024 and a path, query and fragment of at most 1000).
URL_PORT = "0{0,4}(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4})"
URL_BODY = (
    f"[Hh][Tt][Tt][Pp][Ss]?://[^/?#@:\\[\\]{WS}\\u0000]{{1,1024}}(?::(?:{URL_PORT})?)?(?:[/?#][^{WS}\\u0000]{{0,999}})?"
)
URL_PATTERN = trimmed(URL_BODY)
# kit.validation.headers_problem: token names, not the ones the service sets, single-line values.
HEADER_NAME_PATTERN = "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$"
RESERVED_HEADER_NAMES = ("host", "content-length", "transfer-encoding", "connection")


def _any_case(word: str) -> str:
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in word)


HEADERS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "HTTP header names to values. Not Host, Content-Length, Transfer-Encoding or Connection.",
    "maxProperties": 50,
    "propertyNames": {
        "pattern": HEADER_NAME_PATTERN,
        "not": {"pattern": "^(?:" + "|".join(_any_case(name) for name in RESERVED_HEADER_NAMES) + ")$"},
    },
    "additionalProperties": {"type": "string", "maxLength": 4096, "pattern": "^[^\\r\\n\\u0000]*$"},
}


def _default_mapping(extension: OpenApiSerializerFieldExtension, auto_schema: Any, direction: str) -> dict[str, Any]:
    """drf-spectacular's own mapping of the field, without the field's meta (nullable, default, ...), which
    drf-spectacular appends again to what an extension returns."""
    schema = dict(auto_schema._map_serializer_field(extension.target, direction, bypass_extensions=True))
    if isinstance(schema.get("type"), list):
        schema["type"] = next(t for t in schema["type"] if t != "null")
    for key in ("default", "description", "title", "readOnly", "writeOnly"):
        schema.pop(key, None)
    return schema


class CharFieldSchema(OpenApiSerializerFieldExtension):
    """Every request string as DRF checks it: trimmed (unless the field says not), no NUL character, not
    blank unless blank is allowed, at most max_length long once trimmed, and its regex if it has one."""

    target_class = "rest_framework.fields.CharField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        schema = _default_mapping(self, auto_schema, direction)
        if direction == "request":
            schema.update(char_field_rule(self.target))
        return schema


class E164FieldSchema(OpenApiSerializerFieldExtension):
    target_class = "kit.fields.E164Field"
    priority = 1

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return {
            "type": "string",
            "format": "e164",
            "description": "A phone number in E.164 form that libphonenumber considers valid, e.g. +14155550123.",
            "examples": ["+14155550123"],
            **string_rule(E164_PATTERN),
        }


class OutboundUrlFieldSchema(OpenApiSerializerFieldExtension):
    target_class = "kit.fields.OutboundUrlField"
    priority = 1

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return {
            "type": "string",
            "description": "An http or https URL with a host and no credentials, at most 2048 characters, that the "
            "HTTP client can encode (an international host name must pass IDNA; no empty DNS label). Private, "
            "loopback and link-local addresses are refused (unless the operator allows them): when the URL is "
            "saved (a 400 naming the field) and when the service calls it. A host that does not resolve yet is "
            "accepted.",
            **string_rule(URL_PATTERN, length_in_pattern=True),
        }


class HeadersFieldSchema(OpenApiSerializerFieldExtension):
    target_class = "kit.fields.HeadersField"
    priority = 1

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return dict(HEADERS_SCHEMA)


class JsonObjectFieldSchema(OpenApiSerializerFieldExtension):
    target_class = "kit.fields.JsonObjectField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return cast("dict[str, Any]", build_basic_type(OpenApiTypes.OBJECT))  # None only for OpenApiTypes.NONE


def component_ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _error_content() -> dict[str, Any]:
    return {"application/json": {"schema": component_ref(ERROR_COMPONENT)}}


def _complete_operation(operation: dict[str, Any]) -> None:
    parameters = operation.get("parameters", [])
    for parameter in parameters:
        if parameter["in"] == "path" and parameter["name"].endswith("_id"):
            # URLs keep <str:...> so that a malformed ID is the contract's 400, not a routing 404.
            parameter["schema"] = {"type": "string", "format": "uuid"}
            parameter.setdefault("description", PATH_ID_DESCRIPTIONS.get(parameter["name"], "An ID (UUID)."))
    has_ids = any(p["in"] == "path" for p in parameters)
    has_query = any(p["in"] == "query" for p in parameters)
    body_types = list(operation.get("requestBody", {}).get("content", {}))
    max_items = operation.pop(REQUEST_MAX_ITEMS, None)
    if max_items is not None:
        for content in operation["requestBody"]["content"].values():
            content["schema"]["maxItems"] = max_items

    responses = operation["responses"]
    standard: dict[str, str] = {}
    if operation.get("security"):
        standard["401"] = UNAUTHORIZED
        standard["429"] = RATE_LIMITED
    if has_ids or has_query or body_types:
        standard["400"] = BAD_REQUEST
    if has_ids:
        standard["404"] = NOT_FOUND
    if body_types:
        standard["413"] = TOO_LARGE
        standard["415"] = UNSUPPORTED.format(types=" or ".join(body_types))
    for status, description in standard.items():
        responses.setdefault(status, {"description": description})
    for status, response in responses.items():
        if status[0] in "45":
            response["content"] = _error_content()
        if status == "429":
            response["headers"] = {
                "Retry-After": {"description": "Seconds to wait before retrying.", "schema": {"type": "integer"}}
            }
    operation["responses"] = dict(sorted(responses.items()))


def _apply_markers(node: Any) -> None:
    if isinstance(node, dict):
        for name in node.pop(FORBIDDEN_PROPERTIES, ()):
            node.setdefault("properties", {})[name] = False
        if STRING_PATTERN in node:
            if node.pop(LENGTH_IN_PATTERN):
                node.pop("maxLength", None)
                node.pop("minLength", None)
            node["pattern"] = node.pop(STRING_PATTERN)
        for value in node.values():
            _apply_markers(value)
    elif isinstance(node, list):
        for value in node:
            _apply_markers(value)


def complete_public_api(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular post-processing hook (SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"])."""
    _apply_markers(result)
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            if method in ("get", "put", "post", "patch", "delete"):
                _complete_operation(operation)
    result.setdefault("components", {}).setdefault("schemas", {})[ERROR_COMPONENT] = ERROR_SCHEMA
    result["components"]["schemas"] = dict(sorted(result["components"]["schemas"].items()))
    return result
