"""An agent's `flow`: fixed steps that run the conversation (issue 39, docs/guides/flows.md).

`{start, nodes: {<id>: node}}` (default null: no flow). Node ids are 1 to 64 letters, digits, `_` or
`-`; at most MAX_NODES nodes; `start` names one. Each node has a `type`:
- `say` `{text, next}`: fixed words ({{placeholders}} filled on the call), then the next step;
- `collect` `{fields: [{name, type, values, min, max, prompt, required}], next}`: asks for what is missing;
- `tool` `{tool, arguments, next, onError}`: calls one of the agent's custom tools by name;
- `branch` `{rules: [{when: {field, op, value}, next}], else}`: the first rule that holds decides;
- `conversation` `{instructions, exits: [{description, next}]}`: the language model, until an exit;
- `handoff` `{agentId}`, `transfer` `{phoneNumber, mode}`, `end` `{text}`: the call goes on elsewhere or ends.

normalize_flow checks what the body alone decides, the shape and the graph, and returns the flow as stored
(every key present, texts trimmed, defaults filled), so that the runtime (realtime/engine/brain/flow.py)
needs no defaults; FlowError names the place inside the flow (`nodes.book.next`, the API's issue
`flow.nodes.book.next`). The graph: every step a `next`, `else`, `onError` or exit names exists; every
step is reachable from `start`; a branch reads only fields some collect step collects; no loop of steps
that never wait for the caller (say, tool, branch). What needs the database (a tool step's tool is an
enabled custom tool of the agent, a handoff step's agent an active agent of the organization) is the agent
services' rule (agents/services.py, _check_flow).
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Iterator
from typing import Any

from agents.handoffs import AGENT_ID
from agents.tools.serializers import TOOL_NAME
from kit.text import text_problem
from kit.validation import e164_problem

FIELD = "flow"  # the wire name
MAX_NODES = 100
NODE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
FIELD_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
NODE_TYPES = ("say", "collect", "tool", "branch", "conversation", "handoff", "transfer", "end")
# Each type's keys, in their stored order.
NODE_KEYS: dict[str, tuple[str, ...]] = {
    "say": ("type", "text", "next"),
    "collect": ("type", "fields", "next"),
    "tool": ("type", "tool", "arguments", "next", "onError"),
    "branch": ("type", "rules", "else"),
    "conversation": ("type", "instructions", "exits"),
    "handoff": ("type", "agentId"),
    "transfer": ("type", "phoneNumber", "mode"),
    "end": ("type", "text"),
}
# The steps that wait for the caller: a loop must hold one of them.
WAITING_TYPES = ("collect", "conversation")
FIELD_TYPES = ("string", "number", "date", "time", "phone", "email", "enum")
FIELD_KEYS = ("name", "type", "values", "min", "max", "prompt", "required")
OPS = ("eq", "ne", "lt", "gt", "in", "exists")
TRANSFER_MODES = ("cold", "warm")
MAX_SAY_CHARS = 1000
MAX_END_CHARS = 1000
MAX_PROMPT_CHARS = 500
MAX_INSTRUCTIONS_CHARS = 4000
MAX_DESCRIPTION_CHARS = 500
MAX_FIELDS = 20
MAX_VALUES = 50
MAX_VALUE_CHARS = 200
MAX_RULES = 20
MAX_EXITS = 10
MAX_ARGUMENTS = 50
MAX_IN_VALUES = 50
MAX_COMPARED_CHARS = 500

NO_NODE = "No node '{}' in the flow."
UNREACHABLE = "Not reachable from the start node '{}'."
NOT_COLLECTED = "No collect step collects '{}'."
SILENT_LOOP = "This step is in a loop with no collect or conversation step: the call would never wait for the caller."


class FlowError(ValueError):
    """An invalid flow: `key` is the place inside it ("nodes.book.next", "start"), or "" for the flow itself."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}" if key else message)
        self.key = key
        self.message = message

    @property
    def field(self) -> str:
        """The place as the API's issues name it: `flow.nodes.book.next`, `flow`."""
        return issue_key(self.key)


def issue_key(inner: str) -> str:
    """The issue key of a place inside the flow (`nodes.book` -> `flow.nodes.book`; "" -> `flow`)."""
    return f"{FIELD}.{inner}" if inner else FIELD


def normalize_flow(value: Any) -> dict[str, Any]:
    """The flow as stored, from a request body's `flow` (not null); FlowError when it is not valid."""
    if not isinstance(value, dict):
        raise FlowError("", 'Must be a JSON object {"start": "<node id>", "nodes": {"<node id>": {...}}}, or null.')
    _known_keys(value, ("start", "nodes"), "", "start and nodes")
    if "nodes" not in value:
        raise FlowError("nodes", 'Required: the steps by id, {"<node id>": {"type": ..., ...}}.')
    nodes = value["nodes"]
    if not isinstance(nodes, dict) or not nodes:
        raise FlowError("nodes", 'Must be a JSON object of at least one step by id, {"<node id>": {...}}.')
    if len(nodes) > MAX_NODES:
        raise FlowError("nodes", f"At most {MAX_NODES} steps (this flow has {len(nodes)}).")
    normalized: dict[str, dict[str, Any]] = {}
    for node_id, node in nodes.items():
        if not NODE_ID.fullmatch(node_id):
            raise FlowError(
                f"nodes.{_clipped(node_id)}", "A step id is 1 to 64 letters, digits, _ or - (no spaces or dots)."
            )
        normalized[node_id] = _node(node, f"nodes.{node_id}")
    if "start" not in value:
        raise FlowError("start", "Required: the id of the first step.")
    start = value["start"]
    if not isinstance(start, str):
        raise FlowError("start", f"Must be the id of a step of the flow, not {_shown(start)}.")
    if start not in normalized:
        raise FlowError("start", NO_NODE.format(_clipped(start)))
    _check_graph(start, normalized)
    return {"start": start, "nodes": normalized}


def flow_of(stored: Any) -> dict[str, Any] | None:
    """An agent's stored flow as the dashboard shows it: None when there is none or it is not valid
    (written around the API)."""
    if stored is None:
        return None
    try:
        return normalize_flow(stored)
    except FlowError:
        return None


def next_steps(node: dict[str, Any]) -> list[tuple[str, str]]:
    """Where a stored step goes: (label, node id) pairs in the step's order."""
    kind = node.get("type")
    if kind in ("say", "collect"):
        return [("next", node["next"])]
    if kind == "tool":
        return [("next", node["next"]), ("on error", node["onError"])]
    if kind == "branch":
        rules = [(_rule_label(rule["when"]), rule["next"]) for rule in node["rules"]]
        return [*rules, ("else", node["else"])]
    if kind == "conversation":
        return [(f"exit: {way['description']}", way["next"]) for way in node["exits"]]
    return []


def steps_in_order(flow: dict[str, Any]) -> list[str]:
    """The ids of a stored flow's steps from its start, each once, breadth first (the ways out of each step
    in their order); steps not reached after them."""
    nodes: dict[str, dict[str, Any]] = flow["nodes"]
    order = _reached(flow["start"], nodes)
    return [*order, *(node_id for node_id in nodes if node_id not in order)]


def tool_steps(flow: dict[str, Any] | None) -> Iterator[tuple[str, str]]:
    """(node id, tool name) of each tool step of a stored flow, in the flow's order."""
    for node_id, node in ((flow or {}).get("nodes") or {}).items():
        if node.get("type") == "tool":
            yield node_id, node["tool"]


def handoff_steps(flow: dict[str, Any] | None) -> Iterator[tuple[str, str]]:
    """(node id, agent id) of each handoff step of a stored flow, in the flow's order."""
    for node_id, node in ((flow or {}).get("nodes") or {}).items():
        if node.get("type") == "handoff":
            yield node_id, node["agentId"]


# --- one step ----------------------------------------------------------------------------------------------


def _node(node: Any, at: str) -> dict[str, Any]:
    if not isinstance(node, dict):
        raise FlowError(at, f"Must be a JSON object with a type: {', '.join(NODE_TYPES)}.")
    if "type" not in node:
        raise FlowError(f"{at}.type", f"Required: one of {', '.join(NODE_TYPES)}.")
    kind = node["type"]
    if not isinstance(kind, str) or kind not in NODE_TYPES:
        raise FlowError(f"{at}.type", f"Must be one of {', '.join(NODE_TYPES)}, not {_shown(kind)}.")
    keys = NODE_KEYS[kind]
    article = "an" if kind[0] in "aeiou" else "a"
    _known_keys(node, keys, at, f"those of {article} {kind} step: {', '.join(keys)}")
    if kind == "say":
        return {"type": kind, "text": _text(node, "text", at, MAX_SAY_CHARS), "next": _ref(node, "next", at)}
    if kind == "collect":
        return {"type": kind, "fields": _fields(node, at), "next": _ref(node, "next", at)}
    if kind == "tool":
        return {
            "type": kind,
            "tool": _tool(node, at),
            "arguments": _arguments(node, at),
            "next": _ref(node, "next", at),
            "onError": _ref(node, "onError", at),
        }
    if kind == "branch":
        return {"type": kind, "rules": _rules(node, at), "else": _ref(node, "else", at)}
    if kind == "conversation":
        return {
            "type": kind,
            "instructions": _text(node, "instructions", at, MAX_INSTRUCTIONS_CHARS),
            "exits": _exits(node, at),
        }
    if kind == "handoff":
        return {"type": kind, "agentId": _agent_id(node, at)}
    if kind == "transfer":
        return {"type": kind, "phoneNumber": _phone_number(node, at), "mode": _transfer_mode(node, at)}
    return {"type": kind, "text": _text(node, "text", at, MAX_END_CHARS, required=False)}


def _known_keys(item: dict[str, Any], keys: tuple[str, ...], at: str, which: str) -> None:
    unknown = sorted(str(key) for key in item if key not in keys)
    if unknown:
        raise FlowError(_join(at, _clipped(unknown[0])), f"Unknown key; the keys are {which}.")


def _text(item: dict[str, Any], key: str, at: str, limit: int, *, required: bool = True) -> str:
    """A text of the item as stored (trimmed): at most `limit` characters as sent; not blank unless optional."""
    place = _join(at, key)
    if key not in item:
        if required:
            raise FlowError(place, f"Required: a text of at most {limit} characters.")
        return ""
    return _text_value(item[key], place, limit, required=required)


def _text_value(value: Any, place: str, limit: int, *, required: bool = True) -> str:
    if not isinstance(value, str):
        raise FlowError(place, f"Must be a string of at most {limit} characters, not {_shown(value)}.")
    if len(value) > limit:
        raise FlowError(place, f"At most {limit} characters (this one has {len(value)}).")
    if text_problem(value) is not None:
        raise FlowError(place, "May not contain NUL or surrogate characters.")
    value = value.strip()
    if required and not value:
        raise FlowError(place, "May not be blank.")
    return value


def _ref(item: dict[str, Any], key: str, at: str) -> str:
    """A step id another step names (whether that step exists is the graph's check)."""
    place = _join(at, key)
    if key not in item:
        raise FlowError(place, "Required: the id of the step to go to.")
    value = item[key]
    if not isinstance(value, str):
        raise FlowError(place, f"Must be the id of a step of the flow, not {_shown(value)}.")
    return value


def _fields(node: dict[str, Any], at: str) -> list[dict[str, Any]]:
    place = f"{at}.fields"
    if "fields" not in node:
        raise FlowError(place, f"Required: the values to ask for, 1 to {MAX_FIELDS} {{name, type, prompt}} objects.")
    fields = node["fields"]
    if not isinstance(fields, list) or not fields:
        raise FlowError(place, f"Must be a list of 1 to {MAX_FIELDS} {{name, type, prompt, ...}} objects.")
    if len(fields) > MAX_FIELDS:
        raise FlowError(place, f"At most {MAX_FIELDS} fields (this list has {len(fields)}).")
    normalized: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for index, spec in enumerate(fields):
        field = _field(spec, f"{place}.{index}")
        first = seen.setdefault(field["name"], index)
        if first != index:
            raise FlowError(
                f"{place}.{index}.name", f"Another field of this step has this name ({issue_key(f'{place}.{first}')})."
            )
        normalized.append(field)
    return normalized


def _field(spec: Any, at: str) -> dict[str, Any]:
    if not isinstance(spec, dict):
        raise FlowError(at, "Must be a JSON object with name, type and prompt.")
    _known_keys(spec, FIELD_KEYS, at, ", ".join(FIELD_KEYS))
    if "name" not in spec:
        raise FlowError(f"{at}.name", "Required: the name the value is kept under ({{collected.<name>}}).")
    name = spec["name"]
    if not isinstance(name, str) or not FIELD_NAME.fullmatch(name):
        raise FlowError(
            f"{at}.name",
            "Must be a lower-case letter then up to 39 lower-case letters, digits or _ (party_size), "
            f"not {_shown(name)}.",
        )
    if "type" not in spec:
        raise FlowError(f"{at}.type", f"Required: one of {', '.join(FIELD_TYPES)}.")
    kind = spec["type"]
    if not isinstance(kind, str) or kind not in FIELD_TYPES:
        raise FlowError(f"{at}.type", f"Must be one of {', '.join(FIELD_TYPES)}, not {_shown(kind)}.")
    values = _values(spec, kind, at)
    low, high = _bound(spec, "min", kind, at), _bound(spec, "max", kind, at)
    if low is not None and high is not None and low > high:
        raise FlowError(f"{at}.max", f"Must be at least min ({_number_text(low)}), not {_number_text(high)}.")
    prompt = _text(spec, "prompt", at, MAX_PROMPT_CHARS)
    required = spec.get("required", True)
    if not isinstance(required, bool):
        raise FlowError(f"{at}.required", f"Must be true or false, not {_shown(required)}.")
    return {
        "name": name,
        "type": kind,
        "values": values,
        "min": low,
        "max": high,
        "prompt": prompt,
        "required": required,
    }


def _values(spec: dict[str, Any], kind: str, at: str) -> list[str] | None:
    place = f"{at}.values"
    values = spec.get("values")
    if kind != "enum":
        if values is not None:
            raise FlowError(place, f'Only with type "enum" (this field\'s type is "{kind}").')
        return None
    if values is None:
        raise FlowError(place, f'Required with type "enum": the 1 to {MAX_VALUES} values the caller may give.')
    if not isinstance(values, list) or not values:
        raise FlowError(place, f"Must be a list of 1 to {MAX_VALUES} strings.")
    if len(values) > MAX_VALUES:
        raise FlowError(place, f"At most {MAX_VALUES} values (this list has {len(values)}).")
    return [_text_value(item, f"{place}.{index}", MAX_VALUE_CHARS) for index, item in enumerate(values)]


def _bound(spec: dict[str, Any], key: str, kind: str, at: str) -> int | float | None:
    place = f"{at}.{key}"
    value = spec.get(key)
    if value is None:
        return None
    if kind != "number":
        raise FlowError(place, f'Only with type "number" (this field\'s type is "{kind}").')
    if not _is_number(value):
        raise FlowError(place, f"Must be a number or null, not {_shown(value)}.")
    return value


def _tool(node: dict[str, Any], at: str) -> str:
    place = f"{at}.tool"
    if "tool" not in node:
        raise FlowError(place, "Required: the name of one of the agent's custom tools.")
    value = node["tool"]
    if not isinstance(value, str) or not TOOL_NAME.fullmatch(value):
        raise FlowError(place, f"Must be a custom tool's name (1 to 64 letters, digits, _ or -), not {_shown(value)}.")
    return value


def _arguments(node: dict[str, Any], at: str) -> dict[str, Any]:
    value = node.get("arguments", {})
    if not isinstance(value, dict):
        raise FlowError(f"{at}.arguments", "Must be a JSON object of the tool's arguments by name.")
    if len(value) > MAX_ARGUMENTS:
        raise FlowError(f"{at}.arguments", f"At most {MAX_ARGUMENTS} arguments (this object has {len(value)}).")
    return value


def _rules(node: dict[str, Any], at: str) -> list[dict[str, Any]]:
    place = f"{at}.rules"
    if "rules" not in node:
        raise FlowError(place, f"Required: 1 to {MAX_RULES} {{when, next}} rules.")
    rules = node["rules"]
    if not isinstance(rules, list) or not rules:
        raise FlowError(place, f"Must be a list of 1 to {MAX_RULES} {{when, next}} objects.")
    if len(rules) > MAX_RULES:
        raise FlowError(place, f"At most {MAX_RULES} rules (this list has {len(rules)}).")
    normalized = []
    for index, rule in enumerate(rules):
        rule_at = f"{place}.{index}"
        if not isinstance(rule, dict):
            raise FlowError(rule_at, "Must be a JSON object with when and next.")
        _known_keys(rule, ("when", "next"), rule_at, "when and next")
        normalized.append({"when": _when(rule, rule_at), "next": _ref(rule, "next", rule_at)})
    return normalized


def _when(rule: dict[str, Any], at: str) -> dict[str, Any]:
    place = f"{at}.when"
    if "when" not in rule:
        raise FlowError(place, "Required: the condition, {field, op, value}.")
    when = rule["when"]
    if not isinstance(when, dict):
        raise FlowError(place, "Must be a JSON object with field, op and value.")
    _known_keys(when, ("field", "op", "value"), place, "field, op and value")
    if "field" not in when:
        raise FlowError(f"{place}.field", "Required: the name of a collected field.")
    field = when["field"]
    if not isinstance(field, str) or not FIELD_NAME.fullmatch(field):
        raise FlowError(f"{place}.field", f"Must be the name of a collected field, not {_shown(field)}.")
    if "op" not in when:
        raise FlowError(f"{place}.op", f"Required: one of {', '.join(OPS)}.")
    op = when["op"]
    if not isinstance(op, str) or op not in OPS:
        raise FlowError(f"{place}.op", f"Must be one of {', '.join(OPS)}, not {_shown(op)}.")
    return {"field": field, "op": op, "value": _compared(when, op, f"{place}.value")}


def _compared(when: dict[str, Any], op: str, place: str) -> Any:
    value = when.get("value")
    if op == "exists":
        if value is not None:
            raise FlowError(place, 'Must be null or left out with op "exists".')
        return None
    if value is None:
        raise FlowError(place, f'Required with op "{op}".')
    if op in ("lt", "gt"):
        if not _is_number(value):
            raise FlowError(place, f'Must be a number with op "{op}", not {_shown(value)}.')
        return value
    if op == "in":
        if not isinstance(value, list) or not value or len(value) > MAX_IN_VALUES:
            raise FlowError(place, f'Must be a list of 1 to {MAX_IN_VALUES} values with op "in".')
        for index, item in enumerate(value):
            _scalar(item, f"{place}.{index}")
        return value
    _scalar(value, place)
    return value


def _scalar(value: Any, place: str) -> None:
    if isinstance(value, str):
        if len(value) > MAX_COMPARED_CHARS:
            raise FlowError(place, f"At most {MAX_COMPARED_CHARS} characters (this one has {len(value)}).")
        return
    if not (isinstance(value, bool) or _is_number(value)):
        raise FlowError(place, f"Must be a string, a number, true or false, not {_shown(value)}.")


def _exits(node: dict[str, Any], at: str) -> list[dict[str, Any]]:
    place = f"{at}.exits"
    if "exits" not in node:
        raise FlowError(place, f"Required: 1 to {MAX_EXITS} {{description, next}} ways out of the conversation.")
    exits = node["exits"]
    if not isinstance(exits, list) or not exits:
        raise FlowError(place, f"Must be a list of 1 to {MAX_EXITS} {{description, next}} objects.")
    if len(exits) > MAX_EXITS:
        raise FlowError(place, f"At most {MAX_EXITS} exits (this list has {len(exits)}).")
    normalized = []
    for index, way in enumerate(exits):
        way_at = f"{place}.{index}"
        if not isinstance(way, dict):
            raise FlowError(way_at, "Must be a JSON object with description and next.")
        _known_keys(way, ("description", "next"), way_at, "description and next")
        normalized.append(
            {
                "description": _text(way, "description", way_at, MAX_DESCRIPTION_CHARS),
                "next": _ref(way, "next", way_at),
            }
        )
    return normalized


def _agent_id(node: dict[str, Any], at: str) -> str:
    place = f"{at}.agentId"
    if "agentId" not in node:
        raise FlowError(place, "Required: the id of the agent to hand the call to.")
    value = node["agentId"]
    if not isinstance(value, str) or not AGENT_ID.fullmatch(value):
        raise FlowError(place, f"Must be an agent's id (a UUID), not {_shown(value)}.")
    return str(uuid.UUID(value))


def _phone_number(node: dict[str, Any], at: str) -> str:
    place = f"{at}.phoneNumber"
    if "phoneNumber" not in node:
        raise FlowError(place, "Required: the E.164 number to transfer the call to, for example +14155550123.")
    value = node["phoneNumber"]
    problem = e164_problem(value) if isinstance(value, str) else "Must be a phone number in E.164 format."
    if problem:
        raise FlowError(place, problem)
    return str(value)


def _transfer_mode(node: dict[str, Any], at: str) -> str:
    value = node.get("mode", "cold")
    if not isinstance(value, str) or value not in TRANSFER_MODES:
        raise FlowError(f"{at}.mode", f"Must be one of {', '.join(TRANSFER_MODES)}, not {_shown(value)}.")
    return value


# --- the graph -----------------------------------------------------------------------------------------


def _ways(node: dict[str, Any]) -> list[tuple[str, str]]:
    """(place inside the step, step id) of every way out of a normalized step, in the step's order."""
    kind = node["type"]
    if kind in ("say", "collect"):
        return [("next", node["next"])]
    if kind == "tool":
        return [("next", node["next"]), ("onError", node["onError"])]
    if kind == "branch":
        rules = [(f"rules.{index}.next", rule["next"]) for index, rule in enumerate(node["rules"])]
        return [*rules, ("else", node["else"])]
    if kind == "conversation":
        return [(f"exits.{index}.next", way["next"]) for index, way in enumerate(node["exits"])]
    return []


def _reached(start: str, nodes: dict[str, dict[str, Any]]) -> list[str]:
    order = [start]
    seen = {start}
    for node_id in order:  # grows while read: breadth first
        for _, target in _ways(nodes[node_id]) if node_id in nodes else []:
            if target in nodes and target not in seen:
                seen.add(target)
                order.append(target)
    return order


def _check_graph(start: str, nodes: dict[str, dict[str, Any]]) -> None:
    for node_id, node in nodes.items():
        for place, target in _ways(node):
            if target not in nodes:
                raise FlowError(f"nodes.{node_id}.{place}", NO_NODE.format(_clipped(target)))
    order = _reached(start, nodes)
    reached = set(order)
    for node_id in nodes:
        if node_id not in reached:
            raise FlowError(f"nodes.{node_id}", UNREACHABLE.format(start))
    collected = {field["name"] for node in nodes.values() if node["type"] == "collect" for field in node["fields"]}
    for node_id, node in nodes.items():
        for index, rule in enumerate(node["rules"] if node["type"] == "branch" else []):
            if rule["when"]["field"] not in collected:
                raise FlowError(
                    f"nodes.{node_id}.rules.{index}.when.field", NOT_COLLECTED.format(rule["when"]["field"])
                )
    looping = _silent_loop(order, nodes)
    if looping is not None:
        raise FlowError(f"nodes.{looping}", SILENT_LOOP)


def _silent_loop(order: list[str], nodes: dict[str, dict[str, Any]]) -> str | None:
    """A step of a loop whose steps all run without waiting for the caller (say, tool, branch), or None: the
    first step of such a loop met walking from the start (depth first, in the order of `order`)."""
    silent = {node_id for node_id, node in nodes.items() if node["type"] not in WAITING_TYPES}
    state: dict[str, int] = {}  # 1: on the walk's current path, 2: done
    for root in order:
        if root not in silent or root in state:
            continue
        state[root] = 1
        stack: list[tuple[str, Iterator[str]]] = [(root, _silent_targets(root, nodes, silent))]
        while stack:
            node_id, targets = stack[-1]
            target = next(targets, None)
            if target is None:
                state[node_id] = 2
                stack.pop()
                continue
            if state.get(target) == 1:
                return target  # back to a step on the current path: a loop
            if target not in state:
                state[target] = 1
                stack.append((target, _silent_targets(target, nodes, silent)))
    return None


def _silent_targets(node_id: str, nodes: dict[str, dict[str, Any]], silent: set[str]) -> Iterator[str]:
    return iter([target for _, target in _ways(nodes[node_id]) if target in silent])


# --- helpers ---------------------------------------------------------------------------------------------


def _rule_label(when: dict[str, Any]) -> str:
    if when["op"] == "exists":
        return f"{when['field']} exists"
    return f"{when['field']} {when['op']} {json.dumps(when['value'], ensure_ascii=False)}"


def _is_number(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, float) and math.isfinite(value)
    )


def _number_text(value: float) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _join(at: str, key: str) -> str:
    return f"{at}.{key}" if at else key


def _clipped(text: str) -> str:
    return text if len(text) <= 64 else text[:61] + "..."


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
