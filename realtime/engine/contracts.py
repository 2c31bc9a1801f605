"""The engine's contracts, on its ground floor: what the session shell, the voice pipelines, the brains,
the tools and the transports agree on. It imports only the other ground-floor modules (audio format,
clock, timing) and the kit, so that every part of the engine can depend on it and it on none of them.

- The conversation: `Turn`, `ToolCall`, `ToolSpec`, `BrainContext`, `Usage`, and the `Brain` that
  produces `TextPiece`s, `ToolCall`s and `Usage` (see `Brain` below).
- The transport: `Transport` and the named `Ending`s it maps to its wire (close codes for the browser
  socket, a hang-up or a transfer for a phone call).
- The voice pipeline the shell runs (`VoicePipeline`) and the cascade's speech parts (`Detector`,
  `Recognizer`, `Mixer`).
- The call record a session writes (`Recorder`): the database in production
  (realtime/engine/session/records.py), in memory in tests (testing/recording.py).
- The response handle a pipeline speaks through (`Response`, its `Segment`s), and the conversation
  the pipeline serves (`Conversation`, the session shell as a pipeline sees it).
- The session shell as its answering-machine handling sees it (`VoicemailHost`).

The audio format (rates, frame sizes) is beside it in realtime/engine/audio.py.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from kit.providers import ProviderError
from realtime.engine.audio import OUT_BYTES_PER_SECOND
from realtime.engine.clock import Clock
from realtime.engine.timing import TurnTiming

if TYPE_CHECKING:
    from agents.models import Agent  # a model: imported only once the apps are ready

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
    cached_input_tokens: int = 0  # of the input tokens, those the provider read from its cache (when reported)


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


# The names of the handoff tools (realtime/engine/tools/handoff.py): `handoff_to_<the target's name>`.
HANDOFF_TOOL_PREFIX = "handoff_to_"


@dataclass(frozen=True)
class Handoff:
    """A handoff to another agent of the organization, as the agent's `handoffs` entry says
    (agents/handoffs.py): which agent, and how much of the conversation goes with the call."""

    agent_id: str
    context: str = "all"  # "all" | "lastN" | "summary" | "none"
    last_n: int | None = None
    reason: str = ""  # why, in the brain's words (the tool call's `reason`), kept on the call record


@dataclass(frozen=True)
class ToolOutcome:
    result: str  # the JSON string the brain gets (a JSON object serialized)
    status: str  # "success" | "error" | "timeout" | "cancelled"  (calls.models.ToolInvocationStatus values)
    transfer_to: str | None = None  # set by transfer_call: the E.164 destination the shell must transfer to
    transfer_mode: str = "cold"  # ... "cold" (the carrier dials) or "warm" (the person is briefed first)
    end_call: bool = False  # set by end_call: the shell ends the call once the agent's goodbye has played
    reason: str | None = None  # a failure in plain words, as in the agent log (no URL, secret or argument)
    digits: str | None = None  # set by send_digits: the keys the shell plays as keypad tones into the call
    handoff_to: Handoff | None = None  # set by a handoff tool: the agent the shell hands the call to


class Brain(Protocol):
    def respond(self, context: BrainContext, history: Sequence[Turn]) -> AsyncIterator[BrainOutput]: ...


# --- the transport -------------------------------------------------------------------------------
#
# The browser socket implements `Transport` in realtime/consumers.py; a phone media stream implements
# the same methods in its own wire format (telephony/consumers.py). The engine never knows which
# transport it serves: endings are named, and each transport maps them to its wire.


class Ending(StrEnum):
    COMPLETED = "completed"  # ended normally (the caller stopped it, or the agent ended it: end_call, max duration)
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
    #
    # Optional: a transport that shows the agent's tool calls as they happen (the browser socket of a
    # session opened with `events: ["tool"]`, an agent test's collecting transport) may define
    #   async def tool_called(self, call: ToolCall) -> None  -- before the tool runs
    #   async def tool_returned(self, call: ToolCall, outcome: ToolOutcome, duration_ms: int) -> None
    # which the shell's `run_tool` calls (after `tool.started`, and after `tool.finished`).


# --- the response handle -------------------------------------------------------------------------
#
# One assistant turn being produced, spoken and heard, and the segments of its speech on their way to
# the listener. Like LiveKit's `SpeechHandle`, the handle owns its state changes: a pipeline or the
# shell calls its methods (`cancel`, `lock_said`, `transfer_after`, `end_after`, `heard_text`...) and
# never writes its fields, so that what a barge-in may cut, what joins the history and what happens
# once it has played are decided in one place.

# A word that ends a sentence (the live caption of a speech-to-speech answer goes sentence by sentence).
SENTENCE_END = re.compile(r"[.!?][\"')\]]*$")


@dataclass(eq=False)
class Segment:
    """One synthesized sentence on its way to the listener."""

    text: str
    audio: bytes
    owner: Any = None  # the response it belongs to
    index: int = 0  # its sentence number within that response
    position: int = 0  # bytes handed to the mixer so far
    play_start: float | None = None  # clock time its first frame plays at the listener

    @property
    def duration(self) -> float:
        return len(self.audio) / OUT_BYTES_PER_SECOND

    def heard_fraction(self, now: float) -> float:
        if self.play_start is None or now <= self.play_start:
            return 0.0
        if self.duration <= 0:
            return 1.0
        return min(1.0, (now - self.play_start) / self.duration)


@dataclass(eq=False)
class Response:
    """One assistant turn being produced, spoken and heard."""

    locked: int = 0  # leading sentences that a barge-in cannot cut (the AI-identity disclosure)
    turn_ended_at: float | None = None  # when the user turn that prompted it ended
    sentences: list[str] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    done: bool = False
    cancelled: bool = False  # interrupted: every stage drops the work it still holds for it
    in_history: int = 0  # leading sentences already in the history (said before a tool call)
    transfer_to: str | None = None  # hand the caller to this number once the response has played
    transfer_mode: str = "cold"  # ... cold or warm (docs/guides/phone-calls.md#warm-transfers)
    handoff_to: Handoff | None = None  # or hand the call to this agent once the response has played
    decided_by: str | None = None  # the tool whose call decided the transfer, handoff or end of call
    then_end: tuple[Ending, str] | None = None  # or end the session once it has played
    end_reason: str | None = None  # why, then (a calls.models.EndedReason value)
    timing: TurnTiming | None = None  # the caller turn it answers (None: the shell's own, the greeting)
    shown: dict[int, int] = field(default_factory=dict)  # sentence number -> its words sent as agent_speech
    speaking: bool = False  # an agent_speech was sent and its agent_speech.ended not yet

    # --- state changes: pipelines and the shell call these, never write the fields -------------------

    def add_sentence(self, text: str) -> int:
        """A sentence to be spoken (possibly empty, its words still to come); its sentence number."""
        self.sentences.append(text)
        return len(self.sentences) - 1

    def revise_sentence(self, index: int, text: str) -> None:
        """The words of sentence `index` as known now (a provider's transcript grows as it speaks)."""
        self.sentences[index] = text

    def add_segment(self, segment: Segment) -> None:
        """Speech of this response queued for playout."""
        self.segments.append(segment)

    def answers(self, timing: TurnTiming) -> None:
        """The caller turn this response answers, timed through the engine."""
        self.timing = timing

    def lock_said(self) -> None:
        """A barge-in cannot cut the sentences said so far (a handoff announcement)."""
        self.locked = len(self.sentences)

    def transfer_after(self, destination: str, *, mode: str = "cold", by: str | None = None) -> None:
        """Hand the caller to `destination` once the response has played (`by`: the deciding tool)."""
        self.transfer_to = destination
        self.transfer_mode = mode
        self.decided_by = by

    def hand_off_after(self, handoff: Handoff, *, by: str | None = None) -> None:
        """Hand the call to another agent once the response has played (`by`: the deciding tool)."""
        self.handoff_to = handoff
        self.decided_by = by

    @property
    def passes_on(self) -> bool:
        """It ends with the caller passed on: to a person (a transfer) or to another agent (a handoff)."""
        return bool(self.transfer_to or self.handoff_to)

    def end_after(self, ending: Ending, message: str = "", *, reason: str | None = None, by: str | None = None) -> None:
        """End the session once the response has played (`reason`: the call's ended reason; `by`: the
        deciding tool)."""
        self.then_end = (ending, message)
        self.end_reason = reason
        self.decided_by = by

    def withdraw(self) -> None:
        """Its transfer, handoff or end of call is taken back (the caller went on with the turn it answered)."""
        self.transfer_to = None
        self.handoff_to = None
        self.then_end = None
        self.end_reason = None
        self.decided_by = None

    def said_in_history(self) -> None:
        """The sentences said so far are in the history (said before a tool call)."""
        self.in_history = len(self.sentences)

    def cancel(self) -> None:
        """Interrupted: every stage drops the work it still holds for it."""
        self.cancelled = True

    def finish(self) -> None:
        """Played out, cut, or dropped: nothing more of it is committed."""
        self.done = True

    def start_speaking(self) -> None:
        """Its words began to be shown as agent speech."""
        self.speaking = True

    def stop_speaking(self) -> bool:
        """Its words stopped being shown; False when they were not being shown."""
        was, self.speaking = self.speaking, False
        return was

    # --- what was heard -------------------------------------------------------------------------------

    def heard_text(self, now: float, *, first_sentence: int = 0) -> str:
        """The words the listener has heard by `now` (whole sentences, then a proportional share of
        the sentence that was playing)."""
        words: list[str] = []
        for segment in self.segments:
            fraction = segment.heard_fraction(now)
            part = segment.text.split()
            heard = part if fraction >= 1.0 else part[: int(len(part) * fraction)]
            if segment.index >= first_sentence:
                words.extend(heard)
            if fraction < 1.0:
                break
        return " ".join(words)

    def starting(self, segment: Segment) -> str:
        """The words that start playing with `segment` and were not shown yet: its whole sentence (a
        cascade's segment is one sentence). A speech-to-speech item's words are spread over many
        segments: the words placed on this segment and the earlier ones of its item, carried on to
        the end of their sentence as far as the provider's transcript has come."""
        index = segment.index
        words = (self.sentences[index] if index < len(self.sentences) else segment.text).split()
        due = 0
        for earlier in self.segments:
            if earlier.index == index and earlier.text:
                due += earlier.text.count(" ") + 1  # placed words are joined by single spaces
            if earlier is segment:
                break
        shown = self.shown.get(index, 0)
        if min(due, len(words)) <= shown:
            return ""
        end = next((n + 1 for n in range(due - 1, len(words)) if SENTENCE_END.search(words[n])), len(words))
        self.shown[index] = end
        return " ".join(words[shown:end])

    def heard_seconds(self, now: float) -> float:
        """How long the listener has been hearing it by `now` (0 before its first audio plays)."""
        start = self.segments[0].play_start if self.segments else None
        return max(0.0, now - start) if start is not None else 0.0

    def interruptible(self, now: float) -> bool:
        if self.locked == 0:
            return True
        if len(self.segments) < self.locked:
            return False
        last = self.segments[self.locked - 1]
        return last.play_start is not None and now >= last.play_start + last.duration


# --- the voice pipeline, the conversation it serves, and its speech parts --------------------------


class Conversation(Protocol):
    """The session shell as a voice pipeline sees it (realtime/engine/session/shell.py implements it):
    the agent, the clock and the history; responses to speak and play; caller turns, tool calls and
    model usage to hand back; stages to run as tracked tasks."""

    agent: Agent
    clock: Clock
    context: BrainContext
    history: list[Turn]
    recorder: Recorder
    transport: Transport
    response: Response | None
    user_speaking: bool  # set by the pipeline's voice activity detection
    run_blocking: Callable[..., Awaitable[Any]]  # runs a blocking call off the event loop

    @property
    def transferring(self) -> bool: ...  # handed off or closing (end_call, max duration): no more turns

    def spawn(self, coroutine: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]: ...
    def begin_response(self, *, turn_ended_at: float | None = None, locked: int = 0) -> Response: ...
    def play(self, response: Response, text: str, audio: bytes, index: int) -> None: ...
    def finish_response(self, response: Response) -> None: ...
    def agent_speaking(self) -> bool: ...
    def heard_by(self, now: float) -> float: ...
    async def interrupt(self, now: float, *, forget: bool = False) -> None: ...
    def interruption(self, kind: str, speech_ms: int) -> None: ...  # caller speech over the agent, judged
    async def heard_out(self, response: Response) -> None: ...  # until it has played, was cut or dropped
    async def user_said(self, text: str, *, interrupt: bool = True) -> bool: ...
    async def user_went_on(self, text: str) -> bool: ...
    async def user_added(self, text: str) -> None: ...  # joins the caller's last turn; its answer stands
    def turn_with(self, text: str) -> list[Turn]: ...  # the history with `text` joined to that turn
    async def run_tool(self, call: ToolCall) -> ToolOutcome: ...
    def tool_round(
        self, response: Response, said: str, calls: Sequence[ToolCall], outcomes: Sequence[ToolOutcome]
    ) -> None: ...
    def usage(self, usage: Usage) -> None: ...
    def brain_failed(self, exc: ProviderError) -> str: ...
    def passing_sentence(self, response: Response) -> str: ...  # the announcement of a transfer or handoff
    def goodbye_sentence(self) -> str: ...


class VoicemailHost(Protocol):
    """The session shell as its answering-machine handling sees it (realtime/engine/session/voicemail.py;
    realtime/engine/session/shell.py implements it): the agent, the clock, the recorder and the call's
    placeholder values; and what a machine's verdict does to the call (the agent goes quiet, leaves the
    message, or the call ends)."""

    agent: Agent
    clock: Clock
    recorder: Recorder
    placeholder_values: dict[str, str]  # the values of {{name}} placeholders, once the call is open

    @property
    def transferring(self) -> bool: ...  # handed off or closing: the greeting is not played

    def spawn(self, coroutine: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]: ...
    async def machine_talking(self) -> None: ...  # a machine's greeting plays: cut the agent, answer nothing
    async def leave_voicemail(self, message: str) -> None: ...  # the disclosure and `message`, then the end
    async def end_for_voicemail(self, why: str) -> None: ...  # the call ends at once (endedReason voicemail)


class VoicePipeline(Protocol):
    """A voice engine run by the shell. `prepare` loads what the conversation needs (before the call
    record exists); `begin` starts its stages with `session.spawn`; `say`/`end` queue the shell's own
    sentences (disclosure, greeting, handoff) on a response; `interrupt` drops queued work and cancels
    in-flight work (the response is already marked cancelled). The engine registry
    (realtime/engine/registry.py) asks a pipeline class, without knowing it, for the settings it
    cannot run without (`required_settings`) and what else is wrong (`configuration_problems`)."""

    name: str
    required_settings: ClassVar[tuple[str, ...]]

    @classmethod
    def configuration_problems(cls) -> list[str]: ...

    @classmethod
    def preload(cls) -> None: ...

    async def prepare(self, session: Conversation) -> None: ...
    def begin(self) -> None: ...
    def push_audio(self, pcm16_16k: bytes) -> None: ...
    def say(self, response: Response, text: str) -> None: ...
    def end(self, response: Response) -> None: ...
    async def text_turn(self, text: str) -> None: ...
    def interrupt(self) -> None: ...
    async def aclose(self) -> None: ...


class Detector(Protocol):
    """Voice activity detection over caller audio: `feed` returns its events (speech start, pause,
    end). A detector that can report pauses for the quick end of turn also has `use_quick_end()`,
    `pauses`, `end_pause(number, after_ms)` and `split_at_pause(number, after_ms)`
    (realtime/engine/speech/silero_vad.py)."""

    @property
    def speaking(self) -> bool: ...
    @property
    def current_speech_ms(self) -> int: ...

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
    @property
    def variables(self) -> dict[str, str]: ...  # the call's per-call variables (docs/guides/variables.md)


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
    def counts_as_live(self) -> bool: ...  # in the live gauges (a socket's session is; an agent test's is not)
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
    def measure(self, *, product: str, provider: str, model: str | None, unit: str, quantity: float) -> None: ...
    def turn_latency(self, stages_ms: dict[str, float | None]) -> None: ...
    def handoff(self, *, from_agent: Agent, to_agent: Agent, reason: str, occurred_at: datetime) -> None: ...
    def flow_progress(self, *, path: list[str], collected: dict[str, Any]) -> None: ...
    def transfer_update(self, *, mode: str, destination: str, status: str, at: datetime) -> None: ...
    async def finish(
        self, status: str, *, ended_reason: str | None = None, message: str = "", recording: bool = False
    ) -> CallRecord | None: ...
