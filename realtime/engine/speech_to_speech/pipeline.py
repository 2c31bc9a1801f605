"""The speech-to-speech voice pipeline (VOICE_ENGINE=speech-to-speech): one WebSocket per conversation to a
server speaking the OpenAI Realtime protocol (OpenAI, Azure OpenAI, xAI's voice agent API, compatible
self-hosted servers); the provider's model listens, thinks and speaks, and this service keeps its role.

    push_audio (16 kHz) -> soxr 16 -> 24 kHz -> input_audio_buffer.append -> provider (server VAD)
    provider audio deltas -> whole 20 ms frames -> session.play -> playout + mixer -> transport
    speech_started -> barge-in: session.interrupt (clear), response.cancel, conversation.item.truncate
    function calls -> session.run_tool (the shell's one dispatcher) -> function_call_output + response.create

Settings (voiceagent/settings.py): REALTIME_PROVIDER_URL (e.g. wss://api.openai.com/v1/realtime),
REALTIME_PROVIDER_API_KEY (sent as `Authorization: Bearer`, as `api-key` to Azure; never logged),
REALTIME_PROVIDER_MODEL (`?model=`), REALTIME_PROVIDER_DIALECT (auto|openai|xai: where voice and turn
detection go in `session.update`), REALTIME_PROVIDER_VOICES (agent voice -> provider voice) and
REALTIME_PROVIDER_TRANSCRIPTION_MODEL (caller transcripts for the call record, openai dialect). The
provider is the operator's own configuration: it is not reached through the customer-URL guard.

What the service still decides: the instructions (identity, instructions, language, and the
AI-identity disclosure and greeting spoken first, word for word, through a `response.create` of their
own), the voice, the offered tools (flat function format), the formats and server VAD. Barge-in is
decided here, not by the provider (`interrupt_response: false`): the disclosure cannot be cut, and
what the caller heard is known only to the playout. The assistant transcript keeps what was played:
each provider item's transcript words are spread over its audio frames in proportion to time, so the
shell's `heard_text` works unchanged. Both the GA and the older beta event names are accepted.

Audio: browser sessions use `audio/pcm` at 24 kHz both ways (the shell's playout and mixer speak 24 kHz
PCM). A phone transport could later pass G.711 through (`audio/pcmu` in and out, no resampling) by
setting `input_format`/`output_format`; the mixer (ambient and keyboard sounds) would then need a
μ-law path or be bypassed.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import logging
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import numpy as np
import soxr
from django.conf import settings

from agents.interruption import interruption_for
from calls.models import CostProduct
from kit.providers import ProviderError
from realtime.engine.audio import IN_RATE, OUT_BYTES_PER_SECOND, OUT_FRAME_BYTES, OUT_RATE
from realtime.engine.brain.openai_chat import parse_arguments, reported_tokens
from realtime.engine.contracts import Conversation, Response, Segment, ToolCall
from realtime.engine.speech_to_speech.provider import (
    OPENAI_VOICES,
    REQUIRED_SETTINGS,
    configuration_problems,
    instructions_for,
    provider_name,
    provider_url,
)
from realtime.engine.timing import TurnTiming

logger = logging.getLogger(__name__)

# The provider's audio goes to the playout as it comes: it speaks (and hears) the engine's output format.
PROVIDER_RATE = OUT_RATE
PROVIDER_BYTES_PER_SECOND = OUT_BYTES_PER_SECOND
SECONDS_PER_WORD = 0.4  # speaking rate assumed while an item's audio is still arriving
CONNECT_TIMEOUT_SECONDS = 10.0
MAX_PENDING_OUTPUT = 1000  # client events waiting for the socket
# Caller audio waiting for the socket: beyond 20 s of it, new audio is dropped (the provider cannot keep up).
MAX_PENDING_AUDIO_BYTES = 20 * PROVIDER_BYTES_PER_SECOND
# One input_audio_buffer.append carries at most this much of the caller audio that queued up meanwhile.
MAX_APPEND_BYTES = PROVIDER_BYTES_PER_SECOND
MAX_TOOL_ROUNDS = 4
ERROR_DETAIL_CHARS = 300
# A call that ends while the provider answers: how long its response.done (and the usage the provider
# bills for the cut answer) is waited for before the socket closes. Within the shell's STOP_GRACE_SECONDS.
USAGE_WAIT_SECONDS = 1.0
PCM_24K = {"type": "audio/pcm", "rate": PROVIDER_RATE}
# soxr's low quality (80 % bandwidth: flat to 6.4 kHz, plenty for speech) answers every 20 ms chunk
# and holds 19 ms of audio; its default HQ holds 33 ms and answers only two chunks in three.
RESAMPLE_QUALITY = "LQ"


def _event_of(frame: str) -> dict[str, Any] | None:
    """The event a provider's text frame holds (None, with a warning, for one that is not a JSON object)."""
    try:
        event = json.loads(frame)
    except ValueError:
        logger.warning("the speech-to-speech provider sent a frame that is not JSON; ignored")
        return None
    return event if isinstance(event, dict) else None


def _redact(text: str, key: str) -> str:
    return text.replace(key, "[redacted]") if key else text


@dataclass(eq=False)
class _Item:
    """One assistant message item of the provider: its audio as queued segments, and its words."""

    id: str
    response: Response
    index: int  # its sentence number within the shell's response
    content_index: int = 0
    segments: list[Segment] = field(default_factory=list)
    pending: bytes = b""  # less than a frame, waiting for the next delta
    transcript: str = ""
    script: str = ""  # the words we asked for (used when the provider sends no transcript)
    audio_done: bool = False

    def place_words(self) -> None:
        """Spread the item's words over its segments in proportion to time, so that what the shell
        keeps of a cut answer is what was played. While audio still arrives the item is assumed to
        last at least SECONDS_PER_WORD per word, so words not yet voiced are placed nowhere."""
        words = (self.transcript or self.script).split()
        self.response.revise_sentence(self.index, " ".join(words))
        if not self.segments:
            return
        ends = list(itertools.accumulate(segment.duration for segment in self.segments))
        total = ends[-1] if self.audio_done else max(ends[-1], len(words) * SECONDS_PER_WORD)
        placed: list[list[str]] = [[] for _ in self.segments]
        segment = 0
        for number, word in enumerate(words, start=1):
            at = number / len(words) * total
            while segment < len(ends) and at > ends[segment] + 1e-9:
                segment += 1
            if segment == len(ends):
                break
            placed[segment].append(word)
        for item_segment, part in zip(self.segments, placed, strict=True):
            item_segment.text = " ".join(part)

    def heard_ms(self, at: float) -> int:
        return round(sum(segment.heard_fraction(at) * segment.duration for segment in self.segments) * 1000)

    def received_ms(self) -> int:
        return round(sum(segment.duration for segment in self.segments) * 1000)


@dataclass(eq=False)
class _Turn:
    """One provider response, part of a shell response (an answer may take several: tool rounds)."""

    id: str
    response: Response
    first_index: int  # the shell response's first sentence number produced by this turn
    script: str = ""  # the words we asked for, if we did
    calls: list[ToolCall] = field(default_factory=list)
    output_bytes: int = 0


@dataclass(eq=False)
class _Request:
    """A response we ask the provider for: sent when no other response is under way (a server refuses
    a second one), then matched to its `response.created` by the metadata tag it echoes (servers
    that echo none: in order)."""

    response: Response
    event: dict[str, Any]
    tag: str
    script: str = ""


class SpeechToSpeechPipeline:
    """One per conversation: one provider socket, opened in `prepare`, closed in `aclose`."""

    name = "speech-to-speech"
    required_settings = REQUIRED_SETTINGS

    @classmethod
    def configuration_problems(cls) -> list[str]:
        return configuration_problems()

    def __init__(self) -> None:
        self.session: Conversation | None = None
        self.caller_cuts = True  # the agent's interruption mode is not `off`: caller speech cuts the agent
        self.url = settings.REALTIME_PROVIDER_URL.strip()
        self.model = settings.REALTIME_PROVIDER_MODEL.strip()
        self._api_key = settings.REALTIME_PROVIDER_API_KEY
        self.host = urlsplit(self.url).hostname or ""
        dialect = settings.REALTIME_PROVIDER_DIALECT
        self.dialect = dialect if dialect != "auto" else ("xai" if self.host == "api.x.ai" else "openai")
        self.provider = provider_name(self.host)
        self.input_format: dict[str, Any] = PCM_24K
        self.output_format: dict[str, Any] = PCM_24K
        self._client: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._out: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._resampler: Any = None
        self._event_ids = itertools.count(1)
        self._best_effort: set[str] = set()  # our events whose errors are races, not failures
        self._waiting: deque[_Request] = deque()  # not sent yet: another response is under way
        self._sent: deque[_Request] = deque()  # sent, before their response.created
        self._echoes_tags: bool | None = None  # whether the server echoes response metadata
        self._scripts: dict[Response, list[str]] = {}
        self._locked_words: dict[Response, int] = {}
        self._turns: dict[str, _Turn] = {}
        self._items: dict[str, _Item] = {}
        self._active: str | None = None  # the provider response being generated
        self._rounds: dict[Response, int] = {}
        self._speech_stopped_at: float | None = None
        self._input_bytes = 0  # caller audio appended since the last response.done (24 kHz)
        self._dropped = 0
        # Caller audio not sent yet: the open batch takes every chunk that arrives until the send loop
        # takes it (one append instead of one per 20 ms chunk when the socket or the loop falls behind;
        # an idle loop sends each chunk at once). Any other event closes it, so the order of the
        # provider's events is kept.
        self._audio_batch: bytearray | None = None
        self._pending_audio = 0
        # Caller audio goes out in appends of REALTIME_PROVIDER_APPEND_MS (100 ms, as LiveKit's
        # realtime plugins send): one provider message per 20 ms chunk was the largest single cost of a
        # loaded server's event loop (bench/session_load.py). The send loop holds an open batch until it
        # is that long, another event is queued behind it, or its first audio is that old.
        self._append_seconds = settings.REALTIME_PROVIDER_APPEND_MS / 1000
        self._append_bytes = int(PROVIDER_BYTES_PER_SECOND * self._append_seconds)
        self._batch_opened_at = 0.0
        self._batch_ready = asyncio.Event()

    @classmethod
    def preload(cls) -> None:
        """Nothing to load: the resampler's library (soxr) is imported with this module."""

    # --- the shell's side ----------------------------------------------------------------------

    async def prepare(self, session: Conversation) -> None:
        """Open the provider socket (before the call record exists: a provider that cannot be reached
        refuses the session)."""
        self.session = session
        self.caller_cuts = interruption_for(session.agent).mode != "off"
        self._resampler = soxr.ResampleStream(IN_RATE, PROVIDER_RATE, 1, dtype="int16", quality=RESAMPLE_QUALITY)
        headers = {"api-key": self._api_key} if self.host.endswith(".azure.com") else {}
        if self._api_key and not headers:
            headers["Authorization"] = f"Bearer {self._api_key}"
        self._client = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT_SECONDS))
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
                self._ws = await self._client.ws_connect(
                    provider_url(self.url, self.model), headers=headers, max_msg_size=0, heartbeat=30.0
                )
        except aiohttp.WSServerHandshakeError as exc:
            await self.aclose()
            hint = {401: " (check REALTIME_PROVIDER_API_KEY)", 403: " (check REALTIME_PROVIDER_API_KEY)"}.get(
                exc.status, " (check REALTIME_PROVIDER_URL and REALTIME_PROVIDER_MODEL)" if exc.status == 404 else ""
            )
            raise ProviderError(
                f"The speech-to-speech provider ({self.host}) refused the connection: HTTP {exc.status}{hint}",
                permanent=exc.status in (400, 401, 403, 404),
            ) from None
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            await self.aclose()
            raise ProviderError(
                f"Cannot reach the speech-to-speech provider ({self.host}): {type(exc).__name__}"
            ) from None
        session.recorder.log("info", "speech-to-speech provider connected", provider=self.provider, model=self.model)

    def begin(self) -> None:
        assert self.session is not None
        self.session.spawn(self._send_loop(), "provider-send")
        self.session.spawn(self._read_loop(), "provider-read")

    def push_audio(self, pcm16_16k: bytes) -> None:
        # The batch keeps the caller's 16 kHz audio; the send loop resamples it once per append (one
        # soxr call per 100 ms instead of one per 20 ms chunk). Sizes are counted at the provider's rate.
        if self._resampler is None or not pcm16_16k:
            return
        size = len(pcm16_16k) * PROVIDER_RATE // IN_RATE
        if self._pending_audio + size > MAX_PENDING_AUDIO_BYTES or self._out.qsize() >= MAX_PENDING_OUTPUT:
            self._dropped += 1
            if self._dropped == 1 and self.session is not None:
                self.session.recorder.log("warn", "the provider socket does not keep up; caller audio dropped")
            return
        self._input_bytes += size
        self._pending_audio += size
        batch = self._audio_batch
        if batch is not None and (len(batch) + len(pcm16_16k)) * PROVIDER_RATE // IN_RATE <= MAX_APPEND_BYTES:
            batch += pcm16_16k
        else:
            batch = self._audio_batch = bytearray(pcm16_16k)
            self._batch_opened_at = self.session.clock.now() if self.session is not None else 0.0
            self._out.put_nowait({"type": "input_audio_buffer.append", "audio": batch})
        if len(batch) * PROVIDER_RATE // IN_RATE >= self._append_bytes:
            self._batch_ready.set()

    def say(self, response: Response, text: str) -> None:
        """The shell's own words (disclosure, greeting): asked of the provider word for word at `end`."""
        text = text.strip()
        if text and not response.cancelled:
            self._scripts.setdefault(response, []).append(text)

    def end(self, response: Response) -> None:
        sentences = self._scripts.pop(response, [])
        if response.cancelled or not sentences:
            return
        self._locked_words[response] = sum(len(sentence.split()) for sentence in sentences[: response.locked])
        self._speak(response, " ".join(sentences))

    async def text_turn(self, text: str) -> None:
        """A caller turn as text (keys pressed on a phone): the provider answers it."""
        assert self.session is not None
        session = self.session
        if not await session.user_said(text):
            return
        self._queue(
            {
                "type": "conversation.item.create",
                "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
            }
        )
        now = session.clock.now()
        response = session.begin_response(turn_ended_at=now)
        response.answers(TurnTiming(turn_ended_at=now))
        self._request(response)

    def interrupt(self) -> None:
        """The shell cut the current response: stop the provider generating it, and cut its items in
        the provider's conversation to what the caller heard (the playout's account of it)."""
        assert self.session is not None
        session = self.session
        response = session.response
        if response is None:
            return
        active = self._turns.get(self._active or "")
        if active is not None and active.response is response:
            self._queue({"type": "response.cancel"}, best_effort=True)
        now = session.clock.now()
        lag = getattr(session.transport, "playback_lag", None)
        heard_by = now - lag(now) if lag is not None else now
        for item in self._items.values():
            if item.response is not response or not item.segments:
                continue
            heard, received = item.heard_ms(heard_by), item.received_ms()
            if heard >= received and item.audio_done:
                continue
            self._queue(
                {
                    "type": "conversation.item.truncate",
                    "item_id": item.id,
                    "content_index": item.content_index,
                    "audio_end_ms": heard,
                },
                best_effort=True,
            )
            session.recorder.log("info", "provider answer truncated", audioEndMs=heard, receivedMs=received)

    async def aclose(self) -> None:
        if self._ws is not None:
            await self._settle_usage()
            await self._ws.close()
        if self._client is not None:
            await self._client.close()

    async def _settle_usage(self) -> None:
        """The call ends while the provider is still answering: cancel the answer and wait (up to
        USAGE_WAIT_SECONDS) for the response.done of every answer it has begun, whose usage it bills, so
        that the call's usage has them. The session's reading stage has stopped: this reads the socket."""
        assert self._ws is not None
        if not self._turns or self._ws.closed:
            return
        deadline = asyncio.get_running_loop().time() + USAGE_WAIT_SECONDS
        try:
            if self._active is not None:
                await self._send({"type": "response.cancel", "event_id": f"va_{next(self._event_ids)}"})
            while self._turns:
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    return
                message = await self._ws.receive(timeout=remaining)
                if message.type != aiohttp.WSMsgType.TEXT:
                    return
                event = _event_of(message.data)
                if event is not None and event.get("type") == "response.done":
                    self._response_done(event.get("response") or {})
        except (TimeoutError, ProviderError, aiohttp.ClientError, RuntimeError):
            return  # the usage of what is left is not known

    # --- what we send --------------------------------------------------------------------------

    def _queue(self, event: dict[str, Any], *, best_effort: bool = False) -> None:
        self._audio_batch = None  # audio after this event goes after it
        self._batch_ready.set()  # and the batch before it goes now
        event["event_id"] = f"va_{next(self._event_ids)}"
        if best_effort:
            self._best_effort.add(event["event_id"])
        self._out.put_nowait(event)

    def _speak(self, response: Response, text: str) -> None:
        """Ask for `text` to be said word for word (the disclosure and greeting, a handoff)."""
        self._request(
            response,
            script=text,
            instructions=f'Say exactly the following words, word for word, and nothing else: "{text}"',
        )

    def _request(self, response: Response, *, script: str = "", instructions: str | None = None) -> None:
        tag = f"va_response_{next(self._event_ids)}"
        body: dict[str, Any] = {} if self.dialect == "xai" else {"metadata": {"voiceagent": tag}}
        if instructions is not None:
            body["instructions"] = instructions
            body["tool_choice"] = "none"
        event = {"type": "response.create", "response": body} if body else {"type": "response.create"}
        self._waiting.append(_Request(response=response, event=event, tag=tag, script=script))
        self._pump()

    def _pump(self) -> None:
        """Send the next waiting response.create once no response is under way."""
        while self._waiting and self._waiting[0].response.cancelled:
            self._waiting.popleft()  # the caller spoke meanwhile: the provider answers that instead
        if self._active is None and not self._sent and self._waiting:
            request = self._waiting.popleft()
            self._sent.append(request)
            self._queue(request.event)

    def _created(self, response: dict[str, Any]) -> _Request | None:
        """Which of our requests a `response.created` answers (None: the server's own, server VAD)."""
        metadata = response.get("metadata")
        tag = metadata.get("voiceagent") if isinstance(metadata, dict) else None
        if self._echoes_tags is None and self._sent and tag is not None:
            self._echoes_tags = True
        if self._echoes_tags:
            request = next((request for request in self._sent if request.tag == tag), None)
            if request is not None:
                self._sent.remove(request)
            return request
        return self._sent.popleft() if self._sent else None

    async def handed_off(self) -> None:
        """The call was handed to another agent (`session.agent` now): the provider's session takes its
        instructions and tools. The voice stays: a provider keeps the voice of a session that has spoken."""
        assert self.session is not None
        update = self.session_update()
        update["session"].pop("voice", None)
        update["session"]["audio"]["output"].pop("voice", None)
        self.session.recorder.log(
            "info", "provider session configured", tools=[tool["name"] for tool in update["session"]["tools"]]
        )
        self._queue(update)

    def session_update(self) -> dict[str, Any]:
        assert self.session is not None
        session = self.session
        agent_voice = session.agent.voice_name
        mapping = OPENAI_VOICES if self.dialect == "openai" else {}
        voice = settings.REALTIME_PROVIDER_VOICES.get(agent_voice) or mapping.get(agent_voice, agent_voice)
        turn_detection = {
            "type": "server_vad",
            "threshold": 0.5,
            "prefix_padding_ms": 300,
            "silence_duration_ms": int(settings.VAD_END_SILENCE_MS),
            "create_response": True,
            "interrupt_response": False,  # barge-in is ours: the disclosure is never cut
        }
        config: dict[str, Any] = {
            "type": "realtime",
            "instructions": instructions_for(session),
            "output_modalities": ["audio"],
            "tools": [
                {"type": "function", "name": tool.name, "description": tool.description, "parameters": tool.parameters}
                for tool in session.context.tools
            ],
            "tool_choice": "auto",
        }
        audio_in: dict[str, Any] = {"format": self.input_format}
        if self.dialect == "xai":
            config.update(voice=voice, turn_detection=turn_detection)
        else:
            audio_in["turn_detection"] = turn_detection
            model = settings.REALTIME_PROVIDER_TRANSCRIPTION_MODEL.strip()
            if model:
                language = (session.context.language or session.agent.language).split("-")[0].lower()
                audio_in["transcription"] = {"model": model, "language": language}
        config["audio"] = {"input": audio_in, "output": {"format": self.output_format}}
        if self.dialect != "xai":
            config["audio"]["output"]["voice"] = voice
        return {"type": "session.update", "session": config}

    async def _send_loop(self) -> None:
        assert self._ws is not None and self.session is not None
        update = self.session_update()
        self.session.recorder.log(
            "info",
            "provider session configured",
            voice=update["session"].get("voice") or update["session"]["audio"]["output"].get("voice"),
            tools=[tool["name"] for tool in update["session"]["tools"]],
        )
        await self._send(update)
        while True:
            event = await self._out.get()
            audio = event.get("audio")
            if isinstance(audio, bytearray):  # a batch of caller audio: closed now, sent as one append
                if audio is self._audio_batch and len(audio) * PROVIDER_RATE // IN_RATE < self._append_bytes:
                    self._batch_ready.clear()
                    await self.session.clock.sleep_until(
                        self._batch_opened_at + self._append_seconds, self._batch_ready
                    )
                if audio is self._audio_batch:
                    self._audio_batch = None
                self._pending_audio -= len(audio) * PROVIDER_RATE // IN_RATE
                samples = self._resampler.resample_chunk(np.frombuffer(audio, dtype="<i2"))
                if not len(samples):
                    continue  # the resampler holds back its first milliseconds
                event = {
                    "type": "input_audio_buffer.append",
                    "audio": base64.b64encode(samples.astype("<i2").tobytes()).decode("ascii"),
                    "event_id": f"va_{next(self._event_ids)}",
                }
            await self._send(event)

    async def _send(self, event: dict[str, Any]) -> None:
        assert self._ws is not None
        try:
            await self._ws.send_str(json.dumps(event, separators=(",", ":")))
        except (ConnectionError, aiohttp.ClientError, RuntimeError) as exc:
            raise ProviderError(f"The speech-to-speech provider connection was lost ({type(exc).__name__})") from None

    # --- what we receive -----------------------------------------------------------------------

    async def _read_loop(self) -> None:
        assert self._ws is not None
        async for message in self._ws:
            if message.type == aiohttp.WSMsgType.TEXT:
                event = _event_of(message.data)
                if event is not None:
                    await self._handle(event)
            elif message.type == aiohttp.WSMsgType.ERROR:
                break
        code = self._ws.close_code
        raise ProviderError("The speech-to-speech provider closed the connection" + (f" (code {code})" if code else ""))

    async def _handle(self, event: dict[str, Any]) -> None:
        kind = event.get("type", "")
        # Beta names -> GA names (protocols.md 3.3).
        kind = kind.replace("response.audio.", "response.output_audio.").replace(
            "response.audio_transcript.", "response.output_audio_transcript."
        )
        handler = _HANDLERS.get(kind)
        if handler is not None:
            await handler(self, event)

    async def _on_error(self, event: dict[str, Any]) -> None:
        assert self.session is not None
        error = event.get("error") or {}
        message = _redact(str(error.get("message") or "unknown error"), self._api_key)[:ERROR_DETAIL_CHARS]
        code = error.get("code") or error.get("type") or ""
        if error.get("event_id") in self._best_effort or code in ("response_cancel_not_active",):
            self.session.recorder.log("warn", "provider refused a cancel or truncate", code=code, reason=message)
            return
        refused = next(
            (request for request in self._sent if request.event.get("event_id") == error.get("event_id")), None
        )
        if refused is not None and code == "conversation_already_has_active_response":
            # The server began an answer of its own first (server VAD): ask again once it is done.
            self._sent.remove(refused)
            self._waiting.appendleft(refused)
            self.session.recorder.log("warn", "provider busy; response asked again after the current one")
            return
        raise ProviderError(f"The speech-to-speech provider reported an error: {code + ': ' if code else ''}{message}")

    async def _on_speech_started(self, event: dict[str, Any]) -> None:
        assert self.session is not None
        session = self.session
        session.user_speaking = True
        response = session.response
        now = session.clock.now()
        if response is None or response.done or response.cancelled or session.transferring:
            return
        # Any answer still playing that must be heard whole (the disclosure, a handoff): not even an
        # answer the provider began after it (the caller spoke during the disclosure) cuts it.
        for playing, words in self._locked_words.items():
            if not (playing.done or playing.cancelled) and len(playing.heard_text(now).split()) < words:
                session.recorder.log("debug", "caller speech during the disclosure; not interrupted")
                return
        # The provider's voice activity detection tells speech, not words: `adaptive` and `vad` both cut
        # here (the provider's own threshold keeps short noises out); `off` never cuts, and the provider
        # answers what was said once its answer has played.
        if not self.caller_cuts:
            return
        session.recorder.log("info", "barge-in")
        session.interruption("real", 0)
        await session.interrupt(now)

    async def _on_speech_stopped(self, event: dict[str, Any]) -> None:
        assert self.session is not None
        self.session.user_speaking = False
        self._speech_stopped_at = self.session.clock.now()

    async def _on_user_transcript(self, event: dict[str, Any]) -> None:
        assert self.session is not None
        await self.session.user_said(str(event.get("transcript") or ""), interrupt=False)

    async def _on_response_created(self, event: dict[str, Any]) -> None:
        assert self.session is not None
        session = self.session
        body = event.get("response") or {}
        response_id = str(body.get("id") or uuid.uuid4().hex)
        request = self._created(body)
        self._forget_finished()
        if request is not None:
            response = request.response
        else:  # the provider answers the caller's turn by itself (server VAD)
            response = session.begin_response(turn_ended_at=self._speech_stopped_at)
            # The provider's own voice activity detection took the turn: its end-of-turn wait and
            # recognition happen inside the provider, so the turn is timed from its speech_stopped.
            if self._speech_stopped_at is not None:
                response.answers(TurnTiming(turn_ended_at=self._speech_stopped_at))
        script = request.script if request is not None else ""
        turn = _Turn(id=response_id, response=response, first_index=len(response.sentences), script=script)
        self._turns[response_id] = turn
        self._active = response_id
        if response.cancelled:
            self._queue({"type": "response.cancel"}, best_effort=True)

    def _forget_finished(self) -> None:
        """Drop what is kept of answers that have played or were cut (their audio above all: a long
        call must not keep every frame it played)."""

        def finished(response: Response) -> bool:
            return response.done or response.cancelled

        self._items = {key: item for key, item in self._items.items() if not finished(item.response)}
        for table in (self._locked_words, self._rounds):
            for response in [response for response in table if finished(response)]:
                del table[response]

    def _turn(self, event: dict[str, Any]) -> _Turn | None:
        response_id = event.get("response_id") or self._active
        return self._turns.get(str(response_id)) if response_id else None

    def _item(self, event: dict[str, Any]) -> _Item | None:
        item_id = str(event.get("item_id") or "")
        item = self._items.get(item_id)
        if item is not None:
            return item
        turn = self._turn(event)
        if turn is None:
            return None
        response = turn.response
        item = _Item(
            id=item_id,
            response=response,
            index=response.add_sentence(""),
            content_index=int(event.get("content_index") or 0),
            script=turn.script,
        )
        self._items[item_id] = item
        return item

    def _first_token(self, turn: _Turn | None) -> None:
        if turn is not None and turn.response.timing is not None and self.session is not None:
            turn.response.timing.first_token(self.session.clock.now())

    async def _on_audio_delta(self, event: dict[str, Any]) -> None:
        item, turn = self._item(event), self._turn(event)
        if item is None or turn is None or item.response.cancelled:
            return
        self._first_token(turn)
        pcm = base64.b64decode(event.get("delta") or "")
        turn.output_bytes += len(pcm)
        pcm = item.pending + pcm
        whole = len(pcm) - len(pcm) % OUT_FRAME_BYTES
        item.pending = pcm[whole:]
        if whole:
            self._play(item, pcm[:whole])

    def _play(self, item: _Item, audio: bytes) -> None:
        assert self.session is not None
        response = item.response
        before = len(response.segments)
        self.session.play(response, "", audio, item.index)
        if len(response.segments) > before:
            item.segments.append(response.segments[-1])
            item.place_words()

    async def _on_audio_done(self, event: dict[str, Any]) -> None:
        item = self._item(event)
        if item is not None:
            self._finish_audio(item)

    def _finish_audio(self, item: _Item) -> None:
        if item.audio_done:
            return
        item.audio_done = True
        if item.pending and not item.response.cancelled:
            self._play(item, item.pending + b"\x00" * (OUT_FRAME_BYTES - len(item.pending)))
        item.pending = b""
        item.place_words()

    async def _on_transcript_delta(self, event: dict[str, Any]) -> None:
        item = self._item(event)
        self._first_token(self._turn(event))
        if item is not None:
            item.transcript += str(event.get("delta") or "")
            item.place_words()

    async def _on_transcript_done(self, event: dict[str, Any]) -> None:
        item = self._item(event)
        if item is not None and isinstance(event.get("transcript"), str):
            item.transcript = event["transcript"]
            item.place_words()

    async def _on_function_call(self, event: dict[str, Any]) -> None:
        turn = self._turn(event)
        self._first_token(turn)
        if turn is not None:
            self._add_call(turn, event)

    def _add_call(self, turn: _Turn, call: dict[str, Any]) -> None:
        call_id = str(call.get("call_id") or f"call_{uuid.uuid4().hex}")
        name = str(call.get("name") or "")
        if not name or any(known.id == call_id for known in turn.calls):
            return
        arguments = call.get("arguments")
        parsed = arguments if isinstance(arguments, dict) else parse_arguments(str(arguments or ""), name)
        turn.calls.append(ToolCall(id=call_id, name=name, arguments=parsed))

    async def _on_response_done(self, event: dict[str, Any]) -> None:
        assert self.session is not None
        session = self.session
        body = event.get("response") or {}
        turn = self._response_done(body)
        self._pump()
        if turn is None:
            return
        for item in [item for item in self._items.values() if item.response is turn.response]:
            self._finish_audio(item)
        for output in body.get("output") or ():  # servers that send calls only in response.done
            if isinstance(output, dict) and output.get("type") == "function_call":
                self._add_call(turn, output)
        status = body.get("status")
        if status == "failed":
            details = body.get("status_details") or {}
            error = details.get("error") or {}
            reason = _redact(str(error.get("message") or error.get("code") or "failed"), self._api_key)
            raise ProviderError(f"The speech-to-speech provider's answer failed: {reason[:ERROR_DETAIL_CHARS]}")
        response = turn.response
        if turn.calls:
            session.spawn(self._run_tools(turn), "provider-tools")
        elif not response.cancelled:
            session.finish_response(response)

    def _response_done(self, body: dict[str, Any]) -> _Turn | None:
        """The provider has finished a response (`body`, its response.done): no response is under way,
        its usage is recorded; its turn, if it was one we know."""
        turn = self._turns.pop(str(body.get("id") or self._active or ""), None)
        if turn is None and self._active is not None:
            turn = self._turns.pop(self._active, None)
        self._active = None
        self._record_usage(body, turn)
        return turn

    def _record_usage(self, body: dict[str, Any], turn: _Turn | None) -> None:
        assert self.session is not None
        usage = body.get("usage") or {}
        output_seconds = (turn.output_bytes if turn is not None else 0) / PROVIDER_BYTES_PER_SECOND
        input_seconds = self._input_bytes / PROVIDER_BYTES_PER_SECOND
        self._input_bytes = 0
        input_details = usage.get("input_token_details") or {}
        output_details = usage.get("output_token_details") or {}
        self.session.recorder.llm_usage(
            provider=self.provider,
            model=self.model,
            product=CostProduct.SPEECH_TO_SPEECH,
            input_tokens=reported_tokens(usage, "input_tokens"),
            output_tokens=reported_tokens(usage, "output_tokens"),
            cached_input_tokens=reported_tokens(input_details, "cached_tokens"),
            input_audio_tokens=reported_tokens(input_details, "audio_tokens"),
            output_audio_tokens=reported_tokens(output_details, "audio_tokens"),
            input_audio_seconds=round(input_seconds, 3),
            output_audio_seconds=round(output_seconds, 3),
        )

    async def _run_tools(self, turn: _Turn) -> None:
        """Run the provider's calls through the shell's dispatcher and give it the results. A caller who
        barges in meanwhile gets the provider's answer to their new turn; the results are still given
        so that the provider's conversation stays valid."""
        assert self.session is not None
        session = self.session
        response = turn.response
        outcomes = [await session.run_tool(call) for call in turn.calls]
        said = " ".join(text for text in response.sentences[turn.first_index :] if text)
        if not response.cancelled:
            session.tool_round(response, said, turn.calls, outcomes)
        for call, outcome in zip(turn.calls, outcomes, strict=True):
            self._queue(
                {
                    "type": "conversation.item.create",
                    "item": {"type": "function_call_output", "call_id": call.id, "output": outcome.result},
                }
            )
        if response.cancelled:
            return
        if response.passes_on:  # a transfer, or a handoff to another agent
            announcement = session.passing_sentence(response)
            self._locked_words[response] = 10**6  # not cut (the shell is passing the call on anyway)
            self._speak(response, announcement)
            return
        if response.then_end is not None:  # end_call: the goodbye plays (a default one if none was said)
            self._locked_words[response] = 10**6
            if said.strip():
                session.finish_response(response)
            else:
                self._speak(response, session.goodbye_sentence())
            return
        rounds = self._rounds[response] = self._rounds.get(response, 0) + 1
        if rounds >= MAX_TOOL_ROUNDS:
            self._request(response, instructions="Answer the caller now with what you know; do not call tools.")
        else:
            self._request(response)


_HANDLERS = {
    "error": SpeechToSpeechPipeline._on_error,
    "input_audio_buffer.speech_started": SpeechToSpeechPipeline._on_speech_started,
    "input_audio_buffer.speech_stopped": SpeechToSpeechPipeline._on_speech_stopped,
    "conversation.item.input_audio_transcription.completed": SpeechToSpeechPipeline._on_user_transcript,
    "response.created": SpeechToSpeechPipeline._on_response_created,
    "response.output_audio.delta": SpeechToSpeechPipeline._on_audio_delta,
    "response.output_audio.done": SpeechToSpeechPipeline._on_audio_done,
    "response.output_audio_transcript.delta": SpeechToSpeechPipeline._on_transcript_delta,
    "response.output_audio_transcript.done": SpeechToSpeechPipeline._on_transcript_done,
    "response.function_call_arguments.done": SpeechToSpeechPipeline._on_function_call,
    "response.done": SpeechToSpeechPipeline._on_response_done,
}

__all__: Sequence[str] = ("SpeechToSpeechPipeline",)
