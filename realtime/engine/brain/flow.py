"""An agent's flow, run as the conversation's brain (docs/guides/flows.md).

`FlowBrain` wraps the agent's own brain (the embedded one or a language model). Fixed steps run without
a model: `say` speaks its words, `collect` asks for and checks values (read from the caller's words by
the embedded argument extractor, brain/embedded/arguments.py, whatever the brain), `tool` calls a custom
tool with the collected values, `branch` follows its rules, `end` says its words and ends the call,
`handoff` and `transfer` pass the call on. A `conversation` step hands the caller's turns to the wrapped
brain, with the step's instructions, until it calls one of the step's exits (a tool per exit, never run:
the flow takes it and goes on).

The flow's tools are offered by the tool dispatcher under names the brain never sees outside the flow
(FLOW_TOOL_PREFIX): `flow_end` (an end_call), `flow_handoff_<agent id>` (a handoff) and
`flow_transfer_<digits>` (a transfer_call to the step's number).

State: the current step, the path taken (step ids, in order) and the collected values; `on_progress`
is told of each change (the call record's `flow`). A caller who goes on speaking before hearing the
answer to a turn gets that turn answered again, joined: the flow goes back to where it was before the
turn's first part, so that the whole turn is read once.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from typing import Any

from realtime.engine.brain.embedded.arguments import extract, parameters_of
from realtime.engine.brain.embedded.spoken import Utterance
from realtime.engine.contracts import Brain, BrainContext, BrainOutput, TextPiece, ToolCall, ToolSpec, Turn

FLOW_TOOL_PREFIX = "flow_"
END_TOOL = "flow_end"
EXIT_TOOL = "flow_exit_"
MAX_STEPS = 50  # steps run for one turn without the caller (a guard; saving refuses such loops)
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z0-9_.\-]+)\s*\}\}")
# Field types -> the JSON Schema the embedded extractor reads them by.
_SCHEMAS: dict[str, dict[str, Any]] = {
    "string": {"type": "string"},
    "number": {"type": "number"},
    "date": {"type": "string", "format": "date"},
    "time": {"type": "string", "format": "time"},
    "phone": {"type": "string", "format": "phone"},
    "email": {"type": "string", "format": "email"},
}
_NOT_UNDERSTOOD = "Sorry, I did not get that."


def handoff_tool_name(agent_id: str) -> str:
    return f"{FLOW_TOOL_PREFIX}handoff_{agent_id.replace('-', '')[:32]}"


def transfer_tool_name(phone_number: str) -> str:
    return f"{FLOW_TOOL_PREFIX}transfer_{re.sub(r'[^0-9]', '', phone_number)}"


def flow_tools(flow: dict[str, Any]) -> tuple[list[str], list[tuple[str, str]], bool]:
    """What the dispatcher must offer for the flow: handoff targets (agent ids), transfers (number, mode;
    one per number, warm when any step transfers to it warm), and whether an `end` step exists."""
    nodes = (flow or {}).get("nodes") or {}
    handoffs = sorted({str(node.get("agentId")) for node in nodes.values() if node.get("type") == "handoff"})
    modes: dict[str, str] = {}
    for node in nodes.values():
        if node.get("type") == "transfer":
            number = str(node.get("phoneNumber"))
            modes[number] = "warm" if node.get("mode") == "warm" or modes.get(number) == "warm" else "cold"
    transfers = sorted(modes.items())
    return handoffs, transfers, any(node.get("type") == "end" for node in nodes.values())


@dataclass
class FlowState:
    node: str | None = None  # the step waiting for the caller (collect, conversation), or None
    path: list[str] = field(default_factory=list)
    collected: dict[str, Any] = field(default_factory=dict)
    asking: str | None = None  # the field last asked for
    awaiting: tuple[str, str] | None = None  # (tool call id, tool step id): a tool step's call is out
    started: bool = False
    ended: bool = False  # an end, handoff or transfer step was reached

    def copy(self) -> FlowState:
        return replace(self, path=list(self.path), collected=dict(self.collected))


class FlowBrain:
    deterministic = True  # the flow's decisions are not asked again (cascade `_still_asked`)

    def __init__(self, flow: dict[str, Any], *, inner: Brain, today: Callable[[], date] | None = None) -> None:
        self.flow = flow
        self.nodes: dict[str, dict[str, Any]] = flow.get("nodes") or {}
        self.inner = inner
        self.state = FlowState()
        self.values: dict[str, str] = {}  # the call's {{placeholder}} values (the shell sets them)
        self.on_progress: Callable[[FlowBrain], None] | None = None
        self._today = today or (lambda: datetime.now(UTC).date())
        self._calls = 0
        self._turn: tuple[int, str, FlowState] | None = None  # the caller turn last read, and the state before it

    @property
    def path(self) -> list[str]:
        return self.state.path

    @property
    def collected(self) -> dict[str, Any]:
        return self.state.collected

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()

    async def respond(self, context: BrainContext, history: Sequence[Turn]) -> AsyncIterator[BrainOutput]:
        state = self.state
        last = history[-1] if history else None
        if last is not None and last.role == "tool" and state.awaiting and last.tool_call_id == state.awaiting[0]:
            step = self.nodes[state.awaiting[1]]
            state.awaiting = None
            target = step.get("onError") if _failed(last.text) else step.get("next")
            for output in self._run(target):
                yield output
            return
        if not state.started:
            state.started = True
            for output in self._run(self.flow.get("start")):
                yield output
            return
        if last is None or last.role not in ("user", "tool"):
            return
        if last.role == "user":
            self._rewind(history)
            state = self.state
        node_id = state.node
        current = self.nodes.get(node_id or "")
        if current is None:  # the flow has ended (or was never entered): the agent's own brain answers
            async for output in self.inner.respond(self._outside(context), history):
                yield output
            return
        if current["type"] == "tool" and last.role == "user":  # its answer was cut: the step runs again
            state.awaiting = None
            for output in self._run(node_id):
                yield output
            return
        if current["type"] == "collect" and last.role == "user":
            for output in self._collect(current, last.text):
                yield output
            return
        if current["type"] == "conversation":
            async for output in self._converse(context, history, current):
                yield output

    # --- steps ---------------------------------------------------------------------------------------

    def _run(self, node_id: str | None) -> list[BrainOutput]:
        """Run steps from `node_id` until one waits for the caller or a tool, or the flow ends."""
        outputs: list[BrainOutput] = []
        state = self.state
        for _ in range(MAX_STEPS):
            step = self.nodes.get(node_id or "")
            if step is None:
                state.node = None
                break
            assert node_id is not None
            state.path.append(node_id)
            kind = step["type"]
            if kind == "say":
                outputs.append(TextPiece(self._fill(step["text"]) + " "))
                node_id = step.get("next")
                continue
            if kind == "branch":
                node_id = self._branch(step)
                continue
            if kind == "collect":
                missing = self._missing(step)
                if missing is None:
                    node_id = step.get("next")
                    continue
                state.node, state.asking = node_id, missing["name"]
                outputs.append(TextPiece(self._fill(missing["prompt"])))
                break
            if kind == "tool":
                call = self._call(step["tool"], self._arguments(step.get("arguments") or {}))
                state.awaiting, state.node = (call.id, node_id), node_id
                outputs.append(call)
                break
            if kind == "conversation":
                state.node = node_id
                break
            state.node, state.ended = None, True
            if kind == "end":
                if step.get("text"):
                    outputs.append(TextPiece(self._fill(step["text"])))
                outputs.append(self._call(END_TOOL, {}))
            elif kind == "handoff":
                outputs.append(self._call(handoff_tool_name(str(step["agentId"])), {}))
            elif kind == "transfer":
                outputs.append(self._call(transfer_tool_name(str(step["phoneNumber"])), {}))
            break
        self._progress()
        return outputs

    def _collect(self, step: dict[str, Any], text: str) -> list[BrainOutput]:
        state = self.state
        fields = step.get("fields") or []
        problem = self._read(fields, text)
        missing = self._missing(step)
        if missing is None:
            return self._run(step.get("next"))
        state.asking = missing["name"]
        self._progress()
        prompt = self._fill(missing["prompt"])
        return [TextPiece(f"{problem} {prompt}" if problem else prompt)]

    def _read(self, fields: list[dict[str, Any]], text: str) -> str:
        """Fill fields from the caller's words; what was wrong with a value said for the field asked
        for (empty when nothing was)."""
        state = self.state
        schema: dict[str, Any] = {"type": "object", "properties": {}}
        for spec in fields:
            if spec["name"] not in state.collected:
                schema["properties"][spec["name"]] = _schema(spec)
        if not schema["properties"]:
            return ""
        parameters = parameters_of(schema)
        found = extract(parameters, Utterance(text), self._today(), focus=state.asking or "")
        problem = ""
        for spec in fields:
            name = spec["name"]
            if name not in found:
                continue
            value, wrong = _checked(spec, found[name])
            if wrong:
                if name == state.asking or not problem:
                    problem = wrong
                continue
            state.collected[name] = value
        asked = next((spec for spec in fields if spec["name"] == state.asking), None)
        if not problem and asked is not None and asked["name"] not in state.collected and not found:
            problem = _NOT_UNDERSTOOD
        return problem

    def _missing(self, step: dict[str, Any]) -> dict[str, Any] | None:
        return next(
            (
                spec
                for spec in step.get("fields") or []
                if spec.get("required", True) and spec["name"] not in self.state.collected
            ),
            None,
        )

    def _branch(self, step: dict[str, Any]) -> str | None:
        for rule in step.get("rules") or []:
            when = rule.get("when") or {}
            if _holds(self.state.collected, when):
                return str(rule.get("next"))
        return step.get("else")

    async def _converse(
        self, context: BrainContext, history: Sequence[Turn], step: dict[str, Any]
    ) -> AsyncIterator[BrainOutput]:
        exits = step.get("exits") or []
        inside = self._outside(context)
        instructions = "\n\n".join(
            part for part in (inside.instructions, self._fill(step.get("instructions") or "")) if part
        )
        tools = [
            *inside.tools,
            *(
                ToolSpec(name=f"{EXIT_TOOL}{index}", description=str(way["description"]), parameters={"type": "object"})
                for index, way in enumerate(exits)
            ),
        ]
        outputs = self.inner.respond(replace(inside, instructions=instructions, tools=tuple(tools)), history)
        try:
            async for output in outputs:
                if isinstance(output, ToolCall) and output.name.startswith(EXIT_TOOL):
                    index = int(output.name[len(EXIT_TOOL) :] or -1)
                    target = exits[index]["next"] if 0 <= index < len(exits) else None
                    for step_output in self._run(target):
                        yield step_output
                    return
                yield output
        finally:
            close = getattr(outputs, "aclose", None)
            if close is not None:
                await close()

    # --- helpers -------------------------------------------------------------------------------------

    def _outside(self, context: BrainContext) -> BrainContext:
        """The context without the flow's own tools (the wrapped brain never calls them itself)."""
        return replace(context, tools=tuple(t for t in context.tools if not t.name.startswith(FLOW_TOOL_PREFIX)))

    def _rewind(self, history: Sequence[Turn]) -> None:
        """A caller turn: when it is the last one read with more words (the caller went on before hearing
        the answer), the flow goes back to where it was before it; the state is kept for the next time."""
        index = max(i for i, turn in enumerate(history) if turn.role == "user")
        text = history[index].text
        if self._turn is not None:
            seen_index, seen_text, before = self._turn
            if seen_index == index and text.startswith(seen_text):
                self.state = before.copy()
                self._turn = (index, text, before)
                return
        self._turn = (index, text, self.state.copy())

    def _call(self, name: str, arguments: dict[str, Any]) -> ToolCall:
        self._calls += 1
        return ToolCall(id=f"flow_call_{self._calls}", name=name, arguments=arguments)

    def _arguments(self, template: dict[str, Any]) -> dict[str, Any]:
        """A tool step's arguments: a string that is only "{{collected.x}}" is the value as collected (a
        number stays a number); other strings have their placeholders filled."""
        arguments: dict[str, Any] = {}
        for name, value in template.items():
            if isinstance(value, str):
                whole = _PLACEHOLDER.fullmatch(value.strip())
                key = whole.group(1) if whole else ""
                if key.startswith("collected.") and key[len("collected.") :] in self.state.collected:
                    arguments[name] = self.state.collected[key[len("collected.") :]]
                    continue
                arguments[name] = self._fill(value)
            else:
                arguments[name] = value
        return arguments

    def _fill(self, text: str) -> str:
        values = {**self.values, **{f"collected.{k}": _spoken(v) for k, v in self.state.collected.items()}}
        return _PLACEHOLDER.sub(lambda match: values.get(match.group(1), ""), text).strip()

    def _progress(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self)


def _schema(spec: dict[str, Any]) -> dict[str, Any]:
    """The field as the extractor reads it: its type and name, without bounds (a value out of bounds is
    still read, so that the caller hears why it was refused)."""
    if spec["type"] == "enum":
        return {"type": "string", "enum": list(spec.get("values") or [])}
    return dict(_SCHEMAS.get(spec["type"], {"type": "string"}))


def _checked(spec: dict[str, Any], value: Any) -> tuple[Any, str]:
    """(the value to keep, what is wrong with it: empty when nothing)."""
    label = spec["name"].replace("_", " ")
    if spec["type"] == "number":
        try:
            number = float(value)
        except (TypeError, ValueError):
            return None, f"Sorry, the {label} must be a number."
        low, high = spec.get("min"), spec.get("max")
        if (low is not None and number < low) or (high is not None and number > high):
            if low is not None and high is not None:
                return None, f"Sorry, the {label} must be between {_spoken(low)} and {_spoken(high)}."
            bound = f"at least {_spoken(low)}" if low is not None else f"at most {_spoken(high)}"
            return None, f"Sorry, the {label} must be {bound}."
        return (int(number) if number.is_integer() else number), ""
    if spec["type"] == "enum":
        values = [str(v) for v in spec.get("values") or []]
        match = next((v for v in values if v.lower() == str(value).lower()), None)
        if match is None:
            return None, f"Sorry, the {label} must be one of {', '.join(values)}."
        return match, ""
    text = str(value).strip()
    return (text, "") if text else (None, _NOT_UNDERSTOOD)


def _holds(collected: dict[str, Any], when: dict[str, Any]) -> bool:
    name, op, expected = str(when.get("field")), when.get("op"), when.get("value")
    if op == "exists":
        return name in collected
    if name not in collected:
        return False
    value = collected[name]
    if op in ("lt", "gt"):
        try:
            left, right = float(value), float(expected)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False
        return left < right if op == "lt" else left > right
    if op == "in":
        return any(_same(value, item) for item in (expected if isinstance(expected, list) else [expected]))
    return _same(value, expected) if op == "eq" else not _same(value, expected)


def _same(value: Any, expected: Any) -> bool:
    try:
        return float(value) == float(expected)
    except (TypeError, ValueError):
        return str(value).strip().lower() == str(expected).strip().lower()


def _spoken(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _failed(text: str) -> bool:
    """A tool result the flow takes as a failure: not JSON, or an object with an `error`."""
    try:
        result = json.loads(text)
    except ValueError:
        return True
    return isinstance(result, dict) and bool(result.get("error"))


__all__ = ["FLOW_TOOL_PREFIX", "FlowBrain", "flow_tools", "handoff_tool_name", "transfer_tool_name"]
