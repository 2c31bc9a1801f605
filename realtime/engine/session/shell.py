"""The session shell: one conversation between a caller and an agent, whatever the transport and
whatever the voice engine.

The shell owns what every engine shares: the transport, the playout and its mixer (ambient and
keyboard sounds), the call record and agent log (a `Recorder`: CallRecorder, in the database, unless
one is given), the idle watchdog, the tool dispatcher, the agent's prompt (a dynamic one fetched at
the start) and the conversation history. A replaceable `VoicePipeline` turns caller audio into agent
speech through the shell, which it sees as a `Conversation` (realtime/engine/contracts.py): the
offline cascade (realtime/engine/cascade/) or a speech-to-speech provider
(realtime/engine/speech_to_speech/), chosen by the engine registry.

Barge-in is one interruption signal: `interrupt()` marks the current response cancelled, asks the
pipeline to drop its queued work and cancel its in-flight work, cuts the playout, tells the
transport to `clear`, and keeps in the transcript only what the caller could have heard.

    session = open_session(agent=agent, transport=transport, channel="web")
    task = asyncio.create_task(session.run())    # start, greet, converse until stop
    session.push_audio(pcm16_16k)                 # from the transport, never blocks
    await session.stop()                          # the caller hung up

A typed session (`open_session(..., modality="text")`, docs/guides/typed-sessions.md) is the same
conversation without audio: the text pipeline (realtime/engine/cascade/text.py) answers, there is no
playout, mixer or recording, and each answer is committed (history, call record, an assistant
`send_transcript`) as soon as the brain has finished it; words said before a tool call are committed
when the tool runs. Caller turns arrive through `caller_text`; `settled()` waits for the answer:

    session = open_session(agent=agent, transport=transport, channel="web", modality="text")
    task = asyncio.create_task(session.run())
    await session.ready()                         # started (False: it failed or ended)
    await session.settled()                       # the greeting has been committed
    await session.caller_text("What are your opening hours?")
    await session.settled()                       # the answer has been committed (and sent)
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from channels.db import database_sync_to_async
from django.conf import settings
from django.utils import timezone

from agents.disclosure import disclosure_for
from agents.models import Agent, BackgroundSound, GreetingType, PromptType
from agents.services import ambient_sound_playable
from calls.models import CallModality, CallStatus, CostProduct, CostUnit, EndedReason, ToolInvocationStatus
from calls.variables import placeholders_fill
from kit import metrics, tracing
from kit.providers import ProviderError
from realtime.engine.audio import IN_BYTES_PER_SECOND
from realtime.engine.brain.flow import FlowBrain
from realtime.engine.clock import Clock, LoopClock
from realtime.engine.contracts import (
    BrainContext,
    CallRecord,
    Ending,
    Handoff,
    Mixer,
    Recorder,
    Response,
    Segment,
    ToolCall,
    ToolOutcome,
    Transport,
    Turn,
    Usage,
    VoicePipeline,
)
from realtime.engine.phrases import phrase
from realtime.engine.prompt import AssistantPrompt, fetch_assistant_prompt
from realtime.engine.registry import pipeline_class, text_pipeline_class
from realtime.engine.session.handoff import passed_history, summary_of
from realtime.engine.session.playout import EndMarker, Playout, Tones
from realtime.engine.session.recording import CallAudio, save_recording
from realtime.engine.session.records import CallRecorder
from realtime.engine.session.voicemail import AnsweringMachine
from realtime.engine.sound import dtmf
from realtime.engine.sound import mixer as sound_mixer
from realtime.engine.sound.hold import hold_chime
from realtime.engine.timing import TurnTiming
from realtime.engine.tools.dispatcher import ToolDispatcher
from realtime.engine.tools.transfer_call import transfer_setting
from realtime.selectors import handoff_agent_get

logger = logging.getLogger(__name__)

RunBlocking = Callable[..., Awaitable[Any]]

INPUT_BURST_SECONDS = 3.0  # how far a caller's audio may run ahead of real time (network bursts)
# How long stop() waits for the cancelled stages before it finishes the call anyway: a stage that
# does not end when cancelled (a bug) must not leave the call `active` and the socket open.
STOP_GRACE_SECONDS = 5.0
# How long a closing line (end_call's goodbye, the max-duration line) may take to play before the call
# is ended anyway: a pipeline that never plays it must not leave the call open.
CLOSING_GRACE_SECONDS = 20.0
# Handoffs between agents in one call (docs/guides/handoffs.md): after the last one, no handoff tool is offered.
MAX_HANDOFFS_PER_CALL = 10
HOLD_CHIME_SECONDS = 3.0  # a warm transfer's hold audio: a chime this often


@dataclass(eq=False)
class _ToolRequest:
    """A tool request sent for the caller's current request: its result is shared by every round that
    asks the same tool with the same arguments (`Session.run_tool`)."""

    task: asyncio.Task[ToolOutcome]
    owner: Response | None  # the response whose brain asked for it last
    keys_pressed: bool = False


def _default_mixer(ambient: str | None, volume: float, ducking: bool) -> Mixer:
    return sound_mixer.Mixer(ambient=ambient, volume=volume, ducking=ducking)


class Session:
    def __init__(
        self,
        *,
        agent: Agent,
        transport: Transport,
        recorder: Recorder,
        pipeline: VoicePipeline | None = None,
        tools: ToolDispatcher | None = None,
        mixer: Callable[[str | None, float, bool], Mixer] | None = None,
        clock: Clock | None = None,
        run_blocking: RunBlocking | None = None,
        modality: str = CallModality.AUDIO,
    ) -> None:
        self.agent = agent
        # A typed session (no audio at all): answers are committed as soon as the brain has produced them.
        self.text = modality == CallModality.TEXT
        self.transport = transport
        self.recorder = recorder
        self.pipeline = pipeline
        self.tools = tools or ToolDispatcher(agent=agent, recorder=recorder, to_number=recorder.to_number)
        self._make_mixer = mixer or _default_mixer
        self.clock = clock or LoopClock()
        self.run_blocking = run_blocking or asyncio.to_thread
        self.lead_ms = int(settings.REALTIME_OUTPUT_LEAD_MS)
        self.idle_seconds = float(settings.REALTIME_INPUT_IDLE_SECONDS)

        self.context = BrainContext(agent_name=agent.name, language=agent.language)
        self.history: list[Turn] = []
        self.playout: Playout | None = None
        self.call_id: str | None = None
        self.response: Response | None = None
        self.user_speaking = False  # set by the pipeline's voice activity detection
        self._last_user: int | None = None  # the caller's last turn in the history

        self._tasks: set[asyncio.Task[Any]] = set()
        self._tools_running = 0
        self._input_since: float | None = None  # clock time of the first caller audio
        self._input_seconds = 0.0  # caller audio accepted so far
        self._last_input: float | None = None
        self._started = asyncio.Event()  # start finished, well or not
        self._changed = asyncio.Event()  # pulsed when a response is done and when the session ends (settled)
        self._start_task: asyncio.Task[Any] | None = None
        self._ended = asyncio.Event()
        self._stopping = False
        self._transferring = False
        self._handed_off = False  # the transfer was asked of the carrier (transport.transfer)
        self._handoffs = 0  # handoffs to other agents so far (at most MAX_HANDOFFS_PER_CALL)
        self._closing = False  # end_call or the max duration: the closing line plays, then the call ends
        self._closing_timer: asyncio.Task[None] | None = None  # end_call's CLOSING_GRACE_SECONDS bound
        # Tool requests of the caller's current request (since an answer was last heard whole), by tool
        # and arguments: the same request asked again (the caller went on speaking) gets the same result.
        self._requests: dict[tuple[str, str], _ToolRequest] = {}
        self.response_timeout = float(settings.RESPONSE_TIMEOUT_SECONDS)
        self.ended_reason: str | None = None  # why the call ended (calls.models.EndedReason), set by stop
        self._failure: asyncio.Task[None] | None = None
        self._ending: asyncio.Task[None] | None = None
        self._live: metrics.Live | None = None  # the live gauges, once the engine is known
        self._trace = tracing.CallTrace.start(channel=recorder.channel)
        self.audio: CallAudio | None = None  # the call's recording (agents with recording_enabled)
        # The values of {{name}} placeholders, once the call is open (the call's variables and the built-ins).
        self.placeholder_values: dict[str, str] = {}
        self.voicemail = AnsweringMachine(self)  # answering machines on outbound calls
        self.flow: FlowBrain | None = None  # the agent's flow as it runs (path, collected), when it has one

    # --- transport side ------------------------------------------------------------------------

    def push_audio(self, pcm16_16k: bytes) -> bool:
        """Caller audio (PCM16 LE mono 16 kHz, an even number of bytes). Never blocks. False when the
        audio is refused: a caller cannot send faster than real time (plus INPUT_BURST_SECONDS)."""
        if self._stopping or not pcm16_16k:
            return True
        now = self.clock.now()
        if self._input_since is None:
            self._input_since = now
        seconds = len(pcm16_16k) / IN_BYTES_PER_SECOND
        if self._input_seconds + seconds > now - self._input_since + INPUT_BURST_SECONDS:
            return False
        self._input_seconds += seconds
        self._last_input = now
        if self.audio is not None:
            self.audio.caller_audio(now, pcm16_16k)
        if self.pipeline is not None:
            self.pipeline.push_audio(pcm16_16k)
        return True

    async def caller_text(self, text: str) -> None:
        """A caller turn that arrives as text rather than speech (a typed turn, or DTMF keys on a phone
        call, "the caller entered 4 5 6 7"): it is taken like a spoken turn, and interrupts the agent
        like a barge-in. Ignored before the session has started (see `ready`) and once it ends."""
        if self.pipeline is not None and self._started.is_set() and not self._stopping:
            self._last_input = self.clock.now()  # typing is the caller's activity too (the idle watchdog)
            await self.pipeline.text_turn(text)

    async def ready(self) -> bool:
        """Wait until the session has started (`run` is running): True when it did and has not ended."""
        await self._started.wait()
        return self.call_id is not None and not self._stopping

    async def settled(self) -> None:
        """Wait until the agent has nothing more to say for now: the current response (the greeting, or
        the answer to the last caller turn) has been committed, cut or dropped, and a transfer or end of
        call it asked for has happened; or the session has ended. In a typed session, after
        `await caller_text(text)`, the answer is then in `history` and was sent to the transport as an
        assistant transcript (nothing when the brain said nothing). Put a timeout around it."""
        await self._started.wait()
        while not self._ended.is_set():
            response = self.response
            if response is None or response.done:
                ending = self._ending
                if ending is None or ending.done():
                    return
                await asyncio.wait({ending})
                continue
            await self._changed.wait()

    def _pulse(self) -> None:
        """A response is done, or the session ended: whoever waits in `settled` looks again."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def run(self) -> None:
        """Start the engine, greet, and converse until `stop` (or a failure)."""
        self._start_task = asyncio.current_task()
        try:
            await self._start()
        except asyncio.CancelledError:
            self._started.set()
            await self.stop(CallStatus.FAILED, EndedReason.ERROR)
            raise
        except Exception as exc:  # noqa: BLE001 - any start failure ends the session as failed, logged in fail()
            self._started.set()
            await self.fail(exc)
            return
        self._started.set()
        await self._ended.wait()

    async def stop(self, status: str = CallStatus.COMPLETED, reason: str | None = None, message: str = "") -> None:
        """End the conversation: keep what was heard of a running answer, finish the call record.
        `reason` (an EndedReason) says why, `message` more (a failure's cause: the call's endedMessage); by
        default caller-hung-up when completed, error when failed. The first stop decides them."""
        if self._stopping:
            await self._ended.wait()
            return
        self._stopping = True
        if reason is None:
            reason = EndedReason.CALLER_HUNG_UP if status == CallStatus.COMPLETED else EndedReason.ERROR
        if self._handed_off and status == CallStatus.COMPLETED and reason == EndedReason.CALLER_HUNG_UP:
            reason = EndedReason.TRANSFERRED  # the line left the agent because it was handed to the destination
        self.ended_reason = str(reason)
        try:
            if self._start_task is not None and self._start_task is not asyncio.current_task():
                # Still starting: let the start finish (or fail) so that the call record it opens is closed.
                await self._started.wait()
            response = self.response
            if response is not None and not response.done:
                await self._close_response(response, self.clock.now(), tell=False)
            await self._cancel_tasks()
            await self._close_parts()
            recording = self.audio is not None and not self.audio.empty and self.call_id is not None
            await self.recorder.finish(status, ended_reason=self.ended_reason, message=message, recording=recording)
            self._store_recording()
        finally:
            if self._live is not None:
                self._live.close()
            engine = self.pipeline.name if self.pipeline is not None else None
            self._trace.end(call_id=self.call_id, status=str(status), engine=engine)
            self._ended.set()
            self._pulse()

    async def fail(self, exc: BaseException) -> None:
        """The engine failed: log it, record the call `failed`, and end the connection."""
        if self._stopping:
            return
        logger.error("session %s failed", self.recorder.session_id, exc_info=exc)
        self.recorder.log("error", f"engine error: {type(exc).__name__}: {str(exc)[:300]}")
        if isinstance(exc, ProviderError):  # its message is safe to show an operator (kit/providers.py)
            reason, cause = EndedReason.PROVIDER_ERROR, f"A provider failed: {exc.message}"
        else:
            reason, cause = (
                EndedReason.ERROR,
                f"The conversation engine failed ({type(exc).__name__}; see the agent log).",
            )
        await self.stop(CallStatus.FAILED, reason, cause)
        # A configuration problem is the operator's to fix and safe to name; anything else stays generic.
        permanent = isinstance(exc, ProviderError) and exc.permanent
        if isinstance(exc, ProviderError):
            engine = self.pipeline.name if self.pipeline is not None else "engine"
            metrics.record_provider_error(
                "speech_to_speech" if engine == "speech-to-speech" else engine, permanent=permanent
            )
        message = str(exc) if permanent else "The conversation engine failed"
        await self._hang_up(Ending.FAILED, message)

    # --- start ---------------------------------------------------------------------------------

    async def _start(self) -> None:
        agent = self.agent
        started = time.monotonic()
        if self.pipeline is None:
            self.pipeline = (await self.run_blocking(text_pipeline_class if self.text else pipeline_class))()
        live = self._live = metrics.Live(
            channel=self.recorder.channel, engine=self.pipeline.name, counted=self.recorder.counts_as_live
        )
        live.session_started()
        await self.pipeline.prepare(self)
        if not self.text:  # a typed session has no audio: no mixer, no playout, no recording
            ambient = agent.ambient_sound if await database_sync_to_async(ambient_sound_playable)(agent) else None
            mixer = await self.run_blocking(
                self._make_mixer, ambient, float(agent.ambient_sound_volume), bool(agent.ambient_sound_ducking)
            )
            self.playout = Playout(
                mixer=mixer,
                transport=self.transport,
                clock=self.clock,
                user_speaking=lambda: self.user_speaking,
                keyboard=lambda: self._tools_running > 0 and agent.background_sound == BackgroundSound.KEYBOARD,
                on_start=self._segment_playing,
                on_sent=self._sent,
                lead_ms=self.lead_ms,
            )
        origin = self.clock.now()
        call = await self.recorder.start()
        self.voicemail.arm(call)
        if agent.recording_enabled and not self.text:
            self.audio = CallAudio(origin)
        self.call_id = str(call.pk)
        live.call_opened()
        specs = await self.tools.load()
        self.recorder.log(
            "info",
            "session started",
            callId=self.call_id,
            channel=self.recorder.channel,
            voiceEngine=self.pipeline.name,
            modality=CallModality.TEXT if self.text else CallModality.AUDIO,
            language=agent.language,
            tools=[spec.name for spec in specs],
            startupMs=round((time.monotonic() - started) * 1000),
        )
        await self.transport.started(self.call_id)
        disclosure = disclosure_for(
            template_id=agent.ai_identity_disclosure_template_id, language=agent.language, agent_name=agent.name
        )
        self.recorder.log("info", "disclosure spoken", disclosureVersion=disclosure.version)
        identity, instructions, greeting = agent.identity, agent.instructions, ""
        if agent.greeting_type == GreetingType.STATIC and agent.static_greeting:
            greeting = agent.static_greeting
        if agent.prompt_type == PromptType.DYNAMIC:
            prompt = await self._dynamic_prompt()
            if prompt is None and not (identity.strip() or instructions.strip()):
                self._unavailable(disclosure.text)
                return
            if prompt is not None:
                identity = prompt.identity if prompt.identity is not None else identity
                instructions = prompt.instructions
                if agent.greeting_type == GreetingType.DYNAMIC and prompt.greeting:
                    greeting = prompt.greeting
        identity, instructions, greeting = self._placeholders_fill(identity, instructions, greeting)
        self.context = BrainContext(
            agent_name=agent.name,
            language=agent.language,
            identity=identity,
            instructions=instructions,
            disclosure=disclosure.text,
            greeting=greeting,
            tools=specs,
        )
        self._begin()
        self._greet_or_hold(disclosure.text, greeting)

    def _placeholders_fill(self, *texts: str) -> list[str]:
        """The texts with their {{name}} placeholders filled (docs/guides/variables.md): from the call's
        variables and the built-ins, an unknown name by nothing, logged once for the call as one `warn`."""
        self.placeholder_values = values = placeholder_values(self.agent, self.recorder.call)
        filled: list[str] = []
        unknown: list[str] = []
        for text in texts:
            text, missing = placeholders_fill(text, values)
            filled.append(text)
            unknown.extend(name for name in missing if name not in unknown)
        if unknown:
            self.recorder.log("warn", f"unknown placeholders left empty: {', '.join(unknown)}", placeholders=unknown)
        return filled

    async def _dynamic_prompt(self, agent: Agent | None = None) -> AssistantPrompt | None:
        """The prompt of `agent` (this call's agent by default) from its serverUrl; None when the request failed."""
        agent = agent or self.agent
        try:
            return await fetch_assistant_prompt(
                agent=agent,
                call_id=self.call_id or "",
                channel=self.recorder.channel,
                from_number=self.recorder.call.from_number if self.recorder.call else None,
                to_number=self.recorder.call.to_number if self.recorder.call else None,
                variables=dict(self.recorder.call.variables or {}) if self.recorder.call else {},
            )
        except ProviderError as exc:
            metrics.record_provider_error("prompt", permanent=exc.permanent)
            has_saved = bool(agent.identity.strip() or agent.instructions.strip())
            self.recorder.log(
                "error",
                "dynamic prompt request failed; " + ("the saved prompt is used" if has_saved else "the call is ended"),
                reason=exc.message,
            )
            return None

    def _begin(self) -> None:
        """Start the pipeline's stages, then the playout (which then finds the greeting's first
        sentence already queued) and the idle watchdog."""
        assert self.pipeline is not None and (self.playout is not None or self.text)
        self.pipeline.begin()
        if self.playout is not None:
            self.spawn(self.playout.run(), "playout")
        self.spawn(self._watchdog(), "watchdog")
        self.spawn(self._time_limit(self.clock.now()), "time-limit")

    def _greet(self, disclosure: str, greeting: str) -> None:
        assert self.pipeline is not None
        first = self._sentences(disclosure)
        response = self.begin_response(locked=len(first))
        for sentence in [*first, *self._sentences(greeting)]:
            self.pipeline.say(response, sentence)
        self._open_flow(response)

    def _open_flow(self, response: Response) -> None:
        """End the greeting `response`; with a flow, its first steps are said in it first (the pipeline
        asks the brain, which runs the flow from its start)."""
        assert self.pipeline is not None
        brain = getattr(self.pipeline, "brain", None)
        answer = getattr(self.pipeline, "answer", None)
        self.flow = brain if isinstance(brain, FlowBrain) else None
        if self.flow is None or answer is None:
            self.pipeline.end(response)
            return
        self.flow.values = self.placeholder_values
        self.flow.on_progress = self._flow_progress
        answer(response)

    def _flow_progress(self, flow: FlowBrain) -> None:
        self.recorder.flow_progress(path=list(flow.path), collected=dict(flow.collected))

    def _greet_or_hold(self, disclosure: str, greeting: str) -> None:
        """Greet at once, or, on an outbound call with answering-machine detection, once the verdict says
        a person (or has not come in time): realtime/engine/session/voicemail.py."""
        if not self.voicemail.holds_greeting:
            self._greet(disclosure, greeting)
            return

        async def held() -> None:
            if await self.voicemail.hold():
                self._greet(disclosure, greeting)

        self.spawn(held(), "greeting-hold")

    def _unavailable(self, disclosure: str) -> None:
        """No prompt at all: say so (after the disclosure) and end the call as failed."""
        assert self.pipeline is not None
        self._begin()
        sentences = [*self._sentences(disclosure), phrase("unavailable", self.agent.language)]
        response = self.begin_response(locked=len(sentences))
        response.end_after(
            Ending.FAILED, "The agent's prompt could not be fetched", reason=EndedReason.ASSISTANT_REQUEST_FAILED
        )
        for sentence in sentences:
            self.pipeline.say(response, sentence)
        self.pipeline.end(response)

    def _sentences(self, text: str) -> list[str]:
        split = getattr(self.pipeline, "split_sentences", None)
        text = text.strip()
        if not text:
            return []
        return (split(text) if split else None) or [text]

    # --- what pipelines call -------------------------------------------------------------------

    def spawn(self, coroutine: Any, name: str) -> asyncio.Task[Any]:
        """Run a stage as a tracked task: cancelled at stop, and its failure fails the session."""
        task = asyncio.create_task(coroutine, name=f"{name}-{self.recorder.session_id}")
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def begin_response(self, *, turn_ended_at: float | None = None, locked: int = 0) -> Response:
        """A new response; one that answers a caller turn (`turn_ended_at`) is bound in time: see
        `_answer_due`."""
        response = self.response = Response(locked=locked, turn_ended_at=turn_ended_at)
        if turn_ended_at is not None and self.response_timeout > 0 and not self._stopping:
            self.spawn(self._answer_due(response, turn_ended_at), "answer-due")
        return response

    async def _answer_due(self, response: Response, since: float) -> None:
        """No caller turn goes unanswered: when the agent has begun no answer RESPONSE_TIMEOUT_SECONDS
        after the turn ended (a brain or a tool that hangs), the pipeline says so (`overdue`: an
        apology, or a word that a tool is still working) and the call goes on."""
        await self.clock.sleep_until(since + self.response_timeout)
        if response.done or response.cancelled or response.sentences or self._stopping or self.pipeline is None:
            return
        engine = self.pipeline.name
        metrics.record_response_timeout(engine)
        waiting = self._tools_running > 0
        self.recorder.log(
            "warn",
            "no answer in time; the caller is told" + (" that a tool is still working" if waiting else ""),
            timeoutSeconds=self.response_timeout,
        )
        overdue = getattr(self.pipeline, "overdue", None)
        if overdue is not None:
            overdue(response, tool_running=waiting)

    def play(self, response: Response, text: str, audio: bytes, index: int) -> None:
        """Queue synthesized speech of `response` (sentence number `index`) for playout; in a typed
        session, a sentence produced (no audio: it is committed with the whole answer)."""
        if response.cancelled:
            return
        if self.text:
            response.add_segment(Segment(text=text, audio=b"", owner=response, index=index))
        elif not audio or self.playout is None:
            return
        else:
            segment = Segment(text=text, audio=audio, owner=response, index=index)
            response.add_segment(segment)
            self.playout.enqueue(segment)
        timing = response.timing
        if timing is not None and timing.first_audio_at is None:
            timing.first_audio_at = self.clock.now()
            self._turn_measured(timing)

    def _turn_measured(self, timing: TurnTiming) -> None:
        """A caller turn's answer has begun: its stages go to the metrics, the call record and the trace."""
        stages = timing.stages_ms()
        engine = self.pipeline.name if self.pipeline is not None else "unknown"
        metrics.record_turn(stages, engine=engine)
        self.recorder.turn_latency(stages)
        began = timing.speech_ended_at if timing.speech_ended_at is not None else timing.turn_ended_at
        self._trace.turn(stages, started_ago=self.clock.now() - began, engine=engine)

    def finish_response(self, response: Response) -> None:
        """Everything of `response` is queued: once it has played, it is committed to the history (in a
        typed session, at once). A tool request still running for an answer that was dropped, and that
        this response's brain did not ask for again, is no longer needed: it is cancelled."""
        self._cancel_unclaimed(response)
        if response.cancelled:
            return
        if self.text:
            self.spawn(self._response_played(response), "answer")
        elif self.playout is not None:
            self.playout.enqueue(EndMarker(owner=response, on_played=self._response_played))

    def agent_speaking(self) -> bool:
        return self.response is not None and not self.response.done

    @property
    def tasks(self) -> frozenset[asyncio.Task[Any]]:
        """The stages running as tracked tasks (`spawn`): cancelled at stop."""
        return frozenset(self._tasks)

    @property
    def transferring(self) -> bool:
        """The call is being handed off or closed (end_call, the max duration): no more caller turns,
        and what the agent says now is not cut by a barge-in."""
        return self._transferring or self._closing

    async def user_said(self, text: str, *, interrupt: bool = True) -> bool:
        """A caller turn: interrupts a running answer, joins the history, the record and the client.
        False when the turn is not taken (nothing understood, or the call is being transferred).
        `interrupt=False`: only record it (a speech-to-speech provider's transcript arrives late,
        often once the provider is already answering that very turn)."""
        text = text.strip()
        if not text:
            self.recorder.log("info", "caller speech not recognised")
            return False
        if self.transferring or self._stopping:
            return False
        if interrupt and self.agent_speaking():
            await self.interrupt(self.clock.now())
        self._last_user = len(self.history)
        self.history.append(Turn(role="user", text=text))
        self.recorder.message("user", text, timezone.now())
        self.recorder.log("info", "user turn", words=len(text.split()))
        await self.transport.send_transcript("user", text)
        return True

    async def user_went_on(self, text: str) -> bool:
        """The caller went on speaking before hearing the answer to their last turn, and the pipeline
        dropped that answer (`interrupt(forget=True)`): `text` joins that turn in the history and the
        call record (one turn), the client gets it as another `user` transcript, and the whole turn is
        answered again (also when `text` is empty: nothing was understood). False when the turn is not
        taken (the call is being transferred or ends)."""
        if self._last_user is None:
            return await self.user_said(text)
        if self.transferring or self._stopping:
            return False
        del self.history[self._last_user + 1 :]  # the dropped answer's tool rounds
        await self._join_last_turn(text)
        return True

    async def user_added(self, text: str) -> None:
        """The caller went on with their last turn while its answer stands (it decided a transfer or end
        of call that the whole turn still asks for): `text` joins that turn in the history, the call
        record and the client's transcript, and nothing is answered again."""
        if self._last_user is not None and not self._stopping:
            await self._join_last_turn(text)

    def turn_with(self, text: str) -> list[Turn]:
        """The history as it would be with `text` joined to the caller's last turn, without its answer."""
        if self._last_user is None:
            return [*self.history, Turn(role="user", text=text)]
        joined = f"{self.history[self._last_user].text} {text.strip()}".strip()
        return [*self.history[: self._last_user], Turn(role="user", text=joined)]

    async def _join_last_turn(self, text: str) -> None:
        assert self._last_user is not None
        text = text.strip()
        if text:
            joined = f"{self.history[self._last_user].text} {text}"
            self.history[self._last_user] = Turn(role="user", text=joined)
            self.recorder.extend_caller_message(text)
            self.recorder.log("info", "user turn continued", words=len(text.split()))
            await self.transport.send_transcript("user", text)

    def heard_by(self, now: float) -> float:
        """How far the listener has heard the agent's audio by `now`, in clock time: a transport that
        learns when its listener really played the audio (a phone stream's marks) says how far behind
        the playout's estimate the listener is."""
        lag = getattr(self.transport, "playback_lag", None)
        return now - lag(now) if lag is not None else now

    async def interrupt(self, now: float, *, forget: bool = False) -> None:
        """Barge-in, or a new user turn while the agent still answers: the one interruption signal.
        Only what was heard of the answer is kept; nothing with `forget` (the caller went on with
        their turn before hearing it: see `user_went_on`)."""
        response = self.response
        if response is not None:
            if forget and not response.done:
                self._withdraw(response)
            response.cancel()
        heard_by = self.heard_by(now)
        # Keypad tones on their way to the listener are never cut (send_digits): nothing is cleared.
        tones = self.playout is not None and self.playout.tones_unheard(heard_by)
        if self.audio is not None and not tones:
            self.audio.cut(heard_by)
        if self.pipeline is not None:
            self.pipeline.interrupt()
        if self.playout is not None:
            self.playout.cut()
        if not tones and not self.text:
            await self.transport.clear()
        if response is not None and not response.done:
            await self._speech_ended(response, interrupted=True)
            if forget:
                response.finish()
                self._pulse()
            else:
                await self._close_response(response, heard_by, tell=True)

    async def run_tool(self, call: ToolCall) -> ToolOutcome:
        """Run one tool call of the brain through the dispatcher, with the background sound and the
        client's tool events (`tool.finished` says how it went, and why a failed one failed).

        A request is sent once for the caller's request: when the brain asks the same tool with the same
        arguments again before the caller has heard an answer whole (the caller went on speaking, and
        the turn was answered again), it gets the first request's result, waiting for it if it is still
        out. A request runs as a task of its own, so that the answer it was for can be dropped without
        cutting it; `finish_response` cancels one nobody asked for again (status `cancelled`)."""
        key = (call.name, json.dumps(call.arguments, sort_keys=True, default=str))
        request = self._requests.get(key)
        if request is None or request.task.cancelled():
            request = self._requests[key] = _ToolRequest(self.spawn(self._send_tool(call), "tool"), self.response)
        else:
            request.owner = self.response
            self.recorder.log("info", "tool request already sent; its result is used again", tool=call.name[:128])
        outcome = await asyncio.shield(request.task)
        if outcome.digits and not request.keys_pressed:
            request.keys_pressed = True
            self._press_keys(outcome.digits)
        return outcome

    async def _send_tool(self, call: ToolCall) -> ToolOutcome:
        self._tools_running += 1
        if self.playout is not None:
            self.playout.wake.set()  # the keyboard may start playing over silence
        await self.transport.send_event({"type": "tool.started", "name": call.name})
        called = getattr(self.transport, "tool_called", None)
        if called is not None:
            await called(call)
        finished: dict[str, Any] = {"type": "tool.finished", "name": call.name}
        began = time.monotonic()
        try:
            outcome = await self.tools.run(call)
            finished["status"] = outcome.status
            if outcome.status != ToolInvocationStatus.SUCCESS and outcome.reason:
                finished["error"] = outcome.reason
        except asyncio.CancelledError:
            finished["status"] = ToolInvocationStatus.CANCELLED
            raise
        finally:
            self._tools_running -= 1
            if not self._stopping:
                await self.transport.send_event(finished)
        returned = getattr(self.transport, "tool_returned", None)
        if returned is not None:
            await returned(call, outcome, round((time.monotonic() - began) * 1000))
        return outcome

    def _cancel_unclaimed(self, response: Response) -> None:
        for key, request in list(self._requests.items()):
            owner = request.owner
            if not request.task.done() and owner is not response and (owner is None or owner.cancelled):
                self.recorder.log("info", "tool request no longer needed; cancelled", tool=key[0][:128])
                request.task.cancel()

    def _forget_requests(self) -> None:
        """An answer was heard whole: the caller's next words are a new request."""
        for key, request in list(self._requests.items()):
            if request.task.done():
                del self._requests[key]

    def interruption(self, kind: str, speech_ms: int) -> None:
        """Caller speech while the agent spoke, as the engine judged it (`real`: it cut the agent; `false`:
        it cut the agent but held no words; `backchannel`, `ignored`: it did not cut it): on the call's
        turn timeline (the agent log) and in the metrics."""
        self.recorder.log("info", "interruption", kind=kind, speechMs=int(speech_ms))
        metrics.record_interruption(kind, self.pipeline.name if self.pipeline is not None else "unknown")

    async def heard_out(self, response: Response) -> None:
        """Wait until `response` has played out, was cut or dropped, or the session ended."""
        while not (response.done or self._ended.is_set()):
            await self._changed.wait()

    def _withdraw(self, response: Response) -> None:
        """The caller went on with the turn that `response` answered before hearing it, and the whole
        turn does not ask for the transfer or end of call it decided (the pipeline asked the brain): the
        decision is taken back, and the whole turn is answered again."""
        if response.passes_on:
            self._transferring = False
            what = "transfer" if response.transfer_to else "handoff"
        elif response.end_reason == EndedReason.AGENT_ENDED_CALL:
            self._closing = False
            if self._closing_timer is not None:
                self._closing_timer.cancel()
                self._closing_timer = None
            what = "end of call"
        else:
            return
        response.withdraw()
        self.recorder.log("info", f"the caller went on speaking; the {what} is decided again with the whole turn")

    def _press_keys(self, digits: str) -> None:
        """send_digits: the keys' tones join the outgoing audio after what is already queued (so that
        a phone menu hears them in-band; over a phone stream they go out as mu-law like speech)."""
        if self.playout is None:
            return
        self.playout.enqueue(Tones(dtmf.tones(digits)))
        self.recorder.log("info", "keys sent", digits=digits)

    def tool_round(
        self, response: Response, said: str, calls: Sequence[ToolCall], outcomes: Sequence[ToolOutcome]
    ) -> None:
        """The brain's tool calls of one round and their results join the history (so that a language
        model sees the exact calls again); a transfer is performed once the response has played, and
        so is end_call (the call ends after the agent's goodbye: the pipeline says a default one when
        the brain said nothing in that round). end_call on a response the caller interrupted is
        dropped: the caller is still talking."""
        self.history.append(Turn(role="assistant", text=said, tool_calls=tuple(calls)))
        for call, outcome in zip(calls, outcomes, strict=True):
            self.history.append(Turn(role="tool", text=outcome.result, tool_call_id=call.id, name=call.name))
            if outcome.transfer_to and not self._transferring:
                self._transferring = True
                response.transfer_after(outcome.transfer_to, mode=outcome.transfer_mode, by=call.name)
            elif outcome.handoff_to and not self._transferring and not self._stopping:
                self._transferring = True
                response.hand_off_after(outcome.handoff_to, by=call.name)
            elif outcome.end_call and not self.transferring and not self._stopping:
                if response.cancelled:
                    self.recorder.log("info", "end_call dropped: the caller spoke over the goodbye")
                    continue
                self._closing = True
                self.recorder.log("info", "the agent ends the call")
                response.end_after(Ending.COMPLETED, reason=EndedReason.AGENT_ENDED_CALL, by=call.name)
                self._closing_timer = self.spawn(self._close_by(EndedReason.AGENT_ENDED_CALL), "closing")
        if response.end_reason != EndedReason.AGENT_ENDED_CALL:
            if self.text and said.strip() and not response.cancelled:
                # A typed session shows what the agent said before the tool ran, in order, as it would be heard.
                self.spawn(self._commit_assistant(said.strip(), "assistant words before a tool", {}), "said")
            response.said_in_history()
        # else: the goodbye said with end_call is the call's last words: once played it joins the
        # transcript and reaches the client like any answer.

    def usage(self, usage: Usage) -> None:
        self.recorder.llm_usage(
            provider=usage.provider,
            model=usage.model,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cached_input_tokens=usage.cached_input_tokens,
        )

    def brain_failed(self, exc: ProviderError) -> str:
        """A brain's provider failed during a turn: log it; the pipeline speaks the apology returned."""
        self.recorder.log("error", "language model request failed", reason=exc.message, permanent=exc.permanent)
        metrics.record_provider_error("llm", permanent=exc.permanent)
        return phrase("apology", self.agent.language)

    def passing_sentence(self, response: Response) -> str:
        """The announcement of a transfer to a person, or of a handoff to another agent."""
        return phrase("transfer" if response.transfer_to else "handoff", self.agent.language)

    def goodbye_sentence(self) -> str:
        """The default goodbye of end_call, when the brain said none."""
        return phrase("goodbye", self.agent.language)

    # --- responses -----------------------------------------------------------------------------

    async def _response_played(self, response: Response) -> None:
        if response.done or response.cancelled:
            return
        response.finish()
        # A speech-to-speech provider's frames may carry no word of their own (empty texts are skipped).
        text = " ".join(
            segment.text for segment in response.segments if segment.index >= response.in_history and segment.text
        )
        fields: dict[str, Any] = {"words": len(text.split())}
        if response.turn_ended_at is not None and response.segments and response.segments[0].play_start:
            # latencyMs: the caller's last speech until the answer's first audio (the call's `totalMs`, the
            # headline figure); answerStartMs: the turn taken until the answer began to play (the timeline).
            after_turn = round((response.segments[0].play_start - response.turn_ended_at) * 1000)
            total = response.timing.stages_ms()["total"] if response.timing is not None else None
            fields["latencyMs"] = round(total) if total is not None else after_turn
            fields["answerStartMs"] = after_turn
        await self._speech_ended(response, interrupted=False)
        self._forget_requests()
        await self._commit_assistant(text, "assistant turn", fields)
        if self.text:
            self._last_input = self.clock.now()  # the caller reads the answer: the idle time starts again
        self._pulse()
        if response.passes_on or response.then_end is not None:
            # This runs in the playout stage, and ending the call stops every stage: a task does not
            # cancel itself, so the ending runs in a task of its own (referenced until it has run).
            self._ending = asyncio.get_running_loop().create_task(
                self._end_after(response), name=f"end-{self.recorder.session_id}"
            )

    async def _segment_playing(self, segment: Segment) -> None:
        """A segment starts playing at the listener: the words it begins go to the client as they are
        spoken (`agent_speech`; the transcript follows once the answer has played or was cut)."""
        response = segment.owner
        if not isinstance(response, Response) or response.done or response.cancelled:
            return
        text = response.starting(segment)
        if text:
            response.start_speaking()
            await self.transport.send_event({"type": "agent_speech", "text": text})

    async def _speech_ended(self, response: Response, *, interrupted: bool) -> None:
        if response.stop_speaking():
            await self.transport.send_event({"type": "agent_speech.ended", "interrupted": interrupted})

    async def _end_after(self, response: Response) -> None:
        if response.transfer_to:
            await self._transfer(response.transfer_to, response.transfer_mode)
        elif response.handoff_to is not None:
            await self._hand_off(response.handoff_to)
        elif response.then_end is not None:
            ending, message = response.then_end
            status = CallStatus.FAILED if ending == Ending.FAILED else CallStatus.COMPLETED
            await self.stop(status, response.end_reason)
            await self._hang_up(ending, message)

    async def _transfer(self, destination: str, mode: str = "cold") -> None:
        warm = getattr(self.transport, "warm_transfer", None)
        warmed = mode == "warm" and warm is not None and getattr(self.transport, "warm_transfers", False)
        if warmed:
            assert warm is not None
            if not await self._warm_transfer(destination, warm):
                return  # the person did not take the call: the caller is back with the agent
        elif mode == "warm":
            self.recorder.log("warn", "this call cannot be transferred warm; it is transferred cold")
        self.recorder.log("info", "call transferred", destination=destination)
        self.recorder.message("system", f"Call transferred to {destination}", timezone.now())
        self._handed_off = True  # the carrier may end the stream before transfer() returns: still transferred
        status = "accepted"
        if not warmed:  # a warm transfer's person has joined the caller already
            try:
                await self.transport.transfer(destination)
            except Exception as exc:  # noqa: BLE001 - a failed transfer still ends the call cleanly
                logger.warning("transfer failed in session %s: %s", self.recorder.session_id, exc)
                self.recorder.log("error", "transfer failed", reason=str(exc)[:300])
                status = "failed"
            self.recorder.transfer_update(mode="cold", destination=destination, status=status, at=timezone.now())
        await self.stop(CallStatus.COMPLETED, EndedReason.TRANSFERRED)
        await self._hang_up(Ending.TRANSFERRED)

    async def _warm_transfer(self, destination: str, warm: Callable[..., Awaitable[str]]) -> bool:
        """Brief the person at `destination` while the caller holds (docs/guides/phone-calls.md#warm-transfers):
        True when they took the call (the transfer then completes as a cold one does); otherwise the agent
        tells the caller and the call goes on."""
        setting = transfer_setting(self.agent)
        accepted = False

        def on_accepted() -> None:
            # Before the caller's line is moved to the person: its stream may stop any moment after, and that
            # stop is the transfer (not a hang-up), with the outcome already on the record.
            nonlocal accepted
            accepted = self._handed_off = True
            self.recorder.transfer_update(mode="warm", destination=destination, status="accepted", at=timezone.now())

        self.recorder.transfer_update(mode="warm", destination=destination, status="ringing", at=timezone.now())
        self.recorder.log("info", "warm transfer: calling the person", destination=destination)
        hold = self.spawn(self._hold(), "hold") if self.playout is not None else None
        dialed_at = self.clock.now()
        try:
            briefing = await self._briefing(setting)
            calling = asyncio.ensure_future(
                warm(
                    destination,
                    briefing=briefing,
                    language=self.agent.language,
                    ring_timeout_seconds=int(setting["ringTimeoutSeconds"]),
                    on_accepted=on_accepted,
                )
            )
            ended = asyncio.ensure_future(self._ended.wait())
            await asyncio.wait({calling, ended}, return_when=asyncio.FIRST_COMPLETED)
            ended.cancel()
            if not calling.done() and not accepted:  # the caller hung up while the person was called
                calling.cancel()  # ... whose call is ended too
            outcome = (await asyncio.gather(calling, return_exceptions=True))[0]
            if not isinstance(outcome, str):
                outcome = "failed"
        except Exception as exc:  # noqa: BLE001 - a failed transfer leaves the caller with the agent
            logger.warning("warm transfer failed in session %s: %s", self.recorder.session_id, exc)
            outcome = "failed"
        finally:
            if hold is not None:
                hold.cancel()
        # The cost ledger: the person's leg while the service held it (once they are joined, their call with
        # the caller is the carrier's, outside the service).
        self.recorder.measure(
            product=CostProduct.TELEPHONY,
            provider=getattr(self.recorder.call, "carrier", "") or "unknown",
            model="transfer",
            unit=CostUnit.SECOND,
            quantity=self.clock.now() - dialed_at,
        )
        self.recorder.log("info" if outcome == "accepted" else "warn", "warm transfer ended", outcome=outcome)
        if outcome == "accepted":
            return True
        self._handed_off = False  # the person did not take the call, or joining them failed
        self.recorder.transfer_update(mode="warm", destination=destination, status=outcome, at=timezone.now())
        if self._stopping:
            return False
        self._transferring = False
        self._say_alone(
            phrase("transfer_" + ("declined" if outcome == "declined" else "unanswered"), self.agent.language)
        )
        return False

    async def _briefing(self, setting: dict[str, Any]) -> str:
        """What the person hears before pressing 1: the static message (placeholders filled) or a summary
        of the call so far by the brain, after who is calling."""
        caller = (self.recorder.call.from_number if self.recorder.call else None) or "a caller"
        if setting["briefing"] == "static" and str(setting["message"]).strip():
            (text,) = self._placeholders_fill(str(setting["message"]))
        else:
            text = await self._summary() or "The caller asked to speak to a person."
        return f"You have a call from {caller}, transferred by {self.agent.name}. {text}"

    async def _hold(self) -> None:
        """Hold audio while the person is called: a soft chime every HOLD_CHIME_SECONDS."""
        assert self.playout is not None
        while True:
            self.playout.enqueue(Tones(hold_chime()))
            await self.clock.sleep_until(self.clock.now() + HOLD_CHIME_SECONDS)

    async def _hand_off(self, handoff: Handoff) -> None:
        """The call goes on with another agent (docs/guides/handoffs.md): its prompt, voice, language,
        tools and knowledge take over, with the part of the conversation its `context` passes; no second
        AI-identity disclosure; its greeting, or a short line, is said. A target that is gone or fails to
        load leaves the caller with this agent, told so; either way the call takes turns again."""
        previous = self.agent
        try:
            target = await database_sync_to_async(handoff_agent_get)(
                organization_id=previous.organization_id, agent_id=handoff.agent_id
            )
            if target is None:
                raise LookupError("the agent is no longer active")
            tools = ToolDispatcher(
                agent=target,
                recorder=self.recorder,
                to_number=self.recorder.to_number,
                handoffs=self._handoffs + 1 < MAX_HANDOFFS_PER_CALL,
            )
            specs = await tools.load()
            prompt = await self._dynamic_prompt(target) if target.prompt_type == PromptType.DYNAMIC else None
            summary = await self._summary() if handoff.context == "summary" else ""
        except Exception as exc:  # noqa: BLE001 - a failed handoff must never leave the call silent
            logger.warning("handoff failed in session %s: %s", self.recorder.session_id, exc)
            self.recorder.log("error", "handoff failed; the agent stays", reason=str(exc)[:300])
            self._transferring = False
            if not self._stopping:
                self._say_alone(phrase("apology", self.agent.language))
            return
        if self._stopping:
            await tools.aclose()
            return
        self._handoffs += 1
        old_tools, self.tools, self.agent = self.tools, tools, target
        self.spawn(old_tools.aclose(), "tools-close")
        self.history = passed_history(self.history, handoff)
        self._last_user = None
        self._requests.clear()
        self.recorder.handoff(from_agent=previous, to_agent=target, reason=handoff.reason, occurred_at=timezone.now())
        self.recorder.log(
            "info",
            "call handed off",
            fromAgentId=str(previous.pk),
            toAgentId=str(target.pk),
            voiceName=target.voice_name,
            language=target.language,
            context=handoff.context,
            tools=[spec.name for spec in specs],
        )
        identity, instructions = target.identity, target.instructions
        greeting = (target.static_greeting or "") if target.greeting_type == GreetingType.STATIC else ""
        if prompt is not None:
            identity = prompt.identity if prompt.identity is not None else identity
            instructions = prompt.instructions
            greeting = prompt.greeting if target.greeting_type == GreetingType.DYNAMIC and prompt.greeting else greeting
        identity, instructions, greeting = self._placeholders_fill(identity, instructions, greeting)
        if summary:
            instructions = f"{instructions}\n\nThe call was handed to you by {previous.name}. So far: {summary}"
        disclosure = disclosure_for(
            template_id=target.ai_identity_disclosure_template_id, language=target.language, agent_name=target.name
        )
        self.context = BrainContext(
            agent_name=target.name,
            language=target.language,
            identity=identity,
            instructions=instructions,
            disclosure=disclosure.text,
            greeting=greeting,
            tools=specs,
        )
        try:
            await self.transport.send_event({"type": "handoff", "agentId": str(target.pk), "agentName": target.name})
            handed = getattr(self.pipeline, "handed_off", None)
            if handed is not None:
                await handed()
        except Exception as exc:
            logger.warning("handoff incomplete in session %s", self.recorder.session_id, exc_info=True)
            self.recorder.log("error", "the engine could not switch every part to the new agent", reason=str(exc)[:300])
        self._transferring = False
        if not self._stopping and self.pipeline is not None:
            response = self.begin_response()
            for sentence in self._sentences(
                greeting.strip() or phrase("taken_over", target.language, name=target.name)
            ):
                self.pipeline.say(response, sentence)
            self._open_flow(response)

    def _say_alone(self, text: str) -> None:
        """The agent says `text` on its own (not in answer to a caller turn)."""
        assert self.pipeline is not None
        response = self.begin_response()
        for sentence in self._sentences(text):
            self.pipeline.say(response, sentence)
        self.pipeline.end(response)

    async def _summary(self) -> str:
        """A few sentences on the conversation so far for the next agent (`context: summary`), written by
        this agent's brain; empty when it cannot."""
        brain = getattr(self.pipeline, "brain", None)
        if brain is None:  # a speech-to-speech provider: the next agent gets no summary
            return ""
        try:
            return await summary_of(brain, self.context, self.history, self.usage)
        except Exception as exc:  # noqa: BLE001 - the handoff goes on without a summary
            self.recorder.log("warn", "no summary for the handoff", reason=str(exc)[:300])
            return ""

    async def _close_response(self, response: Response, now: float, *, tell: bool) -> None:
        response.finish()
        self._pulse()
        heard = response.heard_text(now, first_sentence=response.in_history)
        fields = {"heardWords": len(heard.split()), "plannedSentences": len(response.sentences)}
        if tell:
            await self._commit_assistant(heard, "assistant turn cut", fields)
        elif heard:
            self.history.append(Turn(role="assistant", text=heard))
            self.recorder.message("assistant", heard, timezone.now())

    async def _commit_assistant(self, text: str, what: str, fields: dict[str, Any]) -> None:
        self.recorder.log("info", what, **fields)
        if not text:
            return
        self.history.append(Turn(role="assistant", text=text))
        self.recorder.message("assistant", text, timezone.now())
        await self.transport.send_transcript("assistant", text)

    # --- the recording -------------------------------------------------------------------------

    def _sent(self, at: float, audio: bytes) -> None:
        if self.audio is not None:
            self.audio.agent_audio(at, audio)

    def _store_recording(self) -> None:
        """The call has ended: what the listener had not heard yet is cut, and the recording is encoded
        and stored in the background (the end of the call does not wait for it)."""
        audio, self.audio = self.audio, None
        if audio is None:
            return
        if audio.empty or self.call_id is None:
            audio.close()
            return
        try:
            audio.cut(self.heard_by(self.clock.now()))
            save_recording(audio, call_id=self.call_id, log=self.recorder.log)
        except Exception as exc:  # a failed recording never fails the call
            audio.close()
            logger.warning("recording of session %s failed", self.recorder.session_id, exc_info=True)
            self.recorder.log("error", "recording failed", reason=f"{type(exc).__name__}: {str(exc)[:300]}")

    # --- the shell's own stage -----------------------------------------------------------------

    async def _watchdog(self) -> None:
        """A client that stops sending audio (a browser tab gone to sleep, a broken network) does not
        leave an open call behind: after idle_seconds without caller audio the session ends."""
        started = self.clock.now()
        while True:
            deadline = (self._last_input or started) + self.idle_seconds
            if self.clock.now() >= deadline:
                break
            await self.clock.sleep_until(deadline)
        self.recorder.log("warn", "no caller audio; session closed", idleSeconds=self.idle_seconds)
        await self.stop(CallStatus.COMPLETED, EndedReason.SILENCE_TIMEOUT)
        await self._hang_up(Ending.IDLE)

    async def _time_limit(self, began: float) -> None:
        """The agent's maxDurationSeconds: once the call lasts that long, what the agent is saying is
        cut, it says a short closing line (not cut by a barge-in) and the call ends once that has
        played (max-duration-reached)."""
        limit = float(self.agent.max_duration_seconds or 0)
        if limit <= 0:
            return
        await self.clock.sleep_until(began + limit)
        if self._stopping or self.transferring or self.pipeline is None:
            return  # already ending (a transfer, end_call) on its own
        self._closing = True
        self.recorder.log("info", "maximum call duration reached; closing the call", maxDurationSeconds=limit)
        response = self.response
        if response is not None and not response.done:
            await self.interrupt(self.clock.now())
        closing = self.begin_response(locked=1)
        closing.end_after(Ending.COMPLETED, reason=EndedReason.MAX_DURATION_REACHED)
        self.pipeline.say(closing, phrase("max_duration", self.agent.language))
        self.pipeline.end(closing)
        await self._close_by(EndedReason.MAX_DURATION_REACHED)

    async def _close_by(self, reason: str, grace: float = CLOSING_GRACE_SECONDS) -> None:
        """The closing line has `grace` seconds (CLOSING_GRACE_SECONDS) to play; the call then ends anyway."""
        await self.clock.sleep_until(self.clock.now() + grace)
        if self._stopping:
            return
        self.recorder.log("warn", "the closing line did not play in time; the call is ended", reason=reason)
        await self.stop(CallStatus.COMPLETED, reason)
        await self._hang_up(Ending.COMPLETED)

    # --- answering machines (realtime/engine/session/voicemail.py) ------------------------------

    async def answered_by(self, verdict: str, *, detection_ms: int | None = None) -> None:
        """The carrier's answering-machine verdict on this call (Twilio's AnsweredBy), at any time."""
        if not self._stopping:
            await self.voicemail.receive(verdict, detection_ms)

    async def machine_talking(self) -> None:
        """A machine's greeting plays: what the agent is saying is cut and nothing is answered until the
        machine's greeting has ended (no caller turns, as when closing)."""
        self._closing = True
        await self._started.wait()
        if self.agent_speaking():
            await self.interrupt(self.clock.now())

    async def leave_voicemail(self, message: str) -> None:
        """The machine listens: whatever the agent is saying is cut, it speaks the AI identity disclosure
        and `message` (not cut by anything the machine plays), and the call ends once that has played,
        like end_call's goodbye (endedReason voicemail)."""
        self._closing = True
        await self._started.wait()
        if self._stopping or self.pipeline is None:
            return
        self.recorder.log("info", "leaving the voicemail message", words=len(message.split()))
        if self.agent_speaking():
            await self.interrupt(self.clock.now())
        sentences = [*self._sentences(self.context.disclosure), *self._sentences(message)]
        closing = self.begin_response(locked=len(sentences))
        closing.end_after(Ending.COMPLETED, reason=EndedReason.VOICEMAIL)
        for sentence in sentences:
            self.pipeline.say(closing, sentence)
        self.pipeline.end(closing)
        # A long message takes its time to play (about 15 characters a second).
        self.spawn(self._close_by(EndedReason.VOICEMAIL, CLOSING_GRACE_SECONDS + len(message) / 10), "closing")

    async def end_for_voicemail(self, why: str) -> None:
        """A machine answered and the agent leaves no message (or a fax): the call ends at once."""
        self.recorder.log("info", f"{why}; the call is ended")
        await self.stop(CallStatus.COMPLETED, EndedReason.VOICEMAIL)
        await self._hang_up(Ending.COMPLETED)

    # --- tasks and endings ---------------------------------------------------------------------

    async def _hang_up(self, ending: Ending, message: str = "") -> None:
        try:
            await self.transport.hang_up(ending, message)
        except Exception:
            logger.debug("transport already closed", exc_info=True)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled() or self._stopping:
            return
        exc = task.exception()
        if exc is not None:
            # Keep a reference until it has run.
            self._failure = asyncio.get_running_loop().create_task(
                self.fail(exc), name=f"fail-{self.recorder.session_id}"
            )

    async def _cancel_tasks(self) -> None:
        current = asyncio.current_task()
        tasks = [task for task in self._tasks if task is not current]
        for task in tasks:
            task.cancel()
        if not tasks:
            return
        done, pending = await asyncio.wait(tasks, timeout=STOP_GRACE_SECONDS)
        for task in done:
            if not task.cancelled():
                task.exception()  # retrieved: a stage's failure during stop is not worth a second report
        if pending:
            names = sorted(task.get_name() for task in pending)
            logger.error("session stages did not stop when cancelled: %s", ", ".join(names))
            self.recorder.log("error", "engine stages did not stop; the call was ended anyway", stages=names)

    async def _close_parts(self) -> None:
        for name, closing in (("pipeline", self.pipeline), ("tools", self.tools)):
            if closing is None:
                continue
            try:
                await asyncio.wait_for(closing.aclose(), STOP_GRACE_SECONDS)
            except Exception:  # closing a part must not keep the call open
                logger.warning("closing the %s of session %s failed", name, self.recorder.session_id, exc_info=True)


def placeholder_values(agent: Agent, call: CallRecord | None, now: datetime | None = None) -> dict[str, str]:
    """What {{name}} placeholders are filled with: the call's variables, then the built-ins (which win):
    `call.from`, `call.to`, `now` (in the agent's time zone, "Friday 27 November 2026, 14:05") and
    `agent.name`."""
    try:
        zone = ZoneInfo(agent.time_zone or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        zone = ZoneInfo("UTC")
    local = (now or timezone.now()).astimezone(zone)
    values = {str(name): str(value) for name, value in dict(getattr(call, "variables", None) or {}).items()}
    values.update(
        {
            "call.from": (call.from_number if call is not None else None) or "",
            "call.to": (call.to_number if call is not None else None) or "",
            "now": f"{local:%A} {local.day} {local:%B %Y, %H:%M}",
            "agent.name": agent.name,
        }
    )
    return values


def open_session(
    *,
    agent: Agent,
    transport: Transport,
    channel: str,
    from_number: str | None = None,
    to_number: str | None = None,
    provider_call_id: str | None = None,
    recorder: Recorder | None = None,
    variables: dict[str, str] | None = None,
    metadata: Any = None,
    call_id: str | None = None,
    modality: str = CallModality.AUDIO,
    carrier: str = "",
    **parts: Any,
) -> Session:
    """The one way every consumer starts a conversation: `asyncio.create_task(session.run())` next.
    `provider_call_id` is the carrier's id of a phone call (Twilio's CallSid), kept on the call record;
    `variables` and `metadata` (already checked by calls.variables) too.
    `recorder` (the call record in the database by default) and `parts` (pipeline, tools, mixer, clock,
    run_blocking) replace the configured ones in tests. `call_id`: an outbound call's existing record,
    made active when the session starts (calls.services.call_activate) instead of a new call.
    `modality="text"`: a typed session (see the module's docstring): the text pipeline, no audio, the
    call record's modality `text`. `carrier`: a phone call's (twilio, telnyx, sip), whose seconds the call's
    cost ledger counts."""
    recorder = recorder or CallRecorder(
        agent=agent,
        channel=channel,
        from_number=from_number,
        to_number=to_number,
        provider_call_id=provider_call_id,
        variables=variables,
        metadata=metadata,
        call_id=call_id,
        modality=modality,
        carrier=carrier,
    )
    return Session(agent=agent, transport=transport, recorder=recorder, modality=modality, **parts)


__all__: Sequence[str] = ("Session", "open_session", "placeholder_values")
