"""Real servers and a scripted voice client, shared by the socket tests and bench/voice_latency.py.

`DaphneServer` runs `daphne voiceagent.asgi:application` as a separate process on a free loopback
port against a given database (`start_test_server`/`stop_test_server`: on the test database);
`VoiceClient` speaks the browser protocol over a real WebSocket (aiohttp), streaming PCM in 20 ms
chunks at real time like a microphone; `record_voice` gives it reproducible eSpeak NG speech.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import numpy as np

REPO = Path(__file__).resolve().parents[2]
CHUNK_MS = 20
IN_RATE = 16000
OUT_RATE = 24000


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url(settings_dict: dict[str, Any]) -> str:
    """A DATABASE_URL naming the database Django is using now (for example the test database)."""
    engine, name = settings_dict["ENGINE"], settings_dict["NAME"]
    if engine.endswith("sqlite3"):
        return f"sqlite:///{name}"
    user = quote(settings_dict.get("USER") or "")
    password = settings_dict.get("PASSWORD") or ""
    auth = f"{user}:{quote(password)}@" if password else (f"{user}@" if user else "")
    return f"postgres://{auth}{settings_dict.get('HOST') or '127.0.0.1'}:{settings_dict.get('PORT') or 5432}/{name}"


class DaphneServer:
    """One server process; `env` is added to this process's environment."""

    def __init__(self, *, env: dict[str, str], port: int | None = None, log_path: Path | None = None) -> None:
        self.port = port or free_port()
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **env}
        self.env.pop("DJANGO_SETTINGS_MODULE", None)
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0) -> DaphneServer:
        output = open(self.log_path, "wb") if self.log_path else subprocess.DEVNULL
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "voiceagent.server",
                "-b",
                "127.0.0.1",
                "-p",
                str(self.port),
                "voiceagent.asgi:application",
            ],
            cwd=REPO,
            env=self.env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"daphne exited with {self.process.returncode}; see {self.log_path}")
            try:
                with urllib.request.urlopen(f"{self.http_url}/livez", timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("daphne did not start in time")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> DaphneServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _application_name(port: int) -> str:
    return f"voiceagent-test-server-{port}"


def start_test_server(tmp_path_factory: Any, name: str, env: dict[str, str] | None = None) -> DaphneServer:
    """A server process on the database of the running tests (pytest), its log in a temporary
    directory; `env` adds settings (OUTBOUND_ALLOWED_NETWORKS, LLM_PROVIDER...)."""
    from django.db import connection

    from realtime.tests.conftest import SECRET

    port = free_port()
    url = database_url(connection.settings_dict)
    if connection.vendor == "postgresql":
        url += f"?application_name={_application_name(port)}"  # its connections, for stop_test_server
    base = {
        "DATABASE_URL": url,
        "REALTIME_TOKEN_SECRET": SECRET,
        "REALTIME_WS_URL": f"ws://127.0.0.1:{port}",
        "DATABASE_POOL": "false",
        # No upkeep sweep of its own unless a test asks (env): a module's server lives across tests,
        # and a sweep overlapping the flush between two tests could deadlock it on PostgreSQL.
        "CALLS_MAINTENANCE_AT_START": "false",
        "CALLS_MAINTENANCE_SECONDS": "0",
    }
    log = tmp_path_factory.mktemp("daphne") / f"{name}.log"
    return DaphneServer(env={**base, **(env or {})}, port=port, log_path=log).start()


def stop_test_server(server: DaphneServer) -> None:
    """Stop it and, on PostgreSQL, wait until its connections are gone (the test database is dropped
    at the end of the run)."""
    from django.db import connection

    server.stop()
    if connection.vendor != "postgresql":
        return
    for _ in range(100):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = %s",
                [_application_name(server.port)],
            )
            if cursor.fetchone()[0] == 0:
                return
        time.sleep(0.05)


def in_thread(function: Any) -> Any:
    """Runs a database call outside the thread that Playwright's event loop runs in (Django refuses
    synchronous queries in a thread with a running loop), closing that thread's connection after."""
    from django.db import connections

    def run() -> Any:
        try:
            return function()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(run).result()


def wait_until_indexed(
    list_documents: Callable[[], list[dict[str, Any]]], document_id: str, *, timeout: float = 120
) -> dict[str, Any]:
    """Poll an agent's knowledge list (a callable that GETs it through the API) until the document is no
    longer `processing` (ingestion runs after the upload answers); its list item. TimeoutError otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        item = next((d for d in list_documents() if d["id"] == document_id), None)
        if item is None:
            raise LookupError(f"document {document_id} is not listed")
        if item["status"] != "processing":
            return item
        if time.monotonic() > deadline:
            raise TimeoutError(f"document {document_id} still processing after {timeout} s")
        time.sleep(0.1)


def to_16k(pcm16_24k: bytes) -> bytes:
    import soxr

    samples = np.frombuffer(pcm16_24k, dtype="<i2")
    return soxr.resample(samples, OUT_RATE, IN_RATE).astype("<i2").tobytes()


_RECORD = """
import ctypes, pathlib, sys
import espeakng_loader
from realtime.engine.speech.tts import synthesize
sentence, path, voice = sys.argv[1:4]
espeak, libc = ctypes.CDLL(espeakng_loader.get_library_path()), ctypes.CDLL(None)
def seeded(text):  # the breath noise draws on eSpeak NG's own generator and on libc's rand()
    espeak.espeak_ng_SetRandSeed(ctypes.c_long(7))
    libc.srand(7)
    return synthesize(text, language="en-US", voice_name=voice)
synthesize("ok", language="en-US", voice_name=voice)  # loads the library (which seeds from the clock)
seeded("ok")
pathlib.Path(path).write_bytes(seeded(sentence))
"""


def record_voice(sentences: tuple[str, ...], folder: Path, voice_name: str = "eve") -> dict[str, bytes]:
    """A caller's sentences as PCM16 16 kHz, the same recordings in every run. eSpeak NG adds random
    breath noise to every sentence and carries state from one sentence to the next, and offline
    recognition is sensitive to both (a word heard right in one run is misheard in the next); each
    sentence synthesized in a fresh process from a fixed seed is always the same audio, whatever
    else is said."""
    processes = [
        subprocess.Popen([sys.executable, "-c", _RECORD, sentence, str(folder / f"{index}.pcm"), voice_name], cwd=REPO)
        for index, sentence in enumerate(sentences)
    ]
    for process in processes:
        if process.wait(timeout=60) != 0:
            raise RuntimeError(f"recording a sentence failed with {process.returncode}")
    return {sentence: to_16k((folder / f"{index}.pcm").read_bytes()) for index, sentence in enumerate(sentences)}


def rms(pcm16: bytes) -> float:
    samples = np.frombuffer(pcm16, dtype="<i2").astype(np.float64)
    return float(np.sqrt(np.mean(samples**2))) if samples.size else 0.0


@dataclass
class Received:
    at: float  # loop time
    message: dict[str, Any]


@dataclass
class VoiceClient:
    """A browser-like client: a reader task keeps every message with its arrival time."""

    url: str
    messages: list[Received] = field(default_factory=list)
    close_code: int | None = None
    close_error: BaseException | None = None  # why the socket ended without a close frame, when it did
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)
    _session: aiohttp.ClientSession | None = None
    _ws: aiohttp.ClientWebSocketResponse | None = None
    _reader: asyncio.Task[None] | None = None
    on_message: Callable[[Received], None] | None = None
    chunk_ms: int = CHUNK_MS

    async def __aenter__(self) -> VoiceClient:
        self._session = aiohttp.ClientSession()
        self._ws = await self._session.ws_connect(self.url, max_msg_size=0, heartbeat=None)
        self._reader = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._ws is not None and not self._ws.closed:
            await self._ws.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        if self._session is not None:
            await self._session.close()

    async def _read(self) -> None:
        assert self._ws is not None
        loop = asyncio.get_running_loop()
        async for raw in self._ws:
            if raw.type == aiohttp.WSMsgType.TEXT:
                item = Received(at=loop.time(), message=json.loads(raw.data))
                self.messages.append(item)
                if self.on_message is not None:
                    self.on_message(item)
                self._arrived.set()
        self.close_code = self._ws.close_code
        self.close_error = self._ws.exception()
        self._arrived.set()

    @property
    def closed(self) -> bool:
        return self._reader is not None and self._reader.done()

    async def send(self, message: dict[str, Any]) -> None:
        assert self._ws is not None
        await self._ws.send_str(json.dumps(message))

    async def send_raw(self, data: str | bytes) -> None:
        assert self._ws is not None
        if isinstance(data, bytes):
            await self._ws.send_bytes(data)
        else:
            await self._ws.send_str(data)

    async def drop(self) -> int | None:
        """The client's network goes away: the TCP connection ends without a WebSocket close frame
        (the server sees 1006). Returns once the reader has seen the end."""
        await drop_connection(self._ws, self._reader)
        return self.close_code

    async def send_audio(self, pcm16_16k: bytes) -> None:
        await self.send({"type": "input_audio", "audio": base64.b64encode(pcm16_16k).decode("ascii")})

    async def stream(self, pcm16_16k: bytes, *, stop_when: Callable[[], bool] | None = None) -> float:
        """Send audio in chunk_ms chunks (20 ms unless set) at real time, each chunk once its audio has
        been "recorded"; returns the loop time at which the last chunk's audio ends."""
        loop = asyncio.get_running_loop()
        size = IN_RATE * 2 * self.chunk_ms // 1000
        start = loop.time()
        for index, offset in enumerate(range(0, len(pcm16_16k), size)):
            if stop_when is not None and stop_when():
                return loop.time()
            delay = start + index * self.chunk_ms / 1000 - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            await self.send_audio(pcm16_16k[offset : offset + size])
        end = start + len(pcm16_16k) / (IN_RATE * 2)
        await asyncio.sleep(max(0.0, end - loop.time()))  # a microphone cannot run ahead of time
        return end

    async def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], *, after: int = 0, timeout: float = 30
    ) -> int:
        """Index of the first message from `after` on that matches; TimeoutError otherwise."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            for index in range(after, len(self.messages)):
                if predicate(self.messages[index].message):
                    return index
            if self.closed:
                raise ConnectionError(f"socket closed ({self.close_code}) while waiting")
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise TimeoutError("no matching message")
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), remaining)

    async def wait_closed(self, timeout: float = 30) -> int | None:
        assert self._reader is not None
        await asyncio.wait_for(asyncio.shield(self._reader), timeout)
        return self.close_code

    def audio(self, start: int = 0, end: int | None = None) -> bytes:
        return b"".join(
            base64.b64decode(item.message["audio"])
            for item in self.messages[start:end]
            if item.message.get("type") == "output_audio"
        )


async def drop_connection(ws: aiohttp.ClientWebSocketResponse | None, reader: asyncio.Task[None] | None) -> None:
    """End a client socket's TCP connection without a closing handshake (a dropped network)."""
    import socket as socket_module

    assert ws is not None
    sock = ws.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket_module.SHUT_RDWR)
    if reader is not None:
        await asyncio.wait([reader], timeout=10)


def is_type(kind: str, **fields: Any) -> Callable[[dict[str, Any]], bool]:
    return lambda message: message.get("type") == kind and all(message.get(k) == v for k, v in fields.items())


class RedisServer:
    """A redis-server of a test's or bench's own, on a port of its own, without persistence (a restart
    forgets everything, as a Redis restarted without a volume does)."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 15) -> RedisServer:
        import redis

        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port)
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.ping()
                return self
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    self.kill()
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)
            finally:
                client.close()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def recreate_postgres_database(url: str) -> None:
    """Drop and create the PostgreSQL database named by `url` (a bench's own database)."""
    import psycopg

    base, _, name = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
