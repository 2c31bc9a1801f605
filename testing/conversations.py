"""A browser caller's conversation with an agent of a server (a real one, or in-process) (the embedded brain's end-to-end tests):
the caller waits for the greeting, then speaks recorded sentences one by one, each time waiting for the
agent's whole answer (`Exchange`: what the server heard, what the agent said, the events in between)."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Self

from asgiref.sync import sync_to_async

from realtime import tokens
from testing.clients import VoiceClient, is_type
from testing.daphne import DaphneServer
from testing.inprocess import InProcessServer

Server = DaphneServer | InProcessServer  # a real process, or the application in the test's (testing/inprocess.py)


def agent_for(owner: Any, make_agent: Any, *, name: str, instructions: str, **fields: Any) -> Any:
    """An active agent that introduces itself briefly ("Hi, I'm <name>, an AI agent.")."""
    values = {
        "status": "active",
        "identity": "",
        "ai_identity_disclosure_template_id": "named_agent",
        "greeting_type": "none",
        **fields,
    }
    return make_agent(owner.organization, name=name, instructions=instructions, **values)


def silence(ms: int) -> bytes:
    return b"\x00\x00" * (16 * ms)


def issue(agent: Any) -> str:
    return tokens.issue_token(agent_id=agent.pk, organization_id=agent.organization_id)[0]


async def session_token(persona: Any, agent: Any, body: dict[str, Any] | None = None) -> str:
    """A session token for `agent`, asked of the API with the persona's key (`body`: the request's, for
    example `{"modality": "text"}`)."""
    response = await sync_to_async(persona.client.post)(
        f"/public/v1/agents/{agent.pk}/realtime-sessions", body or {}, format="json"
    )
    assert response.status_code == 200, response.content
    return str(response.json()["token"])


def socket_url(server: Server, agent: Any, token: str) -> str:
    return f"{server.ws_url}/ws/agents/{agent.pk}/realtime?token={token}"


@dataclass
class Exchange:
    heard: str  # what the server recognized
    said: str  # the agent's answer, as the client was told it was heard in full
    events: list[dict[str, Any]]  # the messages in between, other than audio


class Caller:
    """One browser conversation: waits for the greeting, then speaks sentence by sentence, each time
    waiting for the agent's whole answer."""

    def __init__(self, client: VoiceClient, voice: dict[str, bytes]) -> None:
        self.client = client
        self.voice = voice
        self.call_id = ""
        self.greeting = ""

    async def answered(self) -> Caller:
        started = await self.client.wait_for(is_type("session.started"), timeout=60)
        self.call_id = self.client.messages[started].message["callId"]
        greeting = await self.client.wait_for(is_type("transcript", role="assistant"), after=started, timeout=60)
        self.greeting = self.client.messages[greeting].message["text"]
        return self

    async def say(self, sentence: str, *, typed: bool = False) -> Exchange:
        """Speak `sentence` (its recording), or type it (`typed`: an input_text turn of the same call)."""
        before = len(self.client.messages)
        if typed:
            await self.client.send_text(sentence)
        else:
            await self.client.stream(self.voice[sentence] + silence(1000))
        user = await self.client.wait_for(is_type("transcript", role="user"), after=before)
        answer = await self.client.wait_for(is_type("transcript", role="assistant"), after=user, timeout=45)
        between = [m.message for m in self.client.messages[user + 1 : answer] if m.message["type"] != "output_audio"]
        return Exchange(
            heard=self.client.messages[user].message["text"],
            said=self.client.messages[answer].message["text"],
            events=between,
        )

    async def hang_up(self) -> None:
        await self.client.send({"type": "stop"})
        assert await self.client.wait_closed() == 1000


async def conversation(
    server: Server,
    agent: Any,
    voice: dict[str, bytes],
    talk: Callable[[Caller], Awaitable[Any]],
    *,
    token: str | None = None,
) -> Any:
    async with VoiceClient(socket_url(server, agent, token or issue(agent))) as client:
        return await talk(await Caller(client, voice).answered())


def tool_events(exchange: Exchange) -> list[tuple[str, str]]:
    return [(e["type"], e["name"]) for e in exchange.events if e["type"].startswith("tool.")]


@dataclass(frozen=True)
class Spoken:
    """Where a sound the caller made lies on the line's audio timeline (loop times: a line sends its
    audio at real time, so the loop time at which a frame is sent is where it lies in the caller's audio)."""

    began: float  # its first frame
    ended: float  # the end of its last frame


class OpenLine:
    """A caller's microphone that stays open: a frame of silence every 20 ms at real time, and what the
    caller says (`say`) in place of the silence from the next frame on. `send` sends one frame of
    `frame_bytes`; `OpenLine.browser(client)` and `OpenLine.phone(twilio)` are the two transports.
    Use it as an async context manager around the part of the call where the caller listens and speaks."""

    FRAME_SECONDS = 0.02

    def __init__(self, send: Callable[[bytes], Awaitable[None]], *, frame_bytes: int, silence_byte: int = 0) -> None:
        self._send = send
        self.frame_bytes = frame_bytes
        self._silence = bytes([silence_byte]) * frame_bytes
        self._queue: deque[tuple[bytes, asyncio.Future[Spoken]]] = deque()
        self._task: asyncio.Task[None] | None = None
        self._start = 0.0
        self._index = 0  # frames sent so far

    @classmethod
    def browser(cls, client: VoiceClient) -> OpenLine:
        return cls(client.send_audio, frame_bytes=640)

    @classmethod
    def phone(cls, twilio: Any) -> OpenLine:
        from telephony import audio

        return cls(twilio.send_media, frame_bytes=audio.FRAME_BYTES, silence_byte=audio.SILENCE_BYTE)

    async def __aenter__(self) -> Self:
        self._start = asyncio.get_running_loop().time()
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await self._task

    def now(self) -> float:
        """Where the line is on its audio timeline: the loop time of the next frame's start."""
        return self._start + self._index * self.FRAME_SECONDS

    async def say(self, sound: bytes) -> Spoken:
        """`sound` in place of the silence from the next free frame on (after what was said before);
        returns once its last frame has been sent and its audio has run out."""
        done: asyncio.Future[Spoken] = asyncio.get_running_loop().create_future()
        self._queue.append((sound, done))
        return await done

    async def wait(self, seconds: float) -> None:
        """The caller listens for `seconds` of the line's audio (silence)."""
        await self.say(self._silence * max(1, round(seconds / self.FRAME_SECONDS)))

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if self._queue:
                sound, done = self._queue.popleft()
                began = self.now()
                for offset in range(0, len(sound), self.frame_bytes):
                    frame = sound[offset : offset + self.frame_bytes]
                    await self._frame(loop, frame + self._silence[len(frame) :])
                ended = self.now()
                await asyncio.sleep(max(0.0, ended - loop.time()))  # a microphone cannot run ahead of time
                if not done.done():
                    done.set_result(Spoken(began=began, ended=ended))
            else:
                await self._frame(loop, self._silence)

    async def _frame(self, loop: asyncio.AbstractEventLoop, frame: bytes) -> None:
        delay = self.now() - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        await self._send(frame)
        self._index += 1
