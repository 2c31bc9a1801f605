"""One attempt of one agent test, in this process, through the real runtime.

`attempt_run(test)` opens a real session (realtime.engine.session.shell.open_session: the agent's prompt,
variables, greeting, tools, knowledge, transfer and end of call, the configured brain) with the parts of
realtime/agent_tests/session_parts.py (no call record, mocked tools, a collecting transport), says the
test's caller turns one by one with `Session.caller_text`, each time waiting for the agent's whole answer,
then checks the expectations:

1. deterministic checks (each failed expectation is one reason, named by its key): `toolCalls`,
   `noToolCalls`, `replyContains`, `replyMatches`, `transferred`, `ended`, `flowPath` and `collected` (on the
   agent's flow as the session ran it: `Session.flow`, None for an agent without a flow, else its `path` of
   node ids and its `collected` values; both fail on an agent without a flow);
2. `criteria`, judged by the configured model (realtime/agent_tests/judge.py) once the deterministic
   checks passed; with the embedded brain they are `skipped` (never passed).

The verdict: `error` when the attempt could not be carried out as the test says (an unmocked tool was
called, the session failed, the model could not judge), else `fail` when a reason was found, else `pass`
(`skipped` when the test has nothing but criteria and they could not be judged).

`conversation` tests: the scripted turns when given; otherwise the simulated caller (judge.caller_line)
says each next line, up to `caller.maxTurns`; with the embedded brain that is an `error`.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from kit.patterns import PatternError, pattern_search
from realtime.agent_tests import judge
from realtime.agent_tests.session_parts import (
    CollectingTransport,
    FastClock,
    MockedTools,
    TestRecorder,
    arguments_include,
)
from realtime.engine.contracts import Ending, Response
from realtime.engine.session.shell import Session, open_session
from realtime.models import AgentTest, AgentTestKind

START_TIMEOUT_SECONDS = 120.0  # the first session of a process loads the speech models
ANSWER_TIMEOUT_SECONDS = 60.0
POLL_SECONDS = 0.005


class AttemptError(Exception):
    """The attempt could not be carried out; the message says why."""


@dataclass
class Conversation:
    transcript: list[dict[str, Any]] = field(default_factory=list)
    latency_ms: list[int | None] = field(default_factory=list)
    transferred: bool = False
    ended: bool = False
    failure: str = ""
    # The agent's flow when the session was over: {"path", "collected"}; None for an agent without a flow.
    flow: dict[str, Any] | None = None


def flow_state(session: Any) -> dict[str, Any] | None:
    """The session's flow as JSON: {"path": [node ids], "collected": {name: value}}, a copy of its state now;
    None when the agent has no flow (or the runtime runs none: read with getattr)."""
    flow = getattr(session, "flow", None)
    if flow is None:
        return None
    path = [str(node) for node in getattr(flow, "path", None) or []]
    collected = getattr(flow, "collected", None) or {}
    return {"path": path, "collected": json.loads(json.dumps(dict(collected), default=str))}


class _Driver:
    def __init__(self, test: AgentTest) -> None:
        self.test = test
        self.transport = CollectingTransport()
        self.recorder = TestRecorder(variables={str(k): str(v) for k, v in (test.variables or {}).items()})
        self.tools = MockedTools(
            agent=test.agent,
            recorder=self.recorder,
            mocks=list(test.tool_mocks or []),
            allow_real_tools=bool(test.allow_real_tools),
        )
        self.session: Session = open_session(
            agent=test.agent,
            transport=self.transport,
            channel="web",
            recorder=self.recorder,
            tools=self.tools,
            variables=self.recorder.variables,
            clock=FastClock(),
            modality="text",
        )
        self.task: asyncio.Task[None] | None = None
        self.conversation = Conversation()

    @property
    def over(self) -> bool:
        return (self.task is not None and self.task.done()) or self.transport.ending is not None

    async def start(self) -> None:
        self.task = asyncio.create_task(self.session.run())
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while self.session.response is None and not self.over:
            if time.monotonic() > deadline:
                raise AttemptError("the session did not start in time")
            await asyncio.sleep(POLL_SECONDS)
        if self.session.response is not None:
            await self._answer(self.session.response, time.monotonic(), record=False)

    async def _answer(self, response: Response, began: float, *, record: bool = True) -> None:
        """Wait until `response` has played (or the session ended); its words join the transcript."""
        deadline = began + ANSWER_TIMEOUT_SECONDS
        first: float | None = None
        while not response.done and not self.over:
            if first is None and response.sentences:
                first = time.monotonic()
            if time.monotonic() > deadline:
                raise AttemptError("the agent did not answer in time")
            await asyncio.sleep(POLL_SECONDS)
        if first is None and response.sentences:
            first = time.monotonic()
        if response.transfer_to or response.then_end is not None:
            # The shell ends the call in a task of its own once the answer has played: let it.
            if self.task is not None:
                await asyncio.wait({self.task}, timeout=max(0.0, deadline - time.monotonic()))
        text = " ".join(sentence for sentence in response.sentences if sentence)
        if text:
            self.conversation.transcript.append({"role": "assistant", "text": text})
        if record:
            self.conversation.latency_ms.append(round((first - began) * 1000) if first is not None else None)

    async def say(self, text: str) -> bool:
        """One caller turn and the agent's answer; False when the session is over."""
        if self.over:
            return False
        before = self.session.response
        began = time.monotonic()
        self.conversation.transcript.append({"role": "user", "text": text})
        await self.session.caller_text(text)
        response = self.session.response
        if response is None or response is before:
            self.conversation.latency_ms.append(None)
            return not self.over
        await self._answer(response, began)
        return not self.over

    async def finish(self) -> Conversation:
        conversation = self.conversation
        conversation.transferred = self.transport.transferred_to is not None
        conversation.ended = self.transport.ending is not None and not conversation.transferred
        if self.transport.ending == Ending.FAILED:
            conversation.failure = self.transport.ending_message or "the session failed"
        await self.session.stop()
        if self.task is not None:
            await asyncio.wait_for(self.task, 30)
        conversation.flow = flow_state(self.session)
        return conversation


async def _converse(test: AgentTest) -> tuple[Conversation, list[dict[str, Any]], list[str]]:
    driver = _Driver(test)
    try:
        await driver.start()
        turns = [str(turn.get("user", "")) for turn in test.turns or [] if isinstance(turn, dict)]
        if turns or test.kind != AgentTestKind.CONVERSATION:
            for text in turns:
                if not await driver.say(text):
                    break
        else:
            caller = test.caller or {}
            for _ in range(int(caller.get("maxTurns") or 1)):
                line = await asyncio.to_thread(
                    judge.caller_line,
                    persona=str(caller.get("persona") or ""),
                    goal=str(caller.get("goal") or ""),
                    transcript=judge.transcript_text(driver.conversation.transcript),
                )
                if line is None or not await driver.say(line):
                    break
    finally:
        conversation = await driver.finish()
    refused = [call.name for call in driver.tools.calls if call.refused]
    return conversation, [call.as_json() for call in driver.tools.calls], refused


def _number(value: Any) -> Decimal | None:
    """A number, or the text of one (" 4 ", "4.0"), as a Decimal; None otherwise."""
    if isinstance(value, bool):
        return None
    try:
        if isinstance(value, int | float):
            number = Decimal(str(value))
        elif isinstance(value, str):
            number = Decimal(value.strip())
        else:
            return None
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def collected_equal(wanted: Any, got: Any) -> bool:
    """An expected collected value equals the collected one: numbers as numbers (4 is "4.0"), true and false
    as themselves, texts without case and outer spaces."""
    numeric = [isinstance(value, int | float) and not isinstance(value, bool) for value in (wanted, got)]
    if any(numeric):
        expected, actual = _number(wanted), _number(got)
        if expected is not None and actual is not None:
            return expected == actual
    if isinstance(wanted, bool):
        if isinstance(got, bool):
            return got == wanted
        return isinstance(got, str) and got.strip().casefold() == str(wanted).lower()
    if isinstance(wanted, str) and isinstance(got, str | int | float) and not isinstance(got, bool):
        return wanted.strip().casefold() == str(got).strip().casefold()
    return False


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _flow_checks(expect: dict[str, Any], flow: dict[str, Any] | None) -> list[str]:
    """`flowPath` and `collected`, each failure named by its key."""
    reasons: list[str] = []
    wanted_path = expect.get("flowPath")
    wanted_values = expect.get("collected")
    if flow is None:
        for key, wanted in (("flowPath", wanted_path), ("collected", wanted_values)):
            if wanted:
                reasons.append(f"{key}: the agent has no flow")
        return reasons
    if wanted_path:
        path = [str(node) for node in flow.get("path") or []]
        if path != [str(node) for node in wanted_path]:
            went = " → ".join(path) if path else "no node"
            reasons.append(f"flowPath: expected {' → '.join(str(node) for node in wanted_path)}, got {went}")
    collected = flow.get("collected") or {}
    for name, wanted in (wanted_values or {}).items():
        if name not in collected:
            reasons.append(f"collected: {name} was not collected")
        elif not collected_equal(wanted, collected[name]):
            reasons.append(f"collected: {name}: expected {_shown(wanted)}, got {_shown(collected[name])}")
    return reasons


def _checks(expect: dict[str, Any], conversation: Conversation, calls: list[dict[str, Any]]) -> list[str]:
    """Each failed deterministic expectation, named by its key."""
    reasons: list[str] = []
    # The greeting is not a reply: only what the agent said after the caller's first turn counts.
    first_user = next((i for i, turn in enumerate(conversation.transcript) if turn["role"] == "user"), None)
    said_after = conversation.transcript[first_user + 1 :] if first_user is not None else []
    replies = " ".join(turn["text"] for turn in said_after if turn["role"] == "assistant")
    names = [call["name"] for call in calls]
    for wanted in expect.get("toolCalls") or []:
        name = str(wanted.get("name", ""))
        include = wanted.get("argumentsInclude")
        if not any(call["name"] == name and arguments_include(call["arguments"], include) for call in calls):
            made = ", ".join(names) or "none"
            with_args = f" with arguments including {include}" if include else ""
            reasons.append(f"toolCalls: expected a call of {name}{with_args}; calls made: {made}")
    if expect.get("noToolCalls") and calls:
        reasons.append(f"noToolCalls: the agent called {', '.join(names)}")
    for text in expect.get("replyContains") or []:
        if str(text).casefold() not in replies.casefold():
            reasons.append(f"replyContains: {text!r} is not in the agent's replies")
    pattern = expect.get("replyMatches")
    if pattern:
        try:
            if not pattern_search(str(pattern), replies):
                reasons.append(f"replyMatches: no reply matches /{pattern}/")
        except PatternError as exc:
            reasons.append(f"replyMatches: {exc}")
    for key, happened in (("transferred", conversation.transferred), ("ended", conversation.ended)):
        if key in expect and expect[key] is not None and bool(expect[key]) != happened:
            reasons.append(f"{key}: expected {str(bool(expect[key])).lower()}, got {str(happened).lower()}")
    reasons.extend(_flow_checks(expect, conversation.flow))
    return reasons


def attempt_run(test: AgentTest) -> dict[str, Any]:
    """One attempt: {"verdict", "reasons", "transcript", "toolCalls", "latencyMs", "criteria",
    "transferred", "ended", "flow"} (see the module docstring)."""
    expect = test.expect or {}
    criteria = [str(c) for c in expect.get("criteria") or []]
    result: dict[str, Any] = {
        "verdict": "error",
        "reasons": [],
        "transcript": [],
        "toolCalls": [],
        "latencyMs": [],
        "criteria": [],
        "transferred": False,
        "ended": False,
        "flow": None,
    }
    if test.kind == AgentTestKind.CONVERSATION and not test.turns and not judge.model_configured():
        result["reasons"] = [
            "conversation: a simulated caller needs a language model (LLM_PROVIDER=openai); with the embedded "
            "brain, give the test scripted turns"
        ]
        return result
    started = time.monotonic()
    try:
        conversation, calls, refused = asyncio.run(_converse(test))
    except (AttemptError, judge.ModelFailed) as exc:
        result["reasons"] = [str(exc)]
        return result
    result.update(
        transcript=conversation.transcript,
        toolCalls=calls,
        latencyMs=conversation.latency_ms,
        transferred=conversation.transferred,
        ended=conversation.ended,
        flow=conversation.flow,
        durationMs=round((time.monotonic() - started) * 1000),
    )
    errors = [
        f"unmocked tool {name} was called (add a toolMock for it, or allow real tools)"
        for name in dict.fromkeys(refused)
    ]
    if conversation.failure:
        errors.append(f"the session failed: {conversation.failure}")
    if errors:
        result["reasons"] = errors
        return result
    reasons = _checks(expect, conversation, calls)
    judged: list[dict[str, Any]] = []
    if criteria and reasons:
        judged = [{"criterion": c, "verdict": "skipped", "reason": "a deterministic check failed"} for c in criteria]
    elif criteria and not judge.model_configured():
        judged = [
            {"criterion": c, "verdict": "skipped", "reason": "criteria need a language model (LLM_PROVIDER=openai)"}
            for c in criteria
        ]
    elif criteria:
        text = judge.transcript_text(conversation.transcript, calls)
        for criterion in criteria:
            try:
                verdict, why = judge.judge(criterion, text)
            except judge.ModelFailed as exc:
                result["criteria"] = judged
                result["reasons"] = [f"criteria: {criterion!r} could not be judged: {exc}"]
                return result
            judged.append({"criterion": criterion, "verdict": verdict, "reason": why})
            if verdict == "fail":
                reasons.append(f"criteria: {criterion!r} failed: {why}")
    result["criteria"] = judged
    result["reasons"] = reasons
    checked = any(key in expect and expect[key] not in (None, [], {}, "") for key in expect if key != "criteria")
    if reasons:
        result["verdict"] = "fail"
    elif criteria and all(item["verdict"] == "skipped" for item in judged) and not checked:
        result["verdict"] = "skipped"
    else:
        result["verdict"] = "pass"
    return result


__all__ = ["attempt_run"]
