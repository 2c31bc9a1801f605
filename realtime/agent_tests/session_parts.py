"""The parts a test attempt plugs into the real session shell (realtime/engine/session/shell.py):

- `TestRecorder`: the engine's `Recorder` contract, writing nothing to the database. A test run is not a
  customer call: no call record, no minutes billed, no events, no analysis. It keeps the agent log in
  memory (what a failed attempt's reason may quote).
- `CollectingTransport`: the `Transport` contract, collecting what a client would receive (transcripts,
  events, a transfer, the hang-up); audio is dropped.
- `MockedTools`: the real tool dispatcher, with the test's `toolMocks` answering instead of the tools. A
  custom (webhook, http) or MCP tool without a mock is never contacted (unless the test allows real
  tools): the brain gets an error result and the attempt's verdict is `error`, naming the tool. Native
  tools (search_knowledge, transfer_call, end_call) run for real unless mocked; a mocked native tool keeps
  its effect (a transfer, the end of the call) with the mocked result.
- `FastClock`: the session's clock, skipping ahead over the playout's waits (an answer's audio need not
  play in real time for nobody to hear it); every other wait (the idle watchdog, the maximum duration)
  takes real time.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from calls.models import ToolInvocationStatus
from realtime.engine.contracts import Ending, Recorder, ToolCall, ToolOutcome
from realtime.engine.tools.dispatcher import ToolDispatcher

# Tool kinds that reach the network (the agent's servers, MCP servers): mocked, or refused.
NETWORK_KINDS = frozenset({"webhook", "http", "mcp"})


@dataclass
class TestCall:
    """The call a TestRecorder "opens": never stored."""

    __test__ = False

    variables: dict[str, str] = field(default_factory=dict)
    pk: uuid.UUID = field(default_factory=uuid.uuid4)
    from_number: str | None = "agent-test"
    to_number: str | None = "agent-test"


class TestRecorder:
    """A recorder that writes nothing (see the module docstring); the agent log stays in `logs`."""

    __test__ = False

    counts_as_live = False  # no socket and no call record: not in voiceagent_live_sessions / _calls

    def __init__(self, *, variables: dict[str, str] | None = None) -> None:
        self.channel = "web"
        self.to_number: str | None = None
        self.session_id = f"agent-test-{uuid.uuid4().hex}"
        self.variables = dict(variables or {})
        self.call: TestCall | None = None
        self.logs: list[tuple[str, str, dict[str, Any]]] = []

    def log(self, severity: str, message: str, **fields: Any) -> None:
        self.logs.append((severity, message, fields))

    async def start(self) -> TestCall:
        self.call = TestCall(variables=self.variables)
        return self.call

    def message(self, role: str, text: str, occurred_at: datetime | None = None) -> None:
        return None

    def extend_caller_message(self, text: str) -> None:
        return None

    def release_caller_message(self) -> None:
        return None

    def tool_invocation(self, **fields: Any) -> None:
        return None

    def llm_usage(self, *, provider: str, model: str, **figures: Any) -> None:
        return None

    def measure(self, *, product: str, provider: str, model: str | None, unit: str, quantity: float) -> None:
        return None

    def turn_latency(self, stages_ms: dict[str, float | None]) -> None:
        return None

    def handoff(self, **fields: Any) -> None:
        return None

    def transfer_update(self, **fields: Any) -> None:
        return None

    def flow_progress(self, **fields: Any) -> None:
        return None  # the run reads the flow from the session (`Session.flow`)

    async def finish(
        self, status: str, *, ended_reason: str | None = None, message: str = "", recording: bool = False
    ) -> TestCall | None:
        return self.call


def _recorder_check(recorder: TestRecorder) -> Recorder:
    return recorder  # mypy proves the contract here


class CollectingTransport:
    """What a client of the session would receive (audio excepted)."""

    def __init__(self) -> None:
        self.call_id: str | None = None
        self.transcripts: list[tuple[str, str]] = []
        self.events: list[dict[str, Any]] = []
        self.transferred_to: str | None = None
        self.ending: Ending | None = None
        self.ending_message = ""

    async def started(self, call_id: str) -> None:
        self.call_id = call_id

    async def send_audio(self, pcm16_24k: bytes) -> None:
        return None

    async def clear(self) -> None:
        return None

    async def send_transcript(self, role: str, text: str) -> None:
        self.transcripts.append((role, text))

    async def send_event(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    async def transfer(self, destination: str) -> None:
        self.transferred_to = destination

    async def hang_up(self, ending: Ending, message: str = "") -> None:
        if self.ending is None:
            self.ending, self.ending_message = ending, message


class FastClock:
    """The loop's clock, moved ahead over the playout's waits (those that may be woken early): the time
    an answer takes to play passes at once. Waits without a wake event take real time."""

    def __init__(self) -> None:
        self._skipped = 0.0

    def now(self) -> float:
        return asyncio.get_running_loop().time() + self._skipped

    async def sleep_until(self, deadline: float, wake: asyncio.Event | None = None) -> None:
        delay = deadline - self.now()
        if wake is not None and delay != float("inf"):
            self._skipped += max(0.0, delay)
            await asyncio.sleep(0)
            return
        if wake is None:
            await asyncio.sleep(max(0.0, delay))
            return
        if not wake.is_set():
            await wake.wait()


def _matches(arguments: dict[str, Any], include: dict[str, Any]) -> bool:
    """`include` is a subset of `arguments` (strings compared without case and outer spaces)."""
    for name, expected in include.items():
        if name not in arguments:
            return False
        actual = arguments[name]
        if isinstance(expected, str) and isinstance(actual, str):
            if expected.strip().casefold() != actual.strip().casefold():
                return False
        elif isinstance(expected, dict) and isinstance(actual, dict):
            if not _matches(actual, expected):
                return False
        elif expected != actual:
            return False
    return True


def arguments_include(arguments: Any, include: Any) -> bool:
    if not include:
        return True
    return isinstance(arguments, dict) and isinstance(include, dict) and _matches(arguments, include)


@dataclass
class ToolRecord:
    name: str
    arguments: dict[str, Any]
    result: Any
    status: str
    mocked: bool
    refused: bool = False  # an unmocked tool that was not contacted

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "arguments": self.arguments,
            "result": self.result,
            "status": self.status,
            "mocked": self.mocked,
        }


class MockedTools(ToolDispatcher):
    """The agent's tools as a session offers them, answered from the test's mocks (module docstring)."""

    def __init__(self, *, agent: Any, recorder: Any, mocks: list[dict[str, Any]], allow_real_tools: bool) -> None:
        # No handoff tool: an agent test talks to the one agent it tests (docs/guides/handoffs.md).
        super().__init__(agent=agent, recorder=recorder, to_number=None, handoffs=False)
        self.mocks = [mock for mock in mocks if isinstance(mock, dict)]
        self.allow_real_tools = allow_real_tools
        self.calls: list[ToolRecord] = []

    def _mock_for(self, call: ToolCall) -> dict[str, Any] | None:
        for mock in self.mocks:
            if mock.get("tool") != call.name:
                continue
            when = mock.get("when") or {}
            if arguments_include(call.arguments, when.get("argumentsInclude")):
                return mock
        return None

    async def run(self, call: ToolCall) -> ToolOutcome:
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        offered = self._offered.get(call.name)
        mock = self._mock_for(call)
        if offered is not None and mock is not None:
            started = time.perf_counter()
            failed = "error" in mock
            result = {"error": str(mock["error"])} if failed else mock.get("result")
            status = ToolInvocationStatus.ERROR if failed else ToolInvocationStatus.SUCCESS
            adapter = offered.adapter
            outcome = self._done(
                call,
                offered,
                result if isinstance(result, dict) else {"result": result},
                status,
                started,
                reason="mocked error" if failed else None,
                transfer_to=None if failed else adapter.transfer_to,
                end_call=not failed and adapter.ends_call,
            )
            if not isinstance(result, dict):
                # A mocked result that is not an object reaches the brain as it is (JSON).
                outcome = ToolOutcome(
                    result=json.dumps(result, ensure_ascii=False, default=str),
                    status=outcome.status,
                    transfer_to=outcome.transfer_to,
                    end_call=outcome.end_call,
                    reason=outcome.reason,
                )
            self.calls.append(ToolRecord(call.name, arguments, result, outcome.status, mocked=True))
            return outcome
        if offered is not None and offered.adapter.kind in NETWORK_KINDS and not self.allow_real_tools:
            message = {"error": "This tool is not available in this test."}
            outcome = self._done(
                call, offered, message, ToolInvocationStatus.ERROR, time.perf_counter(), reason="unmocked tool"
            )
            self.calls.append(ToolRecord(call.name, arguments, None, outcome.status, mocked=False, refused=True))
            return outcome
        outcome = await super().run(call)
        try:
            result = json.loads(outcome.result)
        except ValueError:
            result = outcome.result
        self.calls.append(ToolRecord(call.name, arguments, result, outcome.status, mocked=False))
        return outcome
