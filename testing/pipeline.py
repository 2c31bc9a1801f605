"""A session driven by hand: the session shell and the cascade pipeline on a hand-moved clock, with a
transport that records what the caller would receive. One harness for the pipeline tests (scripted
recognizer, detector and voice: testing.fakes.make_kit) and for the speech-provider tests (the configured
speech kit with a stand-in detector: `provider_harness`)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import numpy as np
from asgiref.sync import sync_to_async

from calls.logging import flush_agent_logs
from calls.models import AgentLog, Call
from realtime.engine.audio import IN_BYTES_PER_MS
from realtime.engine.cascade import kit as voice
from realtime.engine.cascade.kit import VoiceKit
from realtime.engine.cascade.listener import RecognizerJob
from realtime.engine.cascade.pipeline import CascadePipeline
from realtime.engine.clock import ManualClock, settle
from realtime.engine.contracts import TextPiece
from realtime.engine.session.shell import open_session
from testing.fakes import FakeDetector, FakeMixer, RecordingTransport, ScriptedTools, make_kit, silence, speech
from testing.recording import MemoryRecorder, RecordedCall

GREETING = "Welcome to Acme. How can I help?"  # 7 words: 0.7 s in the scripted voice


async def inline(function: Any, *args: Any) -> Any:
    """run_blocking for tests: the blocking parts run on the loop (they take microseconds here)."""
    return function(*args)


def lagging_recognizer(caught_up: asyncio.Event) -> Callable[..., Awaitable[Any]]:
    """run_blocking for a recognizer that lags behind the caller's audio: the words at a pause (the
    quick end of turn's question) come only once `caught_up` is set; everything else runs inline."""

    async def run_blocking(function: Any, *args: Any) -> Any:
        if getattr(function, "__name__", "") == "recognize" and any(kind is RecognizerJob.PEEK for kind, _ in args[0]):
            await caught_up.wait()
        return function(*args)

    return run_blocking


class EchoBrain:
    """Repeats what it heard, so that tests can see which user turn was answered."""

    async def respond(self, context: Any, history: Any) -> AsyncIterator[TextPiece]:
        heard = next((turn.text for turn in reversed(history) if turn.role == "user"), "")
        yield TextPiece(f"You said: {heard}.")


class Harness:
    """One session on the web channel. `kit` defaults to the scripted one (`texts` are what its recognizer
    hears, in order); `parts` holds the kit's stand-ins (the mixer, and the recognizer of the scripted kit)."""

    def __init__(
        self,
        agent: Any,
        *,
        texts: Sequence[str] = (),
        brain: Any = None,
        has_bed: bool = False,
        tools: Any = None,
        recognizer: bool = True,
        recorder: Any = None,
        kit: VoiceKit | None = None,
        vocabulary_texts: Callable[[], Awaitable[list[str]]] | None = None,
        detector: Callable[[], FakeDetector] = FakeDetector,
        run_blocking: Callable[..., Awaitable[Any]] = inline,
    ) -> None:
        self.clock = ManualClock()
        self.transport = RecordingTransport(self.clock)
        if kit is None:
            self.kit, self.parts = make_kit(texts=texts, has_bed=has_bed, recognizer=recognizer, detector=detector)
        else:
            self.kit, self.parts = kit, {"mixer": FakeMixer(has_bed)}
        self.tools = tools or ScriptedTools()
        pipeline = CascadePipeline(kit=self.kit, brain=brain or EchoBrain(), vocabulary_texts=vocabulary_texts)
        self.conversation = open_session(
            agent=agent,
            transport=self.transport,
            channel="web",
            pipeline=pipeline,
            tools=self.tools,
            mixer=lambda ambient, volume, ducking: self.parts["mixer"],
            clock=self.clock,
            run_blocking=run_blocking,
            recorder=recorder,
        )
        self.recorder = self.conversation.recorder
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.task = asyncio.create_task(self.conversation.run())
        # The call record is written by a database thread: wait for it (no clock involved).
        for _ in range(500):
            if "started" in self.transport.kinds() or self.task.done():
                break
            await asyncio.sleep(0.01)
        await settle()

    async def feed(self, pcm: bytes, *, piece_ms: int = 20) -> None:
        """Stream caller audio in pieces of `piece_ms` (a browser's 20 ms frames; a transport or a loaded
        machine may hand the listener larger or odd ones), moving the clock with it."""
        size = piece_ms * IN_BYTES_PER_MS
        for start in range(0, len(pcm), size):
            piece = pcm[start : start + size]
            self.conversation.push_audio(piece)
            await self.clock.advance(len(piece) / IN_BYTES_PER_MS / 1000)

    async def feed_silence_until(self, done: Callable[[], object], *, at_most_ms: int) -> None:
        """Silence from the caller until `done()` holds (or `at_most_ms` of it): the call record and the
        agent logs are written in threads, in real time, while the session's clock is driven by hand; each
        half second of silence gives the threads a moment of real time."""
        for _ in range(at_most_ms // 500):
            if done():
                return
            await self.feed(silence(500))
            await asyncio.sleep(0.01)

    async def talk(self, ms: int, then_silence_ms: int = 300) -> None:
        await self.feed(speech(ms) + silence(then_silence_ms))

    def audio_after(self, since: float) -> np.ndarray:
        """The samples the caller received from `since` (clock seconds) on."""
        pcm = b"".join(chunk for at, kind, chunk in self.transport.events if kind == "audio" and at >= since)
        return np.frombuffer(pcm, dtype="<i2")

    async def logs(self) -> list[dict[str, Any]]:
        """The session's agent log lines, flushed: [{"severity": ..., **content}]."""
        await sync_to_async(flush_agent_logs)()
        rows: list[tuple[str, dict[str, Any]]] = await sync_to_async(
            lambda: list(
                AgentLog.objects.filter(session_id=self.recorder.session_id).values_list("severity", "content")
            )
        )()
        return [{"severity": severity, **content} for severity, content in rows]

    async def stop(self) -> Call | RecordedCall:
        await self.conversation.stop()
        assert self.task is not None
        await asyncio.wait_for(self.task, 10)
        if isinstance(self.recorder, MemoryRecorder):
            assert self.recorder.call is not None, "the session never started its call"
            return self.recorder.call
        return await sync_to_async(Call.objects.prefetch_related("messages").get)(pk=self.conversation.call_id)


def provider_harness(agent: Any, *, brain: Any = None) -> Harness:
    """The configured speech kit (ASR_PROVIDER / TTS_PROVIDER) with a stand-in detector that hears
    testing.fakes.speech() and silence(), and a vocabulary of one tool name."""

    async def vocabulary() -> list[str]:
        return ["book_table"]

    kit = dataclasses.replace(voice.voice_kit(), detector=FakeDetector)
    return Harness(agent, brain=brain, kit=kit, vocabulary_texts=vocabulary)


def spoken_offline(audio: np.ndarray) -> bool:
    """eSpeak NG's speech: a waveform, nothing like the scripted voice's constant level."""
    voiced = audio[audio != 0]
    return voiced.size > 2400 and len(np.unique(voiced)) > 100


async def messages(call: Call | RecordedCall) -> list[tuple[str, str]]:
    """The call's transcript as (role, content), in order."""
    if isinstance(call, RecordedCall):
        return call.messages
    return await sync_to_async(
        lambda: list(call.messages.order_by("occurred_at", "sequence").values_list("role", "content"))
    )()
