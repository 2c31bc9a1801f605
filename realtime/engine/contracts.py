"""The engine's contracts, on its ground floor: what the session shell, the voice pipelines, the brains,
the tools and the transports agree on. This module imports nothing of the engine (only the session
shell's type, for type checkers), so that every part can depend on it and it on none of them.

- The conversation: `Turn`, `ToolCall`, `ToolSpec`, `BrainContext`, `Usage`, and the `Brain` that
  produces `TextPiece`s, `ToolCall`s and `Usage` (see `Brain` below).
- The transport: `Transport` and the named `Ending`s it maps to its wire (close codes for the browser
  socket, a hang-up or a transfer for a phone call).
- The voice pipeline the shell runs (`VoicePipeline`) and the cascade's speech parts (`Detector`,
  `Recognizer`, `Mixer`).
- The call record a session writes (`Recorder`): the database in production
  (realtime/engine/session/records.py), in memory in tests (testing/recording.py).

The audio format (rates, frame sizes) is beside it in realtime/engine/audio.py; the response handle a
pipeline speaks through in realtime/engine/response.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from realtime.engine.response import Response
    from realtime.engine.session.shell import Session

# --- the conversation ----------------------------------------------------------------------------
#
# A brain is created once per conversation (it may keep state between turns) and asked for each
# answer with `respond(context, history)`, an async iterator of:
# - `TextPiece`: words to speak, in order, any size (the shell cuts them into sentences);
# - `ToolCall`: run a tool; the shell appends an assistant turn carrying the call and a `tool` turn
#   carrying its result, then calls `respond` again with the longer history (up to a few rounds);
# - `Usage`: one model request's token figures (recorded as one `llmUsage` item of the call).
# A provider failure is raised as `kit.providers.ProviderError`; the shell then speaks a short
# apology and logs the error, the call goes on.


@dataclass(frozen=True)
class ToolCall:
    """A tool request of the brain: `id` is unique within the conversation (the model's own id when
    it gave one), `arguments` the JSON object of arguments."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Turn:
    """One entry of the conversation history.

    - `user`: the caller's words (`text`).
    - `assistant`: the agent's words as heard (`text`, may be empty) and, when it asked for tools in
      that turn, `tool_calls` (so that a language model sees the exact calls again).
    - `tool`: the result of one call: `text` is the JSON string the tool returned (an error result is
      `{"error": "..."}`), `tool_call_id` and `name` name the call it answers.
    """

    role: str
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    name: str = ""


@dataclass(frozen=True)
class TextPiece:
    text: str


@dataclass(frozen=True)
class Usage:
    provider: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0


BrainOutput = TextPiece | ToolCall | Usage


@dataclass(frozen=True)
class ToolSpec:
    """A tool offered to the brain: its name, what it does and the JSON Schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class BrainContext:
    """What the brain knows of the agent for this conversation (a dynamic prompt is already applied)."""

    agent_name: str
    language: str
    identity: str = ""
    instructions: str = ""
    disclosure: str = ""  # the AI-identity sentence already spoken at the start of the call
    greeting: str = ""  # the greeting already spoken, if any
    tools: tuple[ToolSpec, ...] = ()

    def tool(self, name: str) -> ToolSpec | None:
        return next((tool for tool in self.tools if tool.name == name), None)


class Brain(Protocol):
    def respond(self, context: BrainContext, history: Sequence[Turn]) -> AsyncIterator[BrainOutput]: ...


# --- the transport -------------------------------------------------------------------------------
#
# The browser socket implements `Transport` in realtime/consumers.py; a phone media stream implements
# the same methods in its own wire format (telephony/consumers.py). The engine never knows which
# transport it serves: endings are named, and each transport maps them to its wire.


class Ending(StrEnum):
    COMPLETED = "completed"  # the conversation ended normally (the caller or client stopped it)
    IDLE = "idle"  # no caller audio for REALTIME_INPUT_IDLE_SECONDS
    TRANSFERRED = "transferred"  # handed to a human (after `transfer`)
    FAILED = "failed"  # the engine (or the agent's configuration) failed; `message` says why


class Transport(Protocol):
    async def started(self, call_id: str) -> None:
        """The engine is ready (models loaded, call record open); the greeting plays next."""

    async def send_audio(self, pcm16_24k: bytes) -> None:
        """Agent audio, PCM16 LE mono 24 kHz, a whole number of 20 ms frames, already paced."""

    async def clear(self) -> None:
        """Barge-in: the caller's side must drop audio it has queued and stop playback now."""

    async def send_transcript(self, role: str, text: str) -> None:
        """A completed turn (`user` or `assistant`)."""

    async def send_event(self, event: dict[str, Any]) -> None:
        """An extra, transport-specific message (for example `tool.started`); may be ignored."""

    async def transfer(self, destination: str) -> None:
        """Hand the caller to a human at `destination` (E.164). `hang_up(TRANSFERRED)` follows."""

    async def hang_up(self, ending: Ending, message: str = "") -> None:
        """End the connection (the conversation has finished or failed); idempotent."""

    # Optional: a transport that learns when its listener really played the audio (a phone stream's
    # mark echoes) may define `playback_lag(now: float) -> float`, the seconds by which the listener
    # is behind the playout's estimate; on barge-in the session keeps only what was heard by then.


# --- the voice pipeline and its speech parts -----------------------------------------------------


class VoicePipeline(Protocol):
    """A voice engine run by the shell. `prepare` loads what the conversation needs (before the call
    record exists); `begin` starts its stages with `session.spawn`; `say`/`end` queue the shell's own
    sentences (disclosure, greeting, handoff) on a response; `interrupt` drops queued work and cancels
    in-flight work (the response is already marked cancelled). The module that defines a pipeline
    may define `configuration_problems() -> list[str]` (why it cannot run as configured), which the
    engine registry (realtime/engine/registry.py) asks for without knowing the pipeline."""

    name: str

    @classmethod
    def preload(cls) -> None: ...

    async def prepare(self, session: Session) -> None: ...
    def begin(self) -> None: ...
    def push_audio(self, pcm16_16k: bytes) -> None: ...
    def say(self, response: Response, text: str) -> None: ...
    def end(self, response: Response) -> None: ...
    async def text_turn(self, text: str) -> None: ...
    def interrupt(self) -> None: ...
    async def aclose(self) -> None: ...


class Detector(Protocol):
    speaking: bool
    current_speech_ms: int

    def feed(self, pcm16_16k: bytes) -> list[Any]: ...


class Recognizer(Protocol):
    """start(), feed() while the caller speaks, finish() -> the turn's words. A recognizer that can
    tell the words so far without ending the utterance also has `peek() -> str`: the cascade then
    ends turns that read as finished after VAD_QUICK_END_SILENCE_MS (realtime/engine/cascade/turn_taking.py)."""

    def start(self) -> None: ...
    def feed(self, pcm16_16k: bytes) -> None: ...
    def finish(self) -> str: ...


class Mixer(Protocol):
    has_bed: bool

    def next_frame(self, speech: bytes | None, *, user_speaking: bool, keyboard: bool) -> bytes: ...


# --- the call record -----------------------------------------------------------------------------


class CallRecord(Protocol):
    """The call a session records (a `calls.models.Call` in production)."""

    @property
    def pk(self) -> Any: ...
    @property
    def from_number(self) -> str | None: ...
    @property
    def to_number(self) -> str | None: ...


class Recorder(Protocol):
    """The durable side of a conversation: its call record (opened by `start`, closed by `finish`) and
    its agent log. Writes are queued in order and never block the audio path. The database
    implementation is realtime/engine/session/records.py (`CallRecorder`); testing/recording.py keeps
    everything in memory (`MemoryRecorder`), for tests that need no database.

    A caller's message is held until the next message, `release_caller_message()` or the end of the
    call: a caller who goes on before hearing the answer extends it (`extend_caller_message`)."""

    @property
    def channel(self) -> str: ...
    @property
    def to_number(self) -> str | None: ...
    @property
    def session_id(self) -> str: ...
    @property
    def call(self) -> CallRecord | None: ...

    def log(self, severity: str, message: str, **fields: Any) -> None: ...
    async def start(self) -> CallRecord: ...
    def message(self, role: str, text: str, occurred_at: datetime | None = None) -> None: ...
    def extend_caller_message(self, text: str) -> None: ...
    def release_caller_message(self) -> None: ...
    def tool_invocation(
        self,
        *,
        tool_name: str,
        request: dict[str, Any],
        response: str,
        status: str,
        duration_ms: int,
        agent_tool_id: Any = None,
    ) -> None: ...
    def llm_usage(self, *, provider: str, model: str, **figures: Any) -> None: ...
    def turn_latency(self, stages_ms: dict[str, float | None]) -> None: ...
    async def finish(self, status: str) -> CallRecord | None: ...
