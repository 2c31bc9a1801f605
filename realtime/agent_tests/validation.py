"""The rules of an agent test's body (the API's camelCase shape), checked by hand so that every refusal is a
400 naming the exact place (`toolMocks.1.tool`, `expect.replyMatches`) and saying what is wrong.

The JSON parts are stored as validated, in the same shapes (realtime.models.AgentTest). The tool names of
mocks and of expected tool calls must be tools the agent offers (selectors.offered_tool_names)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from calls.variables import variables_clean
from kit.errors import ApiError
from kit.patterns import pattern_problem
from kit.schema import ANY, VISIBLE
from realtime.models import AgentTestKind

MAX_NAME_CHARS = 200
MAX_TURNS = 50
MAX_TURN_CHARS = 2000  # what a typed turn of a text session may hold
MAX_CALLER_CHARS = 2000
MAX_CALLER_TURNS = 20
DEFAULT_CALLER_TURNS = 10
MAX_MOCKS = 50
MAX_TOOL_NAME_CHARS = 128
MAX_MOCK_ERROR_CHARS = 1000
MAX_MOCK_RESULT_BYTES = 16384
MAX_EXPECTED_TOOL_CALLS = 20
MAX_REPLY_CONTAINS = 20
MAX_REPLY_CONTAINS_CHARS = 500
MAX_REGEX_CHARS = 500
MAX_CRITERIA = 10
MAX_CRITERION_CHARS = 1000
MAX_TAGS = 20
MAX_FLOW_PATH = 200  # expect.flowPath: node ids
MAX_NODE_ID_CHARS = 64  # a flow's node id (agents' flow rules)
MAX_COLLECTED = 50  # expect.collected: values
MAX_COLLECTED_NAME_CHARS = 64
MAX_COLLECTED_VALUE_CHARS = 500
TAG = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
TAG_PATTERN = "^[A-Za-z0-9_.:-]{1,64}$"

FIELDS = ("name", "kind", "turns", "caller", "variables", "toolMocks", "expect", "tags", "allowRealTools")
MOCK_KEYS = ("tool", "when", "result", "error")
EXPECT_KEYS = (
    "toolCalls",
    "noToolCalls",
    "replyContains",
    "replyMatches",
    "transferred",
    "ended",
    "flowPath",
    "collected",
    "criteria",
)
CALLER_KEYS = ("persona", "goal", "maxTurns")
_TEXT = re.compile(f"{ANY}*{VISIBLE}{ANY}*")  # some visible character, no NUL


def _text(value: Any, field: str, max_chars: int) -> str:
    """A string of 1..max_chars characters with something visible in it and no NUL."""
    if not isinstance(value, str):
        raise ApiError.field(field, "Must be a string.")
    if len(value) > max_chars:
        raise ApiError.field(field, f"At most {max_chars} characters, not {len(value)}.")
    if not _TEXT.fullmatch(value):
        raise ApiError.field(field, "Must not be blank (and may not contain NUL characters).")
    return value


def _bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise ApiError.field(field, "Must be true or false.")
    return value


def _list(value: Any, field: str, max_items: int) -> list[Any]:
    if not isinstance(value, list):
        raise ApiError.field(field, "Must be an array.")
    if len(value) > max_items:
        raise ApiError.field(field, f"At most {max_items} items, not {len(value)}.")
    return value


def _object(value: Any, field: str, allowed: tuple[str, ...] | None = None) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ApiError.field(field, "Must be an object.")
    if allowed is not None:
        unknown = [key for key in value if key not in allowed]
        if unknown:
            raise ApiError.field(field, f"Unknown key {str(unknown[0])[:64]!r}; the keys are {', '.join(allowed)}.")
    return value


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(key) or _has_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_has_nul(item) for item in value)
    return False


def _json_value(value: Any, field: str, max_bytes: int) -> Any:
    """Any JSON value (stored as it is): no NUL character (the database cannot hold one), at most max_bytes."""
    if _has_nul(value):
        raise ApiError.field(field, "May not contain NUL characters (U+0000).")
    size = len(json.dumps(value, ensure_ascii=False).encode())
    if size > max_bytes:
        raise ApiError.field(field, f"At most {max_bytes} bytes as JSON, not {size}.")
    return value


def _tool_name(value: Any, field: str, offered: list[str]) -> str:
    name = _text(value, field, MAX_TOOL_NAME_CHARS)
    if name not in offered:
        offers = ", ".join(offered) if offered else "no tools"
        raise ApiError.field(field, f"unknown tool {name!r}: the agent offers {offers}.")
    return name


def turns_clean(value: Any) -> list[dict[str, str]]:
    turns = _list(value, "turns", MAX_TURNS)
    cleaned = []
    for index, turn in enumerate(turns):
        turn = _object(turn, f"turns.{index}", ("user",))
        if "user" not in turn:
            raise ApiError.field(f"turns.{index}.user", "Required: what the caller says in this turn.")
        cleaned.append({"user": _text(turn["user"], f"turns.{index}.user", MAX_TURN_CHARS)})
    return cleaned


def caller_clean(value: Any) -> dict[str, Any]:
    caller = _object(value, "caller", CALLER_KEYS)
    for key in ("persona", "goal"):
        if key not in caller:
            raise ApiError.field(f"caller.{key}", "Required.")
    max_turns = caller.get("maxTurns", DEFAULT_CALLER_TURNS)
    if isinstance(max_turns, float) and max_turns.is_integer():
        max_turns = int(max_turns)  # 3.0 is the integer 3 in JSON
    if isinstance(max_turns, bool) or not isinstance(max_turns, int) or not 1 <= max_turns <= MAX_CALLER_TURNS:
        raise ApiError.field("caller.maxTurns", f"Must be a whole number from 1 to {MAX_CALLER_TURNS}.")
    return {
        "persona": _text(caller["persona"], "caller.persona", MAX_CALLER_CHARS),
        "goal": _text(caller["goal"], "caller.goal", MAX_CALLER_CHARS),
        "maxTurns": max_turns,
    }


def _arguments_include(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ApiError.field(field, "Must be an object (the arguments the tool call must include).")
    return _json_value(value, field, MAX_MOCK_RESULT_BYTES)


def tool_mocks_clean(value: Any, offered: list[str]) -> list[dict[str, Any]]:
    mocks = _list(value, "toolMocks", MAX_MOCKS)
    cleaned = []
    for index, mock in enumerate(mocks):
        where = f"toolMocks.{index}"
        mock = _object(mock, where, MOCK_KEYS)
        if "tool" not in mock:
            raise ApiError.field(f"{where}.tool", "Required: the name of the tool this mock answers for.")
        item: dict[str, Any] = {"tool": _tool_name(mock["tool"], f"{where}.tool", offered), "when": None}
        when = mock.get("when")
        if when is not None:
            when = _object(when, f"{where}.when", ("argumentsInclude",))
            if "argumentsInclude" not in when:
                raise ApiError.field(f"{where}.when.argumentsInclude", "Required (or leave `when` out).")
            item["when"] = {
                "argumentsInclude": _arguments_include(when["argumentsInclude"], f"{where}.when.argumentsInclude")
            }
        if ("result" in mock) == ("error" in mock):
            raise ApiError.field(where, "Give exactly one of result (what the tool answers) or error (its failure).")
        if "result" in mock:
            item["result"] = _json_value(mock["result"], f"{where}.result", MAX_MOCK_RESULT_BYTES)
        else:
            item["error"] = _text(mock["error"], f"{where}.error", MAX_MOCK_ERROR_CHARS)
        cleaned.append(item)
    return cleaned


def _texts(value: Any, field: str, max_items: int, max_chars: int) -> list[str]:
    return [_text(item, f"{field}.{index}", max_chars) for index, item in enumerate(_list(value, field, max_items))]


def _flow_path(value: Any) -> list[str]:
    """expect.flowPath: the node ids the agent's flow must go through, exactly (1..MAX_FLOW_PATH)."""
    path = _list(value, "expect.flowPath", MAX_FLOW_PATH)
    if not path:
        raise ApiError.field("expect.flowPath", "Give at least one node id (the flow's path from its start).")
    return [_text(node, f"expect.flowPath.{index}", MAX_NODE_ID_CHARS) for index, node in enumerate(path)]


def _collected(value: Any) -> dict[str, Any]:
    """expect.collected: {name: string | number | boolean}, at most MAX_COLLECTED."""
    if not isinstance(value, dict):
        raise ApiError.field("expect.collected", "Must be an object: {name: the value the flow must collect}.")
    if len(value) > MAX_COLLECTED:
        raise ApiError.field("expect.collected", f"At most {MAX_COLLECTED} values, not {len(value)}.")
    cleaned: dict[str, Any] = {}
    for name, wanted in value.items():
        if len(name) > MAX_COLLECTED_NAME_CHARS or not _TEXT.fullmatch(name):
            raise ApiError.field(
                "expect.collected",
                f"A name must be 1 to {MAX_COLLECTED_NAME_CHARS} characters, not blank (and without NUL): "
                f"{name[:MAX_COLLECTED_NAME_CHARS]!r}.",
            )
        where = f"expect.collected.{name}"
        if isinstance(wanted, str):
            cleaned[name] = _text(wanted, where, MAX_COLLECTED_VALUE_CHARS)
        elif isinstance(wanted, int) or (isinstance(wanted, float) and math.isfinite(wanted)):  # bool is an int
            cleaned[name] = wanted
        else:
            raise ApiError.field(where, "Must be a string, a number or true or false.")
    return cleaned


def expect_clean(value: Any, offered: list[str]) -> dict[str, Any]:
    expect = _object(value, "expect", EXPECT_KEYS)
    cleaned: dict[str, Any] = {}
    if "toolCalls" in expect:
        calls = []
        for index, call in enumerate(_list(expect["toolCalls"], "expect.toolCalls", MAX_EXPECTED_TOOL_CALLS)):
            where = f"expect.toolCalls.{index}"
            call = _object(call, where, ("name", "argumentsInclude"))
            if "name" not in call:
                raise ApiError.field(f"{where}.name", "Required: the tool expected to be called.")
            item: dict[str, Any] = {"name": _tool_name(call["name"], f"{where}.name", offered)}
            if call.get("argumentsInclude") is not None:
                item["argumentsInclude"] = _arguments_include(call["argumentsInclude"], f"{where}.argumentsInclude")
            calls.append(item)
        cleaned["toolCalls"] = calls
    for key in ("noToolCalls", "transferred", "ended"):
        if key in expect:
            cleaned[key] = _bool(expect[key], f"expect.{key}")
    if cleaned.get("noToolCalls") and cleaned.get("toolCalls"):
        raise ApiError.field("expect.noToolCalls", "Contradicts expect.toolCalls: expect tool calls or none.")
    if "replyContains" in expect:
        cleaned["replyContains"] = _texts(
            expect["replyContains"], "expect.replyContains", MAX_REPLY_CONTAINS, MAX_REPLY_CONTAINS_CHARS
        )
    if "replyMatches" in expect:
        pattern = _text(expect["replyMatches"], "expect.replyMatches", MAX_REGEX_CHARS)
        problem = pattern_problem(pattern)  # the engine the runner matches with (kit/patterns.py)
        if problem is not None:
            raise ApiError.field("expect.replyMatches", problem)
        cleaned["replyMatches"] = pattern
    if "flowPath" in expect:
        cleaned["flowPath"] = _flow_path(expect["flowPath"])
    if "collected" in expect:
        cleaned["collected"] = _collected(expect["collected"])
    if "criteria" in expect:
        cleaned["criteria"] = _texts(expect["criteria"], "expect.criteria", MAX_CRITERIA, MAX_CRITERION_CHARS)
    return cleaned


def tags_clean(value: Any) -> list[str]:
    tags = _list(value, "tags", MAX_TAGS)
    cleaned: list[str] = []
    for index, tag in enumerate(tags):
        if not isinstance(tag, str) or not TAG.fullmatch(tag):
            raise ApiError.field(f"tags.{index}", "1 to 64 letters, digits or _ . : - characters.")
        if tag not in cleaned:
            cleaned.append(tag)
    return cleaned


def agent_test_body_clean(body: dict[str, Any], *, offered: list[str]) -> dict[str, Any]:
    """A whole test body (POST, or PATCH merged with the stored test) -> the model's fields."""
    if not isinstance(body, dict):
        raise ApiError.invalid("The request body must be a JSON object.")
    for key in ("name", "kind"):
        if body.get(key) is None:
            raise ApiError.field(key, "Required.")
    name = _text(body["name"], "name", MAX_NAME_CHARS).strip()
    kind = body["kind"]
    if kind not in AgentTestKind.values:
        raise ApiError.field("kind", f"Must be one of {', '.join(AgentTestKind.values)}.")
    turns = turns_clean(body.get("turns") if body.get("turns") is not None else [])
    caller = body.get("caller")
    if kind == AgentTestKind.CONVERSATION:
        caller = caller_clean(caller) if caller is not None else None
        if caller is None and not turns:
            raise ApiError.field(
                "caller", "A conversation test needs a simulated caller {persona, goal, maxTurns} or scripted turns."
            )
    else:
        if caller is not None:
            raise ApiError.field("caller", f"Only conversation tests have a simulated caller (this one is {kind}).")
        if not turns:
            raise ApiError.field("turns", f'A {kind} test needs at least one turn: [{{"user": "..."}}].')
    return {
        "name": name,
        "kind": kind,
        "turns": turns,
        "caller": caller,
        "variables": _json_value(variables_clean(body.get("variables")), "variables", 1 << 20),
        "tool_mocks": tool_mocks_clean(body.get("toolMocks") if body.get("toolMocks") is not None else [], offered),
        "expect": expect_clean(body.get("expect") if body.get("expect") is not None else {}, offered),
        "tags": tags_clean(body.get("tags") if body.get("tags") is not None else []),
        "allow_real_tools": _bool(body.get("allowRealTools", False), "allowRealTools"),
    }
