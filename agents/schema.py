"""OpenAPI of agent bodies: the agent rules that depend only on the body, written as JSON Schema.

agents.services checks them on the resulting agent; for POST and PUT that agent is the body plus the
documented defaults, so the rules can be stated on the body itself (a property that is absent takes its
default, which `properties` leaves unconstrained). PATCH merges with the stored agent: only the field
rules apply to its body.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension

from agents.serializers import LANGUAGE_PATTERN
from kit.schema import VISIBLE, string_rule, trimmed, trimmed_body

MAX_ASSIGNMENTS = 1000


def _present(field: str, value: str) -> dict[str, Any]:
    return {"properties": {field: {"const": value}}, "required": [field]}


AGENT_RULES: list[dict[str, Any]] = [
    # A dynamic prompt needs a webhook agent with a serverUrl; a static prompt (the default) needs instructions.
    {
        "if": _present("promptType", "dynamic"),
        "then": {
            "properties": {"serverUrl": {"type": "string"}, "agentType": {"const": "webhook"}},
            "required": ["serverUrl"],
        },
        "else": {"properties": {"instructions": {"pattern": VISIBLE}}, "required": ["instructions"]},
    },
    {
        "if": _present("greetingType", "static"),
        "then": {
            "properties": {"staticGreeting": {"type": "string", "pattern": VISIBLE}},
            "required": ["staticGreeting"],
        },
    },
    {"if": _present("greetingType", "dynamic"), "then": _present("promptType", "dynamic")},
    # Only webhook agents call a serverUrl.
    {
        "if": {"properties": {"agentType": {"enum": ["static", "http"]}}, "required": ["agentType"]},
        "then": {"properties": {"serverUrl": {"type": "null"}}},
    },
]
# phoneNumberAssignments or the legacy phoneNumberIds, not both.
ONE_ASSIGNMENT_FORM: dict[str, Any] = {
    "if": {"required": ["phoneNumberAssignments"]},
    "then": {"properties": {"phoneNumberIds": {"not": {}}}},
}


def _field_rules(schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema["properties"]
    language = LANGUAGE_PATTERN.removeprefix("^").removesuffix("$")
    # The tag's pattern bounds its length; maxLength would count the white space DRF trims.
    properties["language"] = {"type": "string", **string_rule(trimmed(language))}
    properties["phoneNumberAssignments"]["maxItems"] = MAX_ASSIGNMENTS
    properties["phoneNumberIds"]["uniqueItems"] = True
    # Not blank, and a single line once trimmed.
    secret = trimmed_body(max_length=512, allow_blank=False, middle="[^\\r\\n\\u0000]")
    properties["serverSecret"].update(string_rule(trimmed(secret), length_in_pattern=True))
    return schema


class AgentWriteSchema(OpenApiSerializerExtension):
    target_class = "agents.serializers.AgentWriteSerializer"

    def map_serializer(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        schema = _field_rules(auto_schema._map_serializer(self.target, direction, bypass_extensions=True))
        if direction == "request":
            schema["allOf"] = [*AGENT_RULES, ONE_ASSIGNMENT_FORM]
        return schema


class AgentPatchSchema(OpenApiSerializerExtension):
    target_class = "agents.serializers.AgentPatchSerializer"

    def map_serializer(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        schema = _field_rules(auto_schema._map_serializer(self.target, direction, bypass_extensions=True))
        # PATCH bodies are partial, but the concurrency stamp is always required.
        schema["required"] = ["expectedUpdatedAt"]
        schema["allOf"] = [ONE_ASSIGNMENT_FORM]
        return schema
