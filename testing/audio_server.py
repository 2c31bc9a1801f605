"""A scripted OpenAI-compatible audio server (the test double of ASR_PROVIDER=openai and
TTS_PROVIDER=openai), run on a loop of its own in a thread, so that blocking clients in the test's
process and a Daphne process alike can call it.

    with AudioServer() as server:
        server.transcribe(Transcript("i would like a table"), Failure(503))
        server.speak(Speech(chunks=4), Failure(401))
        ... ASR_BASE_URL = TTS_BASE_URL = server.base_url ...

`POST /v1/audio/transcriptions` takes a multipart upload the way OpenAI does: a `file` that must be
a WAV file of 16-bit mono audio at 16 kHz (anything else is a 400, as a strict server would answer),
`model`, and the optional `language`, `prompt` and `response_format` (json, or text); it answers
the next scripted item (`{"text": ...}`). `POST /v1/audio/speech` takes `{"model", "input", "voice",
"response_format"}` and streams raw PCM16 mono in several chunks (the next scripted `Speech`, or
`fallback_speech` once the script is used up): a constant level per voice (`level_for`), 100 ms per
word, so that a test can tell which voice spoke and for how long. `Failure` answers an OpenAI-style
error; `delay` holds an answer back, and `Speech.stall_after` stops a stream after some chunks, so
that a client's timeouts can be tested. Every request is recorded (`requests`).
"""

from __future__ import annotations

import io
import json
import wave
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from aiohttp import web

from testing.servers import ScriptedServer

WORD_MS = 100
# Each provider voice speaks at its own constant sample value: tests tell voices apart by it.
VOICE_LEVELS = {"alloy": 1100, "nova": 1200, "onyx": 1300, "echo": 1400, "fable": 1500}


def level_for(voice: str) -> int:
    return VOICE_LEVELS.get(voice, 1900)


@dataclass(frozen=True)
class Transcript:
    text: str
    delay: float = 0.0


@dataclass(frozen=True)
class Speech:
    """Raw PCM16 mono at `rate` for the request's input, in `chunks` parts; `stall_after` chunks
    the stream stops sending (the connection stays open) until the server stops."""

    rate: int = 24000
    chunks: int = 4
    delay: float = 0.0
    stall_after: int | None = None
    wav: bool = False  # answer a WAV file instead (some servers do whatever was asked)


@dataclass(frozen=True)
class Failure:
    status: int
    message: str = "Something went wrong"
    delay: float = 0.0


@dataclass
class AudioRequest:
    path: str
    headers: dict[str, str]
    fields: dict[str, str] = field(default_factory=dict)  # multipart fields, or the JSON body
    audio: bytes = b""  # the uploaded WAV file's PCM
    rate: int = 0


class AudioServer(ScriptedServer):
    thread_name = "audio-server"
    client_max_size = 30 * 1024 * 1024

    def __init__(self, *, fallback_speech: Speech | None = Speech(), host: str = "127.0.0.1") -> None:
        super().__init__(host=host)
        self.fallback_speech = fallback_speech
        self.requests: list[AudioRequest] = []
        self._transcripts: deque[Transcript | Failure] = deque()
        self._speech: deque[Speech | Failure] = deque()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def transcribe(self, *items: Transcript | Failure) -> AudioServer:
        self._transcripts.extend(items)
        return self

    def speak(self, *items: Speech | Failure) -> AudioServer:
        self._speech.extend(items)
        return self

    def of(self, path: str) -> list[AudioRequest]:
        return [request for request in self.requests if request.path.endswith(path)]

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/audio/transcriptions", self._transcription)
        app.router.add_post("/v1/audio/speech", self._speech_answer)

    # --- handlers ------------------------------------------------------------------------------
    async def _transcription(self, request: web.Request) -> web.Response:
        recorded = AudioRequest(path=request.path, headers=dict(request.headers))
        self.requests.append(recorded)
        self.arrived.notify()
        if not request.content_type.startswith("multipart/form-data"):
            return _error(400, "The request must be multipart/form-data")
        form = await request.post()
        upload = form.get("file")
        recorded.fields = {key: str(value) for key, value in form.items() if key != "file"}
        if not isinstance(upload, web.FileField):
            return _error(400, "No file was uploaded")
        try:
            with wave.open(io.BytesIO(upload.file.read()), "rb") as source:
                shape = (source.getnchannels(), source.getsampwidth(), source.getframerate())
                recorded.audio = source.readframes(source.getnframes())
                recorded.rate = shape[2]
        except (wave.Error, EOFError):
            return _error(400, "The file is not a valid WAV file")
        if shape != (1, 2, 16000):
            return _error(400, f"Expected 16-bit mono 16 kHz audio, got {shape}")
        if not recorded.fields.get("model"):
            return _error(400, "model is required")
        item = self._transcripts.popleft() if self._transcripts else Failure(500, "The test script has no transcript")
        if item.delay and await self.interrupted(item.delay):
            return _error(503, "The test server is stopping")
        if isinstance(item, Failure):
            return _error(item.status, item.message)
        if recorded.fields.get("response_format") == "text":
            return web.Response(text=item.text)
        return web.json_response({"text": item.text})

    async def _speech_answer(self, request: web.Request) -> web.StreamResponse:
        recorded = AudioRequest(path=request.path, headers=dict(request.headers))
        self.requests.append(recorded)
        self.arrived.notify()
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "The body is not JSON")
        recorded.fields = {key: str(value) for key, value in body.items()}
        if not body.get("model") or not body.get("input") or not body.get("voice"):
            return _error(400, "model, input and voice are required")
        item = self._speech.popleft() if self._speech else self.fallback_speech
        if item is None:
            return _error(500, "The test script has no speech")
        if item.delay and await self.interrupted(item.delay):
            return _error(503, "The test server is stopping")
        if isinstance(item, Failure):
            return _error(item.status, item.message)
        samples = len(str(body["input"]).split()) * WORD_MS * item.rate // 1000
        pcm = np.full(samples, level_for(str(body["voice"])), dtype="<i2").tobytes()
        if item.wav:
            return web.Response(body=_wav(pcm, item.rate), content_type="audio/wav")
        response = web.StreamResponse(headers={"Content-Type": "audio/pcm"})
        await response.prepare(request)
        size = -(-len(pcm) // item.chunks)
        size += size % 2  # whole samples in each chunk but the last ones
        for index, start in enumerate(range(0, len(pcm), size)):
            if item.stall_after is not None and index == item.stall_after:
                await self.interrupted(3600)
                return response
            await response.write(pcm[start : start + size])
        await response.write_eof()
        return response


def _wav(pcm: bytes, rate: int) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(pcm)
    return buffer.getvalue()


def _error(status: int, message: str) -> web.Response:
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}
    return web.Response(text=json.dumps(body), status=status, content_type="application/json")


def as_samples(pcm: bytes) -> Any:
    return np.frombuffer(pcm, dtype="<i2")
