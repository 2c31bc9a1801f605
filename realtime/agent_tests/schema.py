"""OpenAPI of agent test bodies (validation.py is the rule; this states it as JSON Schema where it can).

Stated in words only: reply and tool_call tests need turns and no caller, conversation tests a caller or
turns; a mock has exactly one of result or error; tool names must be tools the agent offers (its stored
state); noToolCalls true contradicts toolCalls; replyMatches must compile as a (Python) regular expression that RE2 runs (no backreferences, no lookaround);
no JSON value may hold a NUL character; variables follow the per-call variables' rules."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension

from kit.schema import ANY, VISIBLE
from realtime.agent_tests import validation as v
from realtime.models import AgentTestKind

TEXT_PATTERN = f"^{ANY}*{VISIBLE}{ANY}*$"


def _text(max_chars: int, description: str = "") -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": max_chars, "pattern": TEXT_PATTERN}
    if description:
        schema["description"] = description
    return schema


def _array(items: dict[str, Any], max_items: int, description: str) -> dict[str, Any]:
    return {"type": "array", "items": items, "maxItems": max_items, "description": description}


ARGUMENTS_INCLUDE = {
    "type": "object",
    "description": "Arguments the tool call must include (each key with an equal value; nested objects are "
    "compared the same way, recursively).",
}
TURN = {
    "type": "object",
    "additionalProperties": False,
    "required": ["user"],
    "properties": {"user": _text(v.MAX_TURN_CHARS, "What the caller says (typed, as in a text session).")},
}
CALLER = {
    "type": ["object", "null"],
    "description": "conversation tests: the simulated caller, driven by the configured model (with the "
    "embedded brain, conversation tests need scripted turns).",
    "additionalProperties": False,
    "required": ["persona", "goal"],
    "properties": {
        "persona": _text(v.MAX_CALLER_CHARS, "Who the caller is."),
        "goal": _text(v.MAX_CALLER_CHARS, "What the caller wants to get done."),
        "maxTurns": {
            "type": "integer",
            "minimum": 1,
            "maximum": v.MAX_CALLER_TURNS,
            "description": f"Most caller turns (default {v.DEFAULT_CALLER_TURNS}).",
        },
    },
}
TOOL_NAME = {**_text(v.MAX_TOOL_NAME_CHARS), "description": "A tool the agent offers (custom, MCP or native)."}
TOOL_MOCK = {
    "type": "object",
    "additionalProperties": False,
    "required": ["tool"],
    "description": "What a tool answers in the test, instead of running: exactly one of result or error.",
    "properties": {
        "tool": TOOL_NAME,
        "when": {
            "type": ["object", "null"],
            "additionalProperties": False,
            "required": ["argumentsInclude"],
            "properties": {"argumentsInclude": ARGUMENTS_INCLUDE},
            "description": "Only for calls with these arguments (absent: any call of the tool; the first "
            "matching mock answers).",
        },
        "result": {"description": "The tool's answer (any JSON, at most 16 KB)."},
        "error": _text(v.MAX_MOCK_ERROR_CHARS, "The tool fails with this message."),
    },
}
EXPECT = {
    "type": ["object", "null"],
    "additionalProperties": False,
    "description": "What must happen; a key left out is not checked.",
    "properties": {
        "toolCalls": _array(
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": {
                    "name": TOOL_NAME,
                    "argumentsInclude": {**ARGUMENTS_INCLUDE, "type": ["object", "null"]},
                },
            },
            v.MAX_EXPECTED_TOOL_CALLS,
            "Tools that must be called (in this order, others may come between).",
        ),
        "noToolCalls": {"type": "boolean", "description": "No tool may be called."},
        "replyContains": _array(
            _text(v.MAX_REPLY_CONTAINS_CHARS),
            v.MAX_REPLY_CONTAINS,
            "Texts the agent's replies must contain (case-insensitive).",
        ),
        "replyMatches": _text(
            v.MAX_REGEX_CHARS,
            "A regular expression (Python syntax, matched by RE2 in linear time: no backreferences or lookaround) the replies must match.",
        ),
        "transferred": {"type": "boolean", "description": "Whether the call must be transferred."},
        "ended": {"type": "boolean", "description": "Whether the agent must end the call."},
        "flowPath": {
            **_array(
                _text(v.MAX_NODE_ID_CHARS),
                v.MAX_FLOW_PATH,
                "The node ids the agent's flow must go through, exactly this list from its start (docs/guides/"
                "agent-tests.md); fails on an agent without a flow.",
            ),
            "minItems": 1,
        },
        "collected": {
            "type": "object",
            "maxProperties": v.MAX_COLLECTED,
            "propertyNames": {
                "type": "string",
                "minLength": 1,
                "maxLength": v.MAX_COLLECTED_NAME_CHARS,
                "pattern": TEXT_PATTERN,
            },
            "additionalProperties": {
                "type": ["string", "number", "boolean"],
                "minLength": 1,
                "maxLength": v.MAX_COLLECTED_VALUE_CHARS,
                "pattern": TEXT_PATTERN,
            },
            "description": "Values the agent's flow must have collected, by name (numbers compared as numbers, "
            "texts without case and outer spaces; other collected values may exist); fails on an agent without "
            "a flow.",
        },
        "criteria": _array(
            _text(v.MAX_CRITERION_CHARS),
            v.MAX_CRITERIA,
            "Statements judged by the configured model (pass or fail, with a reason); skipped with the embedded brain.",
        ),
    },
}
PROPERTIES: dict[str, Any] = {
    "name": _text(v.MAX_NAME_CHARS),
    "kind": {
        "type": "string",
        "enum": list(AgentTestKind.values),
        "description": "reply and tool_call: scripted turns; conversation: a simulated caller (or scripted turns).",
    },
    "turns": {**_array(TURN, v.MAX_TURNS, "The caller's turns, in order."), "type": ["array", "null"]},
    "caller": CALLER,
    "variables": {
        "type": ["object", "null"],
        "additionalProperties": {"type": "string"},
        "description": "The call's variables ({{name}} in the prompt and greeting).",
    },
    "toolMocks": {
        **_array(
            TOOL_MOCK,
            v.MAX_MOCKS,
            "Mocked tool results. An unmocked tool call is an error verdict naming it, unless allowRealTools.",
        ),
        "type": ["array", "null"],
    },
    "expect": EXPECT,
    "tags": {
        **_array({"type": "string", "pattern": v.TAG_PATTERN}, v.MAX_TAGS, "Tags (runs may pick tests by tag)."),
        "type": ["array", "null"],
    },
    "allowRealTools": {"type": "boolean", "description": "Unmocked tools really run (default false)."},
}
RULES = (
    " Rules: reply and tool_call tests need at least one turn and no caller; a conversation test needs a caller "
    "or turns; a mock has exactly one of result or error; mocked and expected tool names must be tools the agent "
    "offers (else 400 `unknown tool`); replyMatches must be a valid regular expression; JSON values may not hold "
    "NUL characters."
)


class AgentTestWriteSchema(OpenApiSerializerExtension):
    target_class = "realtime.agent_tests.serializers.AgentTestWriteSerializer"

    def map_serializer(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return {
            "type": "object",
            "required": ["name", "kind"],
            "properties": PROPERTIES,
            "description": "An agent test." + RULES,
        }


class AgentTestPatchSchema(OpenApiSerializerExtension):
    target_class = "realtime.agent_tests.serializers.AgentTestPatchSerializer"

    def map_serializer(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": PROPERTIES,
            "description": "The fields to change (null clears an optional part). The changed test is checked "
            "whole, as a new one." + RULES,
        }


class AgentTestResponseSchema(OpenApiSerializerExtension):
    target_class = "realtime.agent_tests.serializers.AgentTestSchema"

    def map_serializer(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return {
            "type": "object",
            "required": ["id", "agentId", *PROPERTIES, "createdAt", "updatedAt"],
            "properties": {
                "id": {"type": "string", "format": "uuid"},
                "agentId": {"type": "string", "format": "uuid"},
                **PROPERTIES,
                "createdAt": {"type": "string", "format": "date-time"},
                "updatedAt": {"type": "string", "format": "date-time"},
            },
        }
