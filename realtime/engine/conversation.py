"""One conversation between a caller and an agent, whatever the transport.

Stages, each an asyncio task joined by queues:

    push_audio -> [listen: VAD, barge-in] -> [recognize: incremental ASR in a worker thread] -> user turn
               -> [respond: brain, sentence by sentence] -> [speak: TTS in a worker thread]
               -> [playout: mixer + real-time pacing] -> transport.send_audio

Barge-in is one signal (`_interrupt`): the generation number moves on so that every stage drops its
stale work, the running response is cancelled, queued audio is dropped, the transport is told to
`clear`, and the transcript keeps only what the caller could have heard.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils import timezone

from agents.disclosure import disclosure_for
from agents.models import Agent, BackgroundSound, GreetingType
from agents.services import ambient_sound_playable
from calls.models import CallStatus
from realtime.engine.brain import Brain, TextPiece, ToolRequest, Turn, brain_for
from realtime.engine.clock import Clock, LoopClock
from realtime.engine.listener import Listener
from realtime.engine.playout import EndMarker, Playout, Segment
from realtime.engine.records import CallRecorder
from realtime.engine.transport import Transport
from realtime.engine.voice import EngineUnavailable, VoiceKit, ensure_preloaded, voice_kit

logger = logging.getLogger(__name__)

T = TypeVar("T")
RunBlocking = Callable[..., Awaitable[Any]]

MAX_TOOL_ROUNDS = 4
MAX_PENDING_INPUT = 500  # chunks waiting for the listener (about 10 s of 20 ms chunks)
COALESCE_BYTES = 8000  # the listener takes waiting chunks together, up to 250 ms of audio
CLOSE_NO_AUDIO = 4408  # the caller sent no audio for REALTIME_INPUT_IDLE_SECONDS
INPUT_BURST_SECONDS = 3.0  # how far a caller's audio may run ahead of real time (network bursts)
# How long stop() waits for the cancelled stages before it finishes the call anyway: a stage that
# does not end when cancelled (a bug) must not leave the call `active` and the socket open.
STOP_GRACE_SECONDS = 5.0


class ToolRunner(Protocol):
    async def run(self, request: ToolRequest) -> str: ...


@dataclass(eq=False)
class Response:
    """One assistant turn being produced, spoken and heard."""

    generation: int
    locked: int = 0  # leading sentences that a barge-in cannot cut (the AI-identity disclosure)
    turn_ended_at: float | None = None  # when the user turn that prompted it ended
    sentences: list[str] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    done: bool = False

    def heard_text(self, now: float) -> str:
        """The words the listener has heard by `now` (whole sentences, then a proportional share of
        the sentence that was playing)."""
        words: list[str] = []
        for segment in self.segments:
            fraction = segment.heard_fraction(now)
            if fraction >= 1.0:
                words.extend(segment.text.split())
                continue
            part = segment.text.split()
            words.extend(part[: int(len(part) * fraction)])
            break
        return " ".join(words)

    def interruptible(self, now: float) -> bool:
        if self.locked == 0:
            return True
        if len(self.segments) < self.locked:
            return False
        last = self.segments[self.locked - 1]
        return last.play_start is not None and now >= last.play_start + last.duration


@dataclass(eq=False)
class _Say:
    response: Response
    text: str


@dataclass(eq=False)
class _End:
    response: Response


class Conversation:
    def __init__(
        self,
        *,
        agent: Agent,
        transport: Transport,
        recorder: CallRecorder,
        kit: VoiceKit | None = None,
        brain: Brain | None = None,
        tools: ToolRunner | None = None,
        clock: Clock | None = None,
        run_blocking: RunBlocking | None = None,
        vocabulary_texts: Callable[[], Awaitable[Sequence[str]]] | None = None,
    ) -> None:
        self.agent = agent
        self.transport = transport
        self.recorder = recorder
        self.kit = kit
        self.brain = brain
        self.tools = tools
        self.clock = clock or LoopClock()
        self.run_blocking = run_blocking or asyncio.to_thread
        self._vocabulary_texts = vocabulary_texts
        self.barge_in_ms = int(getattr(settings, "REALTIME_BARGE_IN_MS", 300))
        self.lead_ms = int(getattr(settings, "REALTIME_OUTPUT_LEAD_MS", 200))

        self._audio_in: asyncio.Queue[bytes] = asyncio.Queue()
        self._speech_q: asyncio.Queue[_Say | _End] = asyncio.Queue()
        self._asr_q: asyncio.Queue[tuple[str, bytes, bool | None]] = asyncio.Queue()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._history: list[Turn] = []
        self._generation = 0
        self._response: Response | None = None
        self._response_task: asyncio.Task[None] | None = None
        self._user_speaking = False
        self._over_agent = False  # the current utterance began while the agent was speaking
        self._barged = False  # ... and has already interrupted it
        self._tools_running = 0
        self._dropped_input = 0
        self._input_since: float | None = None  # clock time of the first caller audio
        self._input_seconds = 0.0  # caller audio accepted so far
        self._last_input: float | None = None
        self.idle_seconds = float(getattr(settings, "REALTIME_INPUT_IDLE_SECONDS", 60))
        self._started = asyncio.Event()  # start finished, well or not
        self._start_task: asyncio.Task[Any] | None = None
        self._ended = asyncio.Event()
        self._stopping = False
        self.call_id: str | None = None
        self.playout: Playout | None = None
        self.listener: Listener | None = None

    # --- transport side ------------------------------------------------------------------------

    def push_audio(self, pcm16_16k: bytes) -> bool:
        """Caller audio (PCM16 LE mono 16 kHz, an even number of bytes). Never blocks. False when the
        audio is refused: a caller cannot send faster than real time (plus INPUT_BURST_SECONDS)."""
        if self._stopping or not pcm16_16k:
            return True
        now = self.clock.now()
        if self._input_since is None:
            self._input_since = now
        seconds = len(pcm16_16k) / 32000
        if self._input_seconds + seconds > now - self._input_since + INPUT_BURST_SECONDS:
            return False
        self._input_seconds += seconds
        self._last_input = now
        if self._audio_in.qsize() >= MAX_PENDING_INPUT:
            self._audio_in.get_nowait()  # the oldest goes: the listener is overloaded
            self._dropped_input += 1
            if self._dropped_input == 1:
                self.recorder.log("warn", "input audio arrives faster than it can be processed; dropping")
        self._audio_in.put_nowait(pcm16_16k)
        return True

    async def run(self) -> None:
        """Start the engine, greet, and converse until `stop` (or an engine failure)."""
        self._start_task = asyncio.current_task()
        try:
            await self._start()
        except asyncio.CancelledError:
            self._started.set()
            await self.stop(CallStatus.FAILED)
            raise
        except Exception as exc:  # noqa: BLE001 - any start failure ends the session as failed, logged in _fail
            self._started.set()
            await self._fail(exc)
            return
        self._started.set()
        await self._ended.wait()

    async def stop(self, status: str = CallStatus.COMPLETED) -> None:
        """End the conversation: keep what was heard of a running answer, finish the call record."""
        if self._stopping:
            await self._ended.wait()
            return
        self._stopping = True
        try:
            if self._start_task is not None and self._start_task is not asyncio.current_task():
                # Still starting: let the start finish (or fail) so that the call record it opens is closed.
                await self._started.wait()
            response = self._response
            if response is not None and not response.done:
                await self._close_response(response, self.clock.now(), tell=False)
            await self._cancel_tasks()
            await self.recorder.finish(status)
        finally:
            self._ended.set()

    @property
    def user_speaking(self) -> bool:
        return self._user_speaking

    # --- start ---------------------------------------------------------------------------------

    async def _start(self) -> None:
        agent = self.agent
        loop = asyncio.get_running_loop()
        started = loop.time()
        kit = self.kit = self.kit or await self.run_blocking(voice_kit)
        self.brain = self.brain or brain_for(agent)
        loaded_now = await self.run_blocking(ensure_preloaded, kit)
        texts: Sequence[str] = ()
        if self._vocabulary_texts is not None:
            texts = await self._vocabulary_texts()
        recognizer = await self.run_blocking(kit.recognizer, agent, texts)
        detector = kit.detector()
        self.listener = Listener(detector=detector, recognizer=recognizer)
        ambient = agent.ambient_sound if await sync_to_async(ambient_sound_playable)(agent) else None
        mixer = kit.mixer(ambient, float(agent.ambient_sound_volume), bool(agent.ambient_sound_ducking))
        self.playout = Playout(
            mixer=mixer,
            transport=self.transport,
            clock=self.clock,
            user_speaking=lambda: self._user_speaking,
            keyboard=lambda: self._tools_running > 0 and agent.background_sound == BackgroundSound.KEYBOARD,
            lead_ms=self.lead_ms,
        )
        call = await self.recorder.start()
        self.call_id = str(call.pk)
        self.recorder.log(
            "info",
            "session started",
            callId=self.call_id,
            channel=self.recorder.channel,
            voiceEngine=kit.name,
            language=agent.language,
            startupMs=round((loop.time() - started) * 1000),
            modelsLoadedNow=bool(loaded_now),
        )
        if recognizer is None:
            self.recorder.log(
                "warn",
                f"no offline speech recognition for language {agent.language}; the agent speaks but cannot "
                "understand the caller",
            )
        for name, coroutine in (
            ("listen", self._listen()),
            ("recognize", self._recognize()),
            ("speak", self._speak()),
            ("playout", self.playout.run()),
            ("watchdog", self._watchdog()),
        ):
            self._spawn(coroutine, name)
        await self.transport.started(self.call_id)
        self._greet()

    def _greet(self) -> None:
        agent = self.agent
        disclosure = disclosure_for(
            template_id=agent.ai_identity_disclosure_template_id, language=agent.language, agent_name=agent.name
        )
        assert self.kit is not None
        first = self.kit.split_sentences(disclosure.text) or [disclosure.text]
        greeting: list[str] = []
        if agent.greeting_type == GreetingType.STATIC and agent.static_greeting:
            greeting = self.kit.split_sentences(agent.static_greeting)
        elif agent.greeting_type == GreetingType.DYNAMIC:
            self.recorder.log(
                "warn", "dynamic greetings are not supported by this version; only the disclosure is spoken"
            )
        self.recorder.log("info", "disclosure spoken", disclosureVersion=disclosure.version)
        response = self._begin_response(turn_ended_at=None, locked=len(first))
        for sentence in [*first, *greeting]:
            self._say(response, sentence)
        self._speech_q.put_nowait(_End(response))

    # --- stages --------------------------------------------------------------------------------

    async def _listen(self) -> None:
        """Voice activity on the event loop (cheap): turn boundaries and barge-in stay on time even
        when recognition lags; the recognizer's work goes to the recognize stage."""
        assert self.listener is not None
        while True:
            chunk = await self._audio_in.get()
            while not self._audio_in.empty() and len(chunk) < COALESCE_BYTES:
                chunk += self._audio_in.get_nowait()
            heard = self.listener.detect(chunk)
            now = self.clock.now()
            self._user_speaking = heard.speaking
            if heard.speech_started:
                self._over_agent = self._agent_speaking()
                self._barged = False
            response = self._response
            if (
                heard.speaking
                and self._over_agent
                and not self._barged
                and heard.speech_ms >= self.barge_in_ms
                and response is not None
                and not response.done
                and response.interruptible(now)
            ):
                self._barged = True
                self.recorder.log("info", "barge-in", speechMs=heard.speech_ms)
                await self._interrupt(now)
            for kind, audio in heard.jobs:
                verdict = None
                if kind == "finish":
                    # Speech that began over the agent and never interrupted it is a backchannel.
                    verdict = not (self._over_agent and not self._barged)
                    self._over_agent = self._barged = False
                self._asr_q.put_nowait((kind, audio, verdict))

    async def _recognize(self) -> None:
        assert self.listener is not None
        while True:
            jobs = [await self._asr_q.get()]
            while not self._asr_q.empty():
                jobs.append(self._asr_q.get_nowait())
            texts = await self.run_blocking(self.listener.recognize, [(kind, audio) for kind, audio, _ in jobs])
            verdicts = [verdict for kind, _, verdict in jobs if kind == "finish"]
            for text, take in zip(texts, verdicts, strict=True):
                if take:
                    await self._user_turn(text)
                else:
                    self.recorder.log("debug", "short speech over the agent ignored")

    async def _user_turn(self, text: str) -> None:
        text = text.strip()
        if not text:
            self.recorder.log("info", "caller speech not recognised")
            return
        now = self.clock.now()
        if self._agent_speaking():
            await self._interrupt(now)
        self._history.append(Turn(role="user", text=text))
        self.recorder.message("user", text, timezone.now())
        self.recorder.log("info", "user turn", words=len(text.split()))
        await self.transport.send_transcript("user", text)
        response = self._begin_response(turn_ended_at=now)
        self._response_task = self._spawn(self._respond(response), "respond")

    async def _respond(self, response: Response) -> None:
        assert self.brain is not None
        history = list(self._history)
        for _ in range(MAX_TOOL_ROUNDS):
            used_tools = False
            pending = ""
            async for output in self.brain.respond(history):
                if isinstance(output, TextPiece):
                    pending += output.text
                    done, pending = self._complete_sentences(pending)
                    for sentence in done:
                        self._say(response, sentence)
                elif isinstance(output, ToolRequest):
                    used_tools = True
                    history.append(Turn(role="tool", text=await self._run_tool(output), name=output.name))
            if pending.strip():
                for sentence in self.kit.split_sentences(pending) if self.kit else [pending]:
                    self._say(response, sentence)
            if not used_tools:
                break
        self._speech_q.put_nowait(_End(response))

    async def _run_tool(self, request: ToolRequest) -> str:
        self._tools_running += 1
        if self.playout is not None:
            self.playout.wake.set()  # the keyboard may start playing over silence
        await self.transport.send_event({"type": "tool.started", "name": request.name})
        self.recorder.log("info", "tool started", tool=request.name)
        try:
            if self.tools is None:
                return json.dumps({"error": f"Tool {request.name!r} is not available"})
            return await self.tools.run(request)
        finally:
            self._tools_running -= 1
            await self.transport.send_event({"type": "tool.finished", "name": request.name})

    async def _speak(self) -> None:
        assert self.kit is not None and self.playout is not None
        kit, agent = self.kit, self.agent
        while True:
            item = await self._speech_q.get()
            if item.response.generation != self._generation:
                continue  # interrupted
            if isinstance(item, _End):
                self.playout.enqueue(EndMarker(owner=item.response, on_played=self._response_played))
                continue
            audio = await self.run_blocking(kit.synthesize, item.text, agent.language, agent.voice_name)
            if item.response.generation != self._generation or not audio:
                continue
            segment = Segment(text=item.text, audio=audio, owner=item.response)
            item.response.segments.append(segment)
            self.playout.enqueue(segment)

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
        await self.stop(CallStatus.COMPLETED)
        await self.transport.close(CLOSE_NO_AUDIO, "no caller audio")

    # --- responses -----------------------------------------------------------------------------

    def _begin_response(self, *, turn_ended_at: float | None, locked: int = 0) -> Response:
        self._response = Response(generation=self._generation, locked=locked, turn_ended_at=turn_ended_at)
        return self._response

    def _say(self, response: Response, sentence: str) -> None:
        sentence = sentence.strip()
        if sentence:
            response.sentences.append(sentence)
            self._speech_q.put_nowait(_Say(response, sentence))

    def _complete_sentences(self, text: str) -> tuple[list[str], str]:
        """Sentences ready to speak, and the unfinished rest (kept until more text arrives)."""
        assert self.kit is not None
        parts = self.kit.split_sentences(text)
        if not parts:
            return [], text
        if text.rstrip().endswith((".", "!", "?", "…", ";", ":")):
            return parts, ""
        return parts[:-1], parts[-1]

    def _agent_speaking(self) -> bool:
        return self._response is not None and not self._response.done

    async def _response_played(self, response: Response) -> None:
        if response.done or response.generation != self._generation:
            return
        response.done = True
        text = " ".join(segment.text for segment in response.segments)
        fields: dict[str, Any] = {"words": len(text.split())}
        if response.turn_ended_at is not None and response.segments and response.segments[0].play_start:
            fields["latencyMs"] = round((response.segments[0].play_start - response.turn_ended_at) * 1000)
        await self._commit_assistant(text, "assistant turn", fields)

    async def _interrupt(self, now: float) -> None:
        """Barge-in, or a new user turn while the agent still answers."""
        response = self._response
        self._generation += 1
        if self._response_task is not None and not self._response_task.done():
            self._response_task.cancel()
        assert self.playout is not None
        self.playout.cut()
        await self.transport.clear()
        if response is not None and not response.done:
            await self._close_response(response, now, tell=True)

    async def _close_response(self, response: Response, now: float, *, tell: bool) -> None:
        response.done = True
        heard = response.heard_text(now)
        fields = {"heardWords": len(heard.split()), "plannedSentences": len(response.sentences)}
        if tell:
            await self._commit_assistant(heard, "assistant turn cut", fields)
        elif heard:
            self._history.append(Turn(role="assistant", text=heard))
            self.recorder.message("assistant", heard, timezone.now())

    async def _commit_assistant(self, text: str, what: str, fields: dict[str, Any]) -> None:
        self.recorder.log("info", what, **fields)
        if not text:
            return
        self._history.append(Turn(role="assistant", text=text))
        self.recorder.message("assistant", text, timezone.now())
        await self.transport.send_transcript("assistant", text)

    # --- tasks ---------------------------------------------------------------------------------

    def _spawn(self, coroutine: Any, name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coroutine, name=f"{name}-{self.recorder.session_id}")
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled() or self._stopping:
            return
        exc = task.exception()
        if exc is not None:
            self._spawn_failure(exc)

    def _spawn_failure(self, exc: BaseException) -> None:
        failure = asyncio.get_running_loop().create_task(self._fail(exc), name=f"fail-{self.recorder.session_id}")
        self._failure = failure  # keep a reference until it has run

    async def _fail(self, exc: BaseException) -> None:
        if self._stopping:
            return
        logger.error("conversation %s failed", self.recorder.session_id, exc_info=exc)
        self.recorder.log("error", f"engine error: {type(exc).__name__}: {str(exc)[:300]}")
        await self.stop(CallStatus.FAILED)
        # A configuration problem is the operator's to fix and safe to name; anything else stays generic.
        message = str(exc) if isinstance(exc, EngineUnavailable) else "The conversation engine failed"
        try:
            await self.transport.send_event({"type": "error", "code": "engine_error", "message": message})
            await self.transport.close(4500, "engine error")
        except Exception:
            logger.debug("transport already closed", exc_info=True)

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
            logger.error("conversation stages did not stop when cancelled: %s", ", ".join(names))
            self.recorder.log("error", "engine stages did not stop; the call was ended anyway", stages=names)
