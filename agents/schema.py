"""OpenAPI of agent bodies: the agent rules that depend only on the body, written as JSON Schema.

agents.services checks them on the resulting agent; for POST and PUT that agent is the body plus the
documented defaults, so the rules can be stated on the body itself (a property that is absent takes its
default, which `properties` leaves unconstrained). PATCH merges with the stored agent: only the field
rules apply to its body.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension, OpenApiSerializerFieldExtension

from agents import flows
from agents.analysis_plan import MAX_PROMPT_CHARS, MAX_PROPERTIES, SCALES
from agents.handoffs import CONTEXT_LAST_N, CONTEXTS, LAST_N_RANGE, MAX_DESCRIPTION_CHARS, MAX_HANDOFFS
from agents.interruption import MAX_BACKCHANNEL_CHARS, MAX_BACKCHANNELS, MIN_WORDS_RANGE, MODES, RESUME_AFTER_MS_RANGE
from agents.keypad import TERMINATORS as KEYPAD_TERMINATORS
from agents.keypad import TIMEOUT_MS_RANGE as KEYPAD_TIMEOUT_MS_RANGE
from agents.serializers import LANGUAGE_PATTERN
from agents.tools.schema import OBJECT_KEYWORDS, SUBSCHEMA
from agents.tools.serializers import TOOL_NAME
from agents.transfer import BRIEFING_STATIC, BRIEFINGS, RING_TIMEOUT_SECONDS_RANGE
from agents.transfer import MAX_MESSAGE_CHARS as MAX_TRANSFER_MESSAGE_CHARS
from agents.transfer import MODES as TRANSFER_MODES
from agents.voicemail import ACTION_LEAVE_MESSAGE, ACTIONS, DETECTIONS, MAX_MESSAGE_CHARS
from kit.schema import ANY, VISIBLE, string_rule, trimmed, trimmed_body

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


# --- analysisPlan (agents/analysis_plan.py) -------------------------------------------------------------
PROMPT: dict[str, Any] = {"type": ["string", "null"], "maxLength": MAX_PROMPT_CHARS, "pattern": f"^{ANY}*$"}
SAID: dict[str, Any] = {"type": "string", "pattern": f"^{ANY}*{VISIBLE}{ANY}*$"}  # not blank
# A property of the fields to extract: a schema with a description (what to look for).
FIELD: dict[str, Any] = {
    "type": "object",
    "properties": {**SUBSCHEMA["properties"], "description": SAID},
    "required": ["description"],
}
EXTRACTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": 'A JSON Schema (draft 2020-12 unless `$schema` names another) of "type": "object" with 1 to '
    f"{MAX_PROPERTIES} properties, each with a description.",
    "properties": {
        **OBJECT_KEYWORDS,
        "type": {"const": "object"},
        "properties": {
            "type": "object",
            "minProperties": 1,
            "maxProperties": MAX_PROPERTIES,
            "additionalProperties": FIELD,
        },
    },
    "required": ["type", "properties"],
}
OFF: dict[str, Any] = {"properties": {"enabled": {"const": False}}, "required": ["enabled"]}


def _part(properties: dict[str, Any], when_on: dict[str, Any] | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "enabled": {"type": "boolean", "description": "Default: true when the part is sent."},
            **properties,
        },
    }
    if when_on is not None:
        part["if"] = OFF
        part["else"] = when_on
    return part


ANALYSIS_PLAN: dict[str, Any] = {
    "type": "object",
    "description": "What is worked out of each call after it ends (docs/guides/post-call-analysis.md). The whole plan is "
    "replaced; a part left out takes its default (summary on, the others off), a part sent without `enabled` is on.",
    "additionalProperties": False,
    "properties": {
        "summary": _part({"prompt": PROMPT}),
        "structuredData": _part(
            {"schema": {"anyOf": [{"type": "null"}, EXTRACTION_SCHEMA]}, "prompt": PROMPT},
            {"properties": {"schema": {"type": "object"}}, "required": ["schema"]},
        ),
        "successEvaluation": _part(
            {"rubric": PROMPT, "scale": {"enum": list(SCALES)}},
            {"properties": {"rubric": SAID}, "required": ["rubric"]},
        ),
    },
}


class AnalysisPlanFieldSchema(OpenApiSerializerFieldExtension):
    target_class = "agents.serializers.AnalysisPlanField"
    priority = 1

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return ANALYSIS_PLAN


# --- keypad (agents/keypad.py) --------------------------------------------------------------------------
KEYPAD: dict[str, Any] = {
    "type": "object",
    "description": "Caller keypad input on phone calls (docs/guides/keypad.md). A key left out takes its default.",
    "additionalProperties": False,
    "properties": {
        "enabled": {
            "type": "boolean",
            "description": 'Gather consecutive keys into one turn ("the caller entered 4 5 6 7"); false: one turn '
            'per key ("the caller pressed 4"). Default true.',
        },
        "timeoutMs": {
            "type": "integer",
            "minimum": KEYPAD_TIMEOUT_MS_RANGE[0],
            "maximum": KEYPAD_TIMEOUT_MS_RANGE[1],
            "description": "How long without a key ends the gathering. Default 2000.",
        },
        "terminator": {
            "enum": list(KEYPAD_TERMINATORS),
            "description": 'The key that ends the gathering at once (not part of the digits); "" for none. '
            'Default "#".',
        },
    },
}


class KeypadFieldSchema(OpenApiSerializerFieldExtension):
    target_class = "agents.serializers.KeypadField"
    priority = 1

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return KEYPAD


# --- voicemail (agents/voicemail.py) ------------------------------------------------------------------
VOICEMAIL: dict[str, Any] = {
    "type": "object",
    "description": "Outbound calls: answering-machine detection and what to do on a machine (docs/guides/voicemail.md). "
    "A key left out takes its default (detection off, action hang-up, message empty); message is required with "
    "leave-message.",
    "additionalProperties": False,
    "properties": {
        "detection": {"enum": list(DETECTIONS), "description": "provider: the carrier's answering-machine detection."},
        "action": {"enum": list(ACTIONS), "description": "What to do when a machine answers."},
        "message": {
            "type": ["string", "null"],
            "maxLength": MAX_MESSAGE_CHARS,
            "pattern": f"^{ANY}*$",
            "description": "Spoken after the beep with leave-message; {{variables}} are filled from the call's.",
        },
    },
    "if": {"properties": {"action": {"const": ACTION_LEAVE_MESSAGE}}, "required": ["action"]},
    "then": {
        "properties": {"message": {"type": "string", "pattern": f"^{ANY}*{VISIBLE}{ANY}*$"}},
        "required": ["message"],
    },
}


class VoicemailFieldSchema(OpenApiSerializerFieldExtension):
    target_class = "agents.serializers.VoicemailField"
    priority = 1

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return VOICEMAIL


# --- interruption (agents/interruption.py) --------------------------------------------------------------
INTERRUPTION: dict[str, Any] = {
    "type": "object",
    "description": "What the caller's speech does while the agent speaks (docs/guides/conversation.md). A key left out "
    "takes its default.",
    "additionalProperties": False,
    "properties": {
        "mode": {
            "enum": list(MODES),
            "description": "adaptive (default): only words that are not a backchannel cut the agent; a cough, noise or "
            '"okay" does not. vad: any speech cuts the agent, which resumes its sentence after resumeAfterMs when '
            "what cut it held no words. off: the caller cannot cut the agent; what they say is the next turn. The AI "
            "identity disclosure and a goodbye are never cut.",
        },
        "minWords": {
            "type": "integer",
            "minimum": MIN_WORDS_RANGE[0],
            "maximum": MIN_WORDS_RANGE[1],
            "description": "adaptive: how many words that are not backchannels make a real interruption (0 and 1: "
            "one word). Default 1.",
        },
        "backchannels": {
            "type": ["array", "null"],
            "maxItems": MAX_BACKCHANNELS,
            # At least one letter or digit: a phrase of punctuation alone is refused (it holds no word).
            "items": {"type": "string", "maxLength": MAX_BACKCHANNEL_CHARS, "pattern": f"^{ANY}*[^\\W_]{ANY}*$"},
            "description": 'Phrases that acknowledge without taking the turn ("okay", "mm-hmm", "I see"); matched '
            "without case, punctuation or hyphens. null (default): the agent language's default list; []: none.",
        },
        "resumeAfterMs": {
            "type": "integer",
            "minimum": RESUME_AFTER_MS_RANGE[0],
            "maximum": RESUME_AFTER_MS_RANGE[1],
            "description": "vad: how long after a false interruption (no words) the agent resumes. Default 400.",
        },
    },
}


class InterruptionFieldSchema(OpenApiSerializerFieldExtension):
    target_class = "agents.serializers.InterruptionField"
    priority = 1

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return INTERRUPTION


# --- transfer (agents/transfer.py) ---------------------------------------------------------------------
TRANSFER: dict[str, Any] = {
    "type": "object",
    "description": "How transfer_call passes the caller to a person (docs/guides/phone-calls.md#warm-transfers). A "
    'key left out takes its default; message is required (not blank) with briefing "static".',
    "additionalProperties": False,
    "properties": {
        "mode": {
            "enum": list(TRANSFER_MODES),
            "description": "cold (default): the call is handed to the number at once. warm: the caller holds while "
            "the person is called and briefed; they press 1 to take the call, otherwise the caller is back with the "
            "agent.",
        },
        "briefing": {
            "enum": list(BRIEFINGS),
            "description": "What the person hears on a warm transfer: summary (default), a summary of the call so "
            "far by the agent's brain; static, the message.",
        },
        "message": {
            "type": "string",
            "maxLength": MAX_TRANSFER_MESSAGE_CHARS,
            "pattern": f"^{ANY}*$",
            "description": "The briefing with briefing static; {{variables}} are filled from the call's. Stored "
            'trimmed. Default "".',
        },
        "ringTimeoutSeconds": {
            "type": "integer",
            "minimum": RING_TIMEOUT_SECONDS_RANGE[0],
            "maximum": RING_TIMEOUT_SECONDS_RANGE[1],
            "description": "How long the person's phone rings before the caller is back with the agent. Default 30.",
        },
    },
    "if": {"properties": {"briefing": {"const": BRIEFING_STATIC}}, "required": ["briefing"]},
    "then": {
        "properties": {"message": {"type": "string", "pattern": f"^{ANY}*{VISIBLE}{ANY}*$"}},
        "required": ["message"],
    },
}


class TransferFieldSchema(OpenApiSerializerFieldExtension):
    target_class = "agents.serializers.TransferField"
    priority = 1

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return TRANSFER


# --- handoffs (agents/handoffs.py) ---------------------------------------------------------------------
HANDOFF: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "agentId": {
            "type": "string",
            "format": "uuid",
            "description": "The agent to hand off to: an active agent of the organization, not this one, at most "
            "once in the list.",
        },
        "description": {
            "type": "string",
            "maxLength": MAX_DESCRIPTION_CHARS,
            "pattern": f"^{ANY}*{VISIBLE}{ANY}*$",  # not blank; stored trimmed
            "description": "When to hand off to this agent, in words the brain reads.",
        },
        "context": {
            "enum": list(CONTEXTS),
            "description": "What of the conversation goes with the call: all (default), lastN (the last lastN "
            "turns said aloud), summary (a summary written by the brain) or none.",
        },
        "lastN": {
            "type": ["integer", "null"],
            "minimum": LAST_N_RANGE[0],
            "maximum": LAST_N_RANGE[1],
            "description": 'With context "lastN" (required there): how many turns go along; null otherwise.',
        },
    },
    "required": ["agentId", "description"],
    "if": {"properties": {"context": {"const": CONTEXT_LAST_N}}, "required": ["context"]},
    "then": {"properties": {"lastN": {"type": "integer"}}, "required": ["lastN"]},
    "else": {"properties": {"lastN": {"type": "null"}}},
}
HANDOFFS: dict[str, Any] = {
    "type": "array",
    "maxItems": MAX_HANDOFFS,
    "items": HANDOFF,
    "description": "The other agents of the organization this agent may hand a call to, and when. Each target "
    "must be an active agent of the organization (checked when the list is written). Default [].",
}


class HandoffsFieldSchema(OpenApiSerializerFieldExtension):
    target_class = "agents.serializers.HandoffsField"
    priority = 1

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return HANDOFFS


# --- flow (agents/flows.py) ------------------------------------------------------------------------------
def _said(limit: int, *, blank: bool = False) -> dict[str, Any]:
    """A text of at most `limit` characters as sent (stored trimmed), not blank unless `blank`."""
    pattern = f"^{ANY}*$" if blank else f"^{ANY}*{VISIBLE}{ANY}*$"
    return {"type": "string", "maxLength": limit, "pattern": pattern}


_NODE_ID = {"type": "string", "pattern": f"^{flows.NODE_ID.pattern}$"}


def _step(description: str) -> dict[str, Any]:
    return {**_NODE_ID, "description": description}


_FIELD_NAME = {"type": "string", "pattern": f"^{flows.FIELD_NAME.pattern}$"}
_SCALAR = {"anyOf": [{"type": "string", "maxLength": flows.MAX_COMPARED_CHARS}, {"type": ["number", "boolean"]}]}


def _object(properties: dict[str, Any], required: list[str], direction: str, **rest: Any) -> dict[str, Any]:
    """An object of exactly these keys: in a response every key is there (stored normalized)."""
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
        "required": list(properties) if direction == "response" else required,
        **rest,
    }


def _collect_field(direction: str) -> dict[str, Any]:
    return _object(
        {
            "name": {**_FIELD_NAME, "description": "Kept as {{collected.<name>}}; unique within the step."},
            "type": {"enum": list(flows.FIELD_TYPES)},
            "values": {
                "type": ["array", "null"],
                "minItems": 1,
                "maxItems": flows.MAX_VALUES,
                "items": _said(flows.MAX_VALUE_CHARS),
                "description": 'The values the caller may give: required with type "enum", null otherwise.',
            },
            "min": {"type": ["number", "null"], "description": 'Type "number" only: the lowest value (at most max).'},
            "max": {"type": ["number", "null"], "description": 'Type "number" only: the highest value.'},
            "prompt": {**_said(flows.MAX_PROMPT_CHARS), "description": "What the agent asks for the value."},
            "required": {"type": "boolean", "description": "Default true: the step waits until it has the value."},
        },
        ["name", "type", "prompt"],
        direction,
        allOf=[
            {
                "if": {"properties": {"type": {"const": "enum"}}, "required": ["type"]},
                "then": {"properties": {"values": {"type": "array"}}, "required": ["values"]},
                "else": {"properties": {"values": {"type": "null"}}},
            },
            {
                "if": {"properties": {"type": {"not": {"const": "number"}}}, "required": ["type"]},
                "then": {"properties": {"min": {"type": "null"}, "max": {"type": "null"}}},
            },
        ],
    )


def _when(direction: str) -> dict[str, Any]:
    def op_is(*ops: str) -> dict[str, Any]:
        return {"properties": {"op": {"enum": list(ops)}}, "required": ["op"]}

    return _object(
        {
            "field": {**_FIELD_NAME, "description": "A field some collect step of the flow collects."},
            "op": {"enum": list(flows.OPS)},
            "value": {
                "description": "null (or left out) with exists; a number with lt and gt; a list of 1 to "
                f"{flows.MAX_IN_VALUES} strings, numbers or booleans with in; a string, number or boolean with eq and ne."
            },
        },
        ["field", "op"],
        direction,
        allOf=[
            {"if": op_is("exists"), "then": {"properties": {"value": {"type": "null"}}}},
            {"if": op_is("lt", "gt"), "then": {"properties": {"value": {"type": "number"}}, "required": ["value"]}},
            {
                "if": op_is("in"),
                "then": {
                    "properties": {
                        "value": {"type": "array", "minItems": 1, "maxItems": flows.MAX_IN_VALUES, "items": _SCALAR}
                    },
                    "required": ["value"],
                },
            },
            {"if": op_is("eq", "ne"), "then": {"properties": {"value": _SCALAR}, "required": ["value"]}},
        ],
    )


def _nodes(direction: str) -> dict[str, dict[str, Any]]:
    def node(kind: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
        return _object({"type": {"const": kind}, **properties}, ["type", *required], direction, description=description)

    next_step = _step("The id of the step that comes next.")
    return {
        "say": node(
            "say",
            "Says fixed words ({{placeholders}} filled), without a model.",
            {"text": _said(flows.MAX_SAY_CHARS), "next": next_step},
            ["text", "next"],
        ),
        "collect": node(
            "collect",
            "Asks for the values it does not have yet, checks them, asks again on a bad one.",
            {
                "fields": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": flows.MAX_FIELDS,
                    "items": _collect_field(direction),
                },
                "next": next_step,
            },
            ["fields", "next"],
        ),
        "tool": node(
            "tool",
            "Calls one of the agent's enabled custom tools by name (checked when the flow is written).",
            {
                "tool": {"type": "string", "pattern": f"^{TOOL_NAME.pattern.removeprefix('^').removesuffix('$')}$"},
                "arguments": {
                    "type": "object",
                    "maxProperties": flows.MAX_ARGUMENTS,
                    "description": 'Default {}. A string that is only "{{collected.<name>}}" is the value as collected.',
                },
                "next": next_step,
                "onError": _step("Where the flow goes when the tool fails."),
            },
            ["tool", "next", "onError"],
        ),
        "branch": node(
            "branch",
            "Goes to the next of the first rule that holds, else to else.",
            {
                "rules": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": flows.MAX_RULES,
                    "items": _object({"when": _when(direction), "next": next_step}, ["when", "next"], direction),
                },
                "else": _step("Where the flow goes when no rule holds."),
            },
            ["rules", "else"],
        ),
        "conversation": node(
            "conversation",
            "A free conversation with the language model until it takes one of the exits.",
            {
                "instructions": _said(flows.MAX_INSTRUCTIONS_CHARS),
                "exits": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": flows.MAX_EXITS,
                    "items": _object(
                        {"description": _said(flows.MAX_DESCRIPTION_CHARS), "next": next_step},
                        ["description", "next"],
                        direction,
                    ),
                },
            },
            ["instructions", "exits"],
        ),
        "handoff": node(
            "handoff",
            "Hands the call to another active agent of the organization (not this one).",
            {"agentId": {"type": "string", "format": "uuid"}},
            ["agentId"],
        ),
        "transfer": node(
            "transfer",
            "Transfers the call to a person.",
            {
                "phoneNumber": {"type": "string", "format": "e164", "pattern": "^\\+[1-9][0-9]{1,14}$"},
                "mode": {"enum": list(flows.TRANSFER_MODES), "description": "Default cold."},
            },
            ["phoneNumber"],
        ),
        "end": node(
            "end",
            "Says its words (may be empty, the default) and ends the call.",
            {"text": _said(flows.MAX_END_CHARS, blank=True)},
            [],
        ),
    }


def flow_schema(direction: str) -> dict[str, Any]:
    """The flow's object (drf-spectacular adds the null of the nullable field)."""
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["start", "nodes"],
        "properties": {
            "start": _step("The id of the first step."),
            "nodes": {
                "type": "object",
                "minProperties": 1,
                "maxProperties": flows.MAX_NODES,
                "propertyNames": _NODE_ID,
                "additionalProperties": {"oneOf": list(_nodes(direction).values())},
            },
        },
        "description": "Fixed steps that run the conversation (docs/guides/flows.md), or null (default). Checked "
        "when written, each refusal naming the step: every step named exists and is reachable from start, a "
        "branch reads only collected fields, no loop of say, tool and branch steps alone, a tool step names an "
        "enabled custom tool of the agent (so a flow with tool steps is set with PUT or PATCH once the tools "
        "exist), a handoff step an active agent of the organization other than this one.",
    }


class FlowFieldSchema(OpenApiSerializerFieldExtension):
    target_class = "agents.serializers.FlowField"
    priority = 1

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return flow_schema(direction)
