"""The cascade voice pipeline (VOICE_ENGINE=cascade): caller audio -> voice activity detection ->
speech recognition -> brain -> speech synthesis -> the shell's playout.

    push_audio -> [listen: VAD, barge-in] -> [recognize: incremental ASR off the loop] -> user turn
               -> [respond: brain, sentence by sentence, tools through the shell]
               -> [speak: TTS off the loop] -> session.play -> playout

On an interruption (`interrupt`) the pipeline drops the sentences it has queued and cancels the
running answer; every queued item belongs to a response, and a cancelled response's items are
dropped wherever they are.

A caller who goes on speaking before hearing the answer to their turn (a pause between two sentences
long enough to end the turn) has not finished it: speech that starts while the turn's words are being
recognized, its answer prepared, or before the answer has played REALTIME_CONTINUE_TURN_MS, drops that
answer once it has lasted REALTIME_BARGE_IN_MS (shorter sounds are ignored, as over any answer) and
joins the turn (`Session.user_went_on`): one caller turn in the history and the call record, one
answer to all of it. Speech that starts later is a barge-in.

A speech provider's failure (ASR_PROVIDER / TTS_PROVIDER other than embedded) never ends the call:
it is logged to the agent log, and the caller hears the offline voice (eSpeak NG). A turn the
recognizer failed on gets the apology phrase ("could you say that again?"); a sentence the voice
failed on is spoken by the offline voice, and so is the rest of that answer (one voice switch per
answer, no second wait on a failing server); after a permanent failure (a wrong key, URL or model)
the offline voice speaks for the rest of the conversation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from channels.db import database_sync_to_async
from django.conf import settings

from agents.interruption import interruption_for
from calls.models import CostProduct, CostUnit
from kit import metrics
from kit.providers import ProviderError
from realtime.engine.audio import IN_BYTES_PER_MS, IN_BYTES_PER_SECOND
from realtime.engine.brain import brain_for, brain_problems
from realtime.engine.cascade import kit as speech_kit
from realtime.engine.cascade.end_of_turn import TurnEnd
from realtime.engine.cascade.kit import VoiceKit, ensure_preloaded, voice_kit
from realtime.engine.cascade.listener import Listener, RecognizerJob
from realtime.engine.cascade.turn_taking import UNFINISHED, UNSURE
from realtime.engine.contracts import Brain, Conversation, Response, TextPiece, ToolCall, Usage
from realtime.engine.phrases import phrase
from realtime.engine.speech.reading import spoken_form
from realtime.engine.timing import TurnTiming
from realtime.selectors import agent_vocabulary_texts

MAX_TOOL_ROUNDS = 4
DECIDE_AGAIN_SECONDS = 5.0  # a brain asked whether a decided transfer or end of call still stands
PEEK_EVERY_MS = 100  # adaptive interruptions: the words of speech over the agent are asked for this often
MAX_PENDING_INPUT = 500  # chunks waiting for the listener (about 10 s of 20 ms chunks)
COALESCE_BYTES = 250 * IN_BYTES_PER_MS  # the listener takes waiting chunks together, up to 250 ms of audio


@dataclass(frozen=True)
class _Job:
    """Work for the recognizer: START | FEED (audio), PEEK (the words at pause number `pause`, or, with
    `barge`, whether speech over the agent is a real interruption yet), FINISH (`verdict`: the utterance
    is a caller turn; False: speech over the agent that did not cut it, judged by its words)."""

    kind: RecognizerJob
    audio: bytes
    verdict: bool | None = None
    pause: int | None = None
    timing: TurnTiming | None = None  # FINISH: when the caller stopped speaking and the turn ended
    joins: bool = False  # FINISH: the utterance goes on with the caller's last turn
    barge: bool = False  # PEEK: asked for the interruption decision of utterance number `utterance`
    utterance: int = 0
    by_sound: bool = False  # FINISH: the utterance cut the agent on its sound alone (it may hold no words)
    speech_ms: int = 0  # FINISH: how long the caller spoke


@dataclass(eq=False)
class _Say:
    response: Response
    text: str
    index: int
    offline: bool = False  # spoken by the offline voice whatever the configured one


@dataclass(eq=False)
class _End:
    response: Response


class CascadePipeline:
    name = "cascade"
    required_settings: tuple[str, ...] = ()

    @classmethod
    def configuration_problems(cls) -> list[str]:
        """Why the cascade cannot run as configured (its brain, its speech providers), empty when fine."""
        return brain_problems() + speech_kit.configuration_problems()

    def __init__(
        self,
        *,
        kit: VoiceKit | None = None,
        brain: Brain | None = None,
        vocabulary_texts: Callable[[], Awaitable[Sequence[str]]] | None = None,
    ) -> None:
        self.kit = kit
        self.brain = brain
        self._vocabulary_texts = vocabulary_texts
        self.barge_in_ms = int(settings.REALTIME_BARGE_IN_MS)
        self.continue_turn_seconds = int(settings.REALTIME_CONTINUE_TURN_MS) / 1000
        self._audio_in: asyncio.Queue[bytes] = asyncio.Queue()
        self._speech_q: asyncio.Queue[_Say | _End] = asyncio.Queue()
        self._asr_q: asyncio.Queue[_Job] = asyncio.Queue()
        self._respond_task: asyncio.Task[None] | None = None
        self._over_agent = False  # the current utterance began while the agent was speaking
        self._barged = False  # ... and has already interrupted it
        self._goes_on = False  # the current utterance began before the answer to the last turn was heard
        self._utterance = 0  # the number of the current utterance
        self._speech_ms = 0  # ... how long it has been speech so far
        self._peeked_ms: int | None = None  # ... its speech when its words were last asked for (-1: ask now)
        self._by_sound = False  # ... it cut the agent on its sound alone
        self._real_peeks = 0  # ... the words asked for in a row that were a real interruption
        self._resume_from: tuple[Response, int] | None = None  # what to say again if that held no words
        self.interruption = interruption_for(None)
        self._words_decide = False  # the recognizer tells the words so far: interruptions are judged by them
        self._turns_in_flight = 0  # caller turns that have ended and whose words are not taken yet
        # The answer to the caller's last spoken turn, until it has been heard (the caller may still go
        # on with that turn); cancelled when dropped for that.
        self._answer: Response | None = None
        self._dropped_input = 0
        self._offline_answer: Response | None = None  # the provider voice failed during this answer
        self._provider_voice_off = False  # ... permanently
        self.listener: Listener | None = None
        self._known_pairs: frozenset[tuple[str, str]] | None = None  # of the recognizer's language model
        self.session: Conversation | None = None

    @classmethod
    def preload(cls) -> None:
        ensure_preloaded(voice_kit())

    async def prepare(self, session: Conversation) -> None:
        self.session = session
        agent = session.agent
        kit = self.kit = self.kit or await session.run_blocking(voice_kit)
        self.brain = self.brain or brain_for(agent)
        await session.run_blocking(ensure_preloaded, kit)
        if self._vocabulary_texts is not None:
            texts = await self._vocabulary_texts()
        else:
            texts = await database_sync_to_async(agent_vocabulary_texts)(agent_id=agent.pk)
        recognizer = await session.run_blocking(kit.recognizer, agent, texts)
        self.listener = Listener(detector=kit.detector(), recognizer=recognizer)
        self.interruption = interruption_for(agent)
        self._words_decide = callable(getattr(recognizer, "peek", None))
        pairs = getattr(recognizer, "known_word_pairs", None)
        self._known_pairs = await session.run_blocking(pairs) if self.listener.quick_end and pairs else None
        self.turn_end = TurnEnd(agent.language, self._known_pairs)  # how a pause reads (TURN_END_DETECTOR)
        if recognizer is None:
            session.recorder.log(
                "warn",
                f"no offline speech recognition for language {agent.language}; the agent speaks but cannot "
                "understand the caller",
            )

    async def handed_off(self) -> None:
        """The call was handed to another agent (`session.agent` now): its brain, interruption settings,
        language and words take over; the caller is heard with its recognizer from their next utterance."""
        assert self.session is not None and self.kit is not None and self.listener is not None
        session = self.session
        agent = session.agent
        self.brain = brain_for(agent)
        self.interruption = interruption_for(agent)
        if self._vocabulary_texts is not None:
            texts = await self._vocabulary_texts()
        else:
            texts = await database_sync_to_async(agent_vocabulary_texts)(agent_id=agent.pk)
        recognizer = await session.run_blocking(self.kit.recognizer, agent, texts)
        if recognizer is not None:
            self.listener.recognize_with(recognizer)
            pairs = getattr(recognizer, "known_word_pairs", None)
            self._known_pairs = await session.run_blocking(pairs) if self.listener.quick_end and pairs else None
        self.turn_end = TurnEnd(agent.language, self._known_pairs)

    def answer(self, response: Response) -> None:
        """Let the brain go on with `response` (the greeting: a flow's first steps), then end it."""
        assert self.session is not None
        self._respond_task = self.session.spawn(self._respond(response), "respond")

    def begin(self) -> None:
        assert self.session is not None
        for name, coroutine in (("listen", self._listen()), ("recognize", self._recognize()), ("speak", self._speak())):
            self.session.spawn(coroutine, name)

    def split_sentences(self, text: str) -> list[str]:
        assert self.kit is not None
        return self.kit.split_sentences(text)

    def push_audio(self, pcm16_16k: bytes) -> None:
        if self._audio_in.qsize() >= MAX_PENDING_INPUT:
            self._audio_in.get_nowait()  # the oldest goes: the listener is overloaded
            self._dropped_input += 1
            if self._dropped_input == 1 and self.session is not None:
                self.session.recorder.log("warn", "input audio arrives faster than it can be processed; dropping")
        self._audio_in.put_nowait(pcm16_16k)

    def say(self, response: Response, text: str, *, offline: bool = False) -> None:
        text = text.strip()
        if text and not response.cancelled:
            self._speech_q.put_nowait(_Say(response, text, response.add_sentence(text), offline))

    def end(self, response: Response) -> None:
        self._speech_q.put_nowait(_End(response))

    def interrupt(self) -> None:
        while not self._speech_q.empty():
            self._speech_q.get_nowait()
        if self._respond_task is not None and not self._respond_task.done():
            self._respond_task.cancel()

    async def aclose(self) -> None:
        close = getattr(self.brain, "aclose", None)
        if close is not None:
            await close()

    # --- stages --------------------------------------------------------------------------------

    async def _listen(self) -> None:
        """Voice activity on the event loop (cheap): turn boundaries and barge-in stay on time even
        when recognition lags; the recognizer's work goes to the recognize stage."""
        assert self.listener is not None and self.session is not None
        session = self.session
        while True:
            chunk = await self._audio_in.get()
            while not self._audio_in.empty() and len(chunk) < COALESCE_BYTES:
                chunk += self._audio_in.get_nowait()
            heard = self.listener.detect(chunk)
            now = session.clock.now()
            session.user_speaking = heard.speaking
            if heard.speech_started:
                self._utterance_began(now - heard.speech_ms / 1000)
            if not self._goes_on and self._answer is not None and self._heard(self._answer, now):
                self._answer = None
                session.recorder.release_caller_message()  # the caller's turn is complete
            if heard.speaking:
                self._speech_ms = max(self._speech_ms, heard.speech_ms)
                await self._maybe_cut(now, heard.speech_ms)
            for kind, audio in heard.jobs:
                if kind is RecognizerJob.FINISH:
                    self._asr_q.put_nowait(self._finish_job(now))
                else:
                    self._asr_q.put_nowait(_Job(kind, audio, None, heard.pause))
            if self._peeked_ms == -1:  # asked for in _maybe_cut: after the audio it is about
                self._peeked_ms = self._speech_ms
                self._asr_q.put_nowait(_Job(RecognizerJob.PEEK, b"", barge=True, utterance=self._utterance))

    def _may_cut(self, now: float) -> bool:
        """Whether the caller's current utterance may cut the agent's response now: one it began over, or
        the answer to the turn it goes on with, past the part that cannot be cut (the disclosure, a handoff
        or goodbye), the call not closing, and not already cut by this utterance."""
        assert self.session is not None
        response = self.session.response
        return not (
            self._barged
            or response is None
            or response.done
            or not (self._over_agent or (self._goes_on and response is self._answer))
            or not response.interruptible(now)
            or self.session.transferring
        )

    async def _maybe_cut(self, now: float, speech_ms: int) -> None:
        """The caller is speaking over the agent: cut it as the agent's interruption settings say. `vad`
        (and `adaptive` with a recognizer that cannot tell the words so far): after REALTIME_BARGE_IN_MS
        of speech; `adaptive`: once the words so far are a real interruption (not a backchannel, at least
        minWords words), asked of the recognizer every PEEK_EVERY_MS of speech; `off`: never."""
        mode = self.interruption.mode
        if mode == "off" or not self._may_cut(now):
            return
        if mode == "adaptive" and self._words_decide:
            peeked = self._peeked_ms
            if peeked is None or (peeked >= 0 and speech_ms - peeked >= PEEK_EVERY_MS):
                self._peeked_ms = -1
            return
        if speech_ms >= self.barge_in_ms:
            await self._cut(now, speech_ms, by_sound=True)

    async def _cut(self, now: float, speech_ms: int, *, by_sound: bool) -> None:
        """Cut the agent for the caller's utterance: an answer to the turn the caller is still speaking is
        dropped (the words join that turn); anything else is a barge-in."""
        assert self.session is not None
        session = self.session
        response = session.response
        assert response is not None
        self._barged = True
        if self._goes_on and response is self._answer:
            session.recorder.log("info", "caller went on before hearing the answer", speechMs=speech_ms)
            await session.interrupt(now, forget=True)
            return
        session.recorder.log("info", "barge-in", speechMs=speech_ms)
        self._by_sound = by_sound
        if by_sound:  # if it turns out to hold no words, the agent says again what it was cut in
            self._resume_from = (response, self._cut_sentence(response, session.heard_by(now)))
        else:
            session.interruption("real", speech_ms)
        self._answer = None
        await session.interrupt(now)

    @staticmethod
    def _cut_sentence(response: Response, heard_by: float) -> int:
        """The number of the first sentence of `response` the caller has not heard whole by `heard_by`."""
        for segment in response.segments:
            if segment.heard_fraction(heard_by) < 1.0:
                return segment.index
        return response.segments[-1].index + 1 if response.segments else response.in_history

    async def _barge_words(self, job: _Job, words: str) -> None:
        """The words so far of an utterance over the agent (`adaptive`): a real interruption cuts it."""
        assert self.session is not None
        if job.utterance != self._utterance:
            return
        self._peeked_ms = max(self._peeked_ms or 0, 0)
        now = self.session.clock.now()
        if not self.session.user_speaking or not self._may_cut(now):
            return
        if self.interruption.kind_of(words) != "real":
            self._real_peeks = 0
            return
        # One word alone must be heard twice in a row: a backchannel's sound is misheard as a word more
        # often than a real interruption is one word that the next 100 ms change.
        self._real_peeks += 1
        if self._real_peeks >= 2 or len(words.split()) >= 2:
            await self._cut(now, self._speech_ms, by_sound=False)

    def _resume(self, job: _Job, words: str) -> bool:
        """An utterance cut the agent on its sound alone and holds no real interruption (a cough, a
        noise; a backchannel unless the mode is `vad`, where any words are a turn): the agent says again,
        after resumeAfterMs, the sentence it was cut in and the rest it had. False when it is a turn."""
        assert self.session is not None
        session = self.session
        kind = self.interruption.kind_of(words)
        if self.interruption.mode == "vad" and words.strip():
            return False
        session.interruption("backchannel" if kind == "backchannel" else "false", job.speech_ms)
        cut, self._resume_from = self._resume_from, None
        if cut is not None and not session.transferring:
            session.spawn(self._say_again(*cut), "resume")
        return True

    async def _say_again(self, cut: Response, index: int) -> None:
        assert self.session is not None
        session = self.session
        await session.clock.sleep_until(session.clock.now() + self.interruption.resume_after_ms / 1000)
        sentences = [sentence for sentence in cut.sentences[index:] if sentence.strip()]
        if not sentences or session.user_speaking or session.agent_speaking() or session.transferring:
            return
        session.recorder.log("info", "the agent resumes what it was cut in", sentences=len(sentences))
        response = session.begin_response()
        for sentence in sentences:
            self.say(response, sentence)
        self.end(response)

    async def _heard_over(self, words: str, job: _Job) -> None:
        """An utterance over the agent that did not cut it, now that its words are known: a backchannel or
        a noise is no turn; real words cut the agent now (`adaptive`, recognized only at the end) or,
        where the agent may not be cut (`off`, the disclosure, a handoff or goodbye), are the caller's
        next turn, answered once the agent has finished."""
        assert self.session is not None
        session = self.session
        kind = self.interruption.kind_of(words)
        if kind != "real":
            session.interruption("backchannel" if kind == "backchannel" else "ignored", job.speech_ms)
            return
        timing = job.timing or TurnTiming(turn_ended_at=session.clock.now())
        now = session.clock.now()
        response = session.response
        if self.interruption.mode != "off" and response is not None and not response.done:
            if response.interruptible(now) and not session.transferring:
                session.interruption("real", job.speech_ms)
                self._answer = None
                await session.interrupt(now)
                await self._take_turn(words, timing, spoken=True)
                return
        session.recorder.log("info", "caller spoke while the agent could not be cut; heard as the next turn")
        session.spawn(self._next_turn(response, words), "next-turn")

    async def _next_turn(self, response: Response | None, words: str, *, spoken: bool = True) -> None:
        """Words the caller said while the agent could not be cut: their turn once it has finished."""
        assert self.session is not None
        session = self.session
        if response is not None:
            await session.heard_out(response)
        await self._take_turn(words, TurnTiming(turn_ended_at=session.clock.now()), spoken=spoken)

    def _utterance_began(self, at: float) -> None:
        """The caller began an utterance at `at`: over the agent or not, and going on with their last
        turn if that is still unanswered."""
        assert self.session is not None
        self._over_agent = self.session.agent_speaking()
        self._barged = self._by_sound = False
        self._goes_on = self._turn_unanswered(at)
        self._utterance += 1
        self._speech_ms = 0
        self._peeked_ms = None
        self._real_peeks = 0

    def _turn_unanswered(self, at: float) -> bool:
        """Whether the caller's last turn is still unanswered at `at`: its words are being recognized,
        or its answer has not been heard yet."""
        return self._turns_in_flight > 0 or (self._answer is not None and not self._heard(self._answer, at))

    def _heard(self, answer: Response, now: float) -> bool:
        """Whether the caller has heard `answer` by `now`: it has played REALTIME_CONTINUE_TURN_MS, or
        whole (a dropped answer was not heard)."""
        assert self.session is not None
        if answer.done:
            return not answer.cancelled
        return answer.heard_seconds(self.session.heard_by(now)) >= self.continue_turn_seconds

    def _turn_ended(self, now: float, silence_ms: int | None = None) -> TurnTiming:
        """The caller's turn ends now, `silence_ms` after they stopped speaking (by default the
        detector's silence so far)."""
        assert self.listener is not None
        if silence_ms is None:
            silence_ms = getattr(self.listener.detector, "silence_ms", None)
        spoke = now - silence_ms / 1000 if isinstance(silence_ms, int | float) else None
        return TurnTiming(turn_ended_at=now, speech_ended_at=spoke)

    def _finish_job(self, now: float, silence_ms: int | None = None) -> _Job:
        """The recognizer's last job for the utterance that ends now: whether it is a caller turn (speech
        that began over the agent and did not cut it is judged by its words once they are known:
        `_heard_over`), and whether it goes on with the caller's last turn."""
        take = self._barged or self._goes_on or not self._over_agent
        joins = take and self._goes_on
        job = _Job(
            RecognizerJob.FINISH,
            b"",
            take,
            None,
            self._turn_ended(now, silence_ms),
            joins,
            utterance=self._utterance,
            by_sound=self._by_sound,
            speech_ms=self._speech_ms,
        )
        self._over_agent = self._barged = self._goes_on = self._by_sound = False
        self._peeked_ms = None
        self._turns_in_flight += take
        return job

    async def _recognize(self) -> None:
        while True:
            jobs = [await self._asr_q.get()]
            while not self._asr_q.empty() and jobs[-1].kind not in (RecognizerJob.FINISH, RecognizerJob.PEEK):
                jobs.append(self._asr_q.get_nowait())
            await self._recognize_jobs(jobs)

    async def _recognize_jobs(self, jobs: list[_Job]) -> None:
        """Run the recognizer's jobs and act on the answer to the one question among them (the words at
        a pause, or an utterance's end): up to one per call, so that its answer is not held back by
        later audio, and a provider's failure costs only that utterance."""
        assert self.listener is not None and self.session is not None
        session = self.session
        asked = next((job for job in jobs if job.kind in (RecognizerJob.FINISH, RecognizerJob.PEEK)), None)
        work = [(job.kind, job.audio) for job in jobs]
        self.turn_end.hear(work)
        if self.listener.recognizer is not None:  # the cost ledger: seconds of caller audio recognized
            heard = sum(len(audio) for kind, audio in work if kind in (RecognizerJob.START, RecognizerJob.FEED))
            session.recorder.measure(
                product=CostProduct.ASR,
                provider=settings.ASR_PROVIDER,
                model=settings.ASR_MODEL or None,
                unit=CostUnit.SECOND,
                quantity=heard / IN_BYTES_PER_SECOND,
            )
        try:
            texts = await session.run_blocking(self.listener.recognize, work)
        except ProviderError as exc:
            if asked is not None and asked.kind is RecognizerJob.FINISH:
                self._turns_in_flight -= bool(asked.verdict)
                await self._recognition_failed(exc, take=bool(asked.verdict))
            return
        for kind, text in texts:
            assert asked is not None
            if kind is RecognizerJob.PEEK and asked.barge:
                await self._barge_words(asked, text)
            elif kind is RecognizerJob.PEEK:
                split = self._paused(asked.pause, await self.turn_end.read(text, session.run_blocking))
                if split is not None:  # before the audio that follows the pause, still queued
                    await self._recognize_jobs([split, _Job(RecognizerJob.START, b"")])
            elif not asked.verdict:
                await self._heard_over(text, asked)
            else:
                self._turns_in_flight -= 1
                timing = asked.timing or TurnTiming(turn_ended_at=session.clock.now())
                timing.recognized_at = session.clock.now()
                if asked.by_sound and self.interruption.kind_of(text) != "real" and self._resume(asked, text):
                    continue
                if asked.by_sound:
                    session.interruption("real", asked.speech_ms)
                await self._take_turn(text, timing, joins=asked.joins, spoken=True)

    def _paused(self, pause: int | None, verdict: str) -> _Job | None:
        """The caller has paused (VAD_QUICK_END_SILENCE_MS) and the pause reads as `verdict` (by the words
        or the audio: realtime/engine/cascade/end_of_turn.py): the turn ends now when finished, after
        VAD_UNSURE_SILENCE_MS when the words may be misheard, and otherwise after VAD_UNFINISHED_SILENCE_MS
        (realtime/engine/cascade/turn_taking.py); all only if the caller is still silent.

        When the words come after the caller has already spoken again (the recognizer lagged behind the
        audio), the turn ends at that pause all the same if it lasted as long as the words ask for: the
        FINISH job of that utterance is returned, to run at once (before the audio that follows the pause),
        and what the caller has said since goes on with the turn, as if they had started speaking once
        it had ended there. So where a turn ends follows from the audio, whatever the machine's load."""
        assert self.listener is not None and self.session is not None
        if pause is None:
            return None
        if verdict == UNFINISHED:
            return None
        after_ms = int(settings.VAD_UNSURE_SILENCE_MS) if verdict == UNSURE else 0
        now = self.session.clock.now()
        if self.listener.end_turn(pause, after_ms=after_ms):
            self._asr_q.put_nowait(self._finish_job(now))
            return None
        since_ms = self.listener.split_turn(pause, after_ms=after_ms)
        if since_ms is None:
            return None
        self.session.recorder.log("debug", "turn ended at a pause the caller has spoken after", sincePauseMs=since_ms)
        finish = self._finish_job(now, silence_ms=since_ms)
        self._utterance_began(now - self.listener.detector.current_speech_ms / 1000)
        return finish

    async def _recognition_failed(self, exc: ProviderError, *, take: bool) -> None:
        """The speech recognition provider failed on a caller turn: log it and, unless the turn was
        speech over the agent that did not interrupt it, apologize with the offline voice."""
        assert self.session is not None
        session = self.session
        session.recorder.log("error", "speech recognition failed", reason=exc.message, permanent=exc.permanent)
        metrics.record_provider_error("asr", permanent=exc.permanent)
        if not take or session.transferring:
            return
        self._answer = None
        if session.agent_speaking():
            await session.interrupt(session.clock.now())
        response = session.begin_response(turn_ended_at=session.clock.now())
        self.say(response, phrase("apology", session.agent.language), offline=True)
        self.end(response)

    async def text_turn(self, text: str) -> None:
        """A caller turn as text (typed, or keys pressed on a phone): the brain answers. It cuts the agent
        like a barge-in, but with `interruption.mode` `off`, where it is answered once the agent has finished."""
        assert self.session is not None
        session = self.session
        response = session.response
        if self.interruption.mode == "off" and response is not None and not response.done:
            session.spawn(self._next_turn(response, text, spoken=False), "next-turn")
            return
        await self._take_turn(text, TurnTiming(turn_ended_at=session.clock.now()))

    async def _take_turn(self, text: str, timing: TurnTiming, *, joins: bool = False, spoken: bool = False) -> None:
        """Answer a caller turn; `joins`: words that went on with the caller's last turn before its
        answer was heard, which then answers the whole turn instead (if that answer is still unheard)."""
        assert self.session is not None
        session = self.session
        answer = self._answer if joins else None
        if answer is not None and answer.done and not answer.cancelled:
            answer = None  # it has played whole meanwhile: these words are a turn of their own
        if answer is not None and not answer.cancelled:
            kind = self.interruption.kind_of(text)
            if kind != "real":  # a sound or a backchannel: the answer goes on
                session.recorder.log("info", "caller speech not recognised" if kind == "noise" else "backchannel")
                return
            if self.interruption.mode == "off":  # the answer is not cut: the words are the next turn
                session.spawn(self._next_turn(answer, text), "next-turn")
                return
            if not answer.done and answer.decided_by and await self._still_asked(answer, text):
                session.recorder.log("info", "the caller went on; the whole turn still asks for what was decided")
                await session.user_added(text)
                return
        if answer is not None:
            if not answer.done:
                await session.interrupt(session.clock.now(), forget=True)
            taken = await session.user_went_on(text)
        else:
            taken = await session.user_said(text)
        if taken:
            response = session.begin_response(turn_ended_at=session.clock.now())
            response.answers(timing)
            self._answer = response if spoken else None
            self._respond_task = session.spawn(self._respond(response), "respond")

    async def _still_asked(self, answer: Response, text: str) -> bool:
        """Whether the caller's whole turn, `text` joined to it, still asks for the transfer or end of call
        that `answer` decided: the brain is asked again (up to its first tool call, which is not run, within
        DECIDE_AGAIN_SECONDS); then the announcement or goodbye plays on and the action is carried out."""
        assert self.brain is not None and self.session is not None
        if getattr(self.brain, "deterministic", False):
            return True  # a flow's step decided it: the flow is not asked again (docs/guides/flows.md)
        session = self.session
        outputs = self.brain.respond(session.context, session.turn_with(text))
        try:
            async with asyncio.timeout(DECIDE_AGAIN_SECONDS):
                async for output in outputs:
                    if isinstance(output, Usage):
                        session.usage(output)
                    elif isinstance(output, ToolCall):
                        return output.name == answer.decided_by
        except (TimeoutError, ProviderError):
            return False
        finally:
            close = getattr(outputs, "aclose", None)
            if close is not None:
                await close()
        return False

    def overdue(self, response: Response, *, tool_running: bool) -> None:
        """The shell's RESPONSE_TIMEOUT_SECONDS passed and `response` has not begun: while a tool is
        still working the caller is told so (its answer follows); a brain that hangs is given up on and
        the caller hears an apology (the call goes on)."""
        assert self.session is not None
        language = self.session.agent.language
        if response.cancelled:
            return
        if tool_running:
            self.say(response, phrase("still_working", language))
            return
        if self._respond_task is not None and not self._respond_task.done():
            self._respond_task.cancel()
        self.say(response, phrase("slow_answer", language), offline=True)
        self.end(response)

    async def _respond(self, response: Response) -> None:
        """Ask the brain, speak its sentences as they complete, run its tool calls through the shell
        and ask again with their results (up to MAX_TOOL_ROUNDS)."""
        assert self.brain is not None and self.session is not None
        session = self.session
        try:
            for _ in range(MAX_TOOL_ROUNDS):
                round_start = len(response.sentences)
                calls: list[ToolCall] = []
                pending = ""
                async for output in self.brain.respond(session.context, list(session.history)):
                    if response.timing is not None and isinstance(output, TextPiece | ToolCall):
                        response.timing.first_token(session.clock.now())
                    if isinstance(output, TextPiece):
                        done, pending = self._complete_sentences(pending + output.text)
                        for sentence in done:
                            self.say(response, sentence)
                    elif isinstance(output, ToolCall):
                        calls.append(output)
                    elif isinstance(output, Usage):
                        session.usage(output)
                for sentence in self.split_sentences(pending) if pending.strip() else ():
                    self.say(response, sentence)
                if not calls:
                    break
                said = " ".join(response.sentences[round_start:])
                outcomes = [await session.run_tool(call) for call in calls]
                session.tool_round(response, said, calls, outcomes)
                if response.passes_on:  # a transfer, or a handoff to another agent
                    if response.transfer_to or not said.strip():
                        self.say(response, session.passing_sentence(response))
                    response.lock_said()  # the announcement is not cut by a barge-in
                    break
                if response.then_end is not None:  # end_call: the goodbye plays, then the call ends
                    if not said.strip():
                        self.say(response, session.goodbye_sentence())
                    response.lock_said()
                    break
        except ProviderError as exc:
            self.say(response, session.brain_failed(exc))
        self.end(response)

    async def _speak(self) -> None:
        assert self.kit is not None and self.session is not None
        session = self.session
        while True:
            item = await self._speech_q.get()
            if item.response.cancelled:
                continue
            if isinstance(item, _End):
                session.finish_response(item.response)
                continue
            agent = session.agent  # read for each sentence: a handoff changes the voice
            audio = await self._synthesize(item, agent.language, agent.voice_name)
            session.play(item.response, item.text, audio, item.index)

    async def _synthesize(self, item: _Say, language: str, voice_name: str) -> bytes:
        """The sentence's speech from the configured voice, or from the offline voice when that is a
        provider's and it fails (or failed earlier in this answer, or for good)."""
        assert self.kit is not None and self.session is not None
        kit, session = self.kit, self.session
        offline = kit.offline_synthesize
        audio: bytes
        # The voice reads numbers as a caller expects ("five five five, zero one nine nine"); the
        # transcript keeps the sentence as written (item.text).
        text = spoken_form(item.text, language)
        if offline is not None and (item.offline or self._provider_voice_off or self._offline_answer is item.response):
            audio = await session.run_blocking(offline, text, language, voice_name)
            self._synthesized("embedded", None, text)
            return audio
        try:
            audio = await session.run_blocking(kit.synthesize, text, language, voice_name)
            self._synthesized(settings.TTS_PROVIDER, settings.TTS_MODEL or None, text)
            return audio
        except ProviderError as exc:
            if offline is None:
                raise
            metrics.record_provider_error("tts", permanent=exc.permanent)
            self._offline_answer = item.response
            self._provider_voice_off = self._provider_voice_off or exc.permanent
            session.recorder.log(
                "error",
                "speech synthesis failed; the offline voice speaks "
                + ("from now on" if exc.permanent else "the rest of this answer"),
                reason=exc.message,
                permanent=exc.permanent,
            )
            audio = await session.run_blocking(offline, text, language, voice_name)
            self._synthesized("embedded", None, text)
            return audio

    def _synthesized(self, provider: str, model: str | None, text: str) -> None:
        """The cost ledger: characters a voice synthesized."""
        assert self.session is not None
        self.session.recorder.measure(
            product=CostProduct.TTS, provider=provider, model=model, unit=CostUnit.CHARACTER, quantity=len(text)
        )

    def _complete_sentences(self, text: str) -> tuple[list[str], str]:
        """Sentences ready to speak, and the unfinished rest (kept until more text arrives)."""
        parts = self.split_sentences(text)
        if not parts:
            return [], text
        if text.rstrip().endswith((".", "!", "?", "…", ";", ":")):
            return parts, ""
        return parts[:-1], parts[-1]


__all__ = ["CascadePipeline"]
