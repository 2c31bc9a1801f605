"""A WebRTC client for the tests and bench/: an aiortc peer connection playing a browser against a session's
offerUrl (docs/webrtc.md), of an in-process server (its `ahttp()` client) or a real one (any httpx client).

Like a browser it offers one audio track both ways (Opus) and a data channel named `events`, bundled on one
transport; its microphone (`Microphone`) sends 20 ms frames at real time, silence until it is given speech
(`say`: recorded PCM16 16 kHz, resampled to 48 kHz), and what it hears of the agent's track is kept with
each frame's arrival time (`heard`, `audio_between`). Every message of the channel is kept as a
`Received` (testing/clients.py), `wait_for` awaits one.

Its host candidates are those of WEBRTC_HOST_ADDRESSES (the test servers' 127.0.0.1: realtime/webrtc/ice.py
puts the setting in aioice's place in this process too), and it is given no STUN server: every packet of a
test stays on loopback. `trickle` leaves the candidates out of the offer and sends them with PATCH
afterwards (JSON or an RFC 8840 SDP fragment), then the end of candidates.
"""

from __future__ import annotations

import asyncio
import contextlib
import fractions
import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
import numpy as np

from testing.clients import Received, first_matching

RATE = 48000
FRAME_SAMPLES = RATE // 50  # 20 ms
IN_RATE = 16000


def to_48k(pcm16_16k: bytes) -> bytes:
    import soxr

    samples = np.frombuffer(pcm16_16k, dtype="<i2")
    return soxr.resample(samples, IN_RATE, RATE).astype("<i2").tobytes()


def rms(pcm16: bytes) -> float:
    samples = np.frombuffer(pcm16, dtype="<i2").astype(np.float64)
    return float(np.sqrt(np.mean(samples**2))) if samples.size else 0.0


def _microphone_class() -> Any:
    from aiortc import MediaStreamTrack
    from aiortc.mediastreams import MediaStreamError
    from av import AudioFrame

    class Microphone(MediaStreamTrack):
        """A microphone at real time: silence, and what it is given to say in its place."""

        kind = "audio"

        def __init__(self) -> None:
            super().__init__()
            self._queue: deque[tuple[bytes, asyncio.Future[float]]] = deque()
            self._current: tuple[bytearray, asyncio.Future[float]] | None = None
            self._start: float | None = None
            self._sent = 0

        def say(self, pcm16_16k: bytes) -> asyncio.Future[float]:
            """Speech after what is queued; the future is the loop time its audio ends."""
            done: asyncio.Future[float] = asyncio.get_running_loop().create_future()
            self._queue.append((to_48k(pcm16_16k), done))
            return done

        async def recv(self) -> Any:
            if self.readyState != "live":
                raise MediaStreamError
            loop = asyncio.get_running_loop()
            if self._start is None:
                self._start = loop.time()
            at = self._start + self._sent / RATE
            if at > loop.time():
                await asyncio.sleep(at - loop.time())
            size = FRAME_SAMPLES * 2
            chunk = b""
            if self._current is None and self._queue:
                audio, done = self._queue.popleft()
                self._current = (bytearray(audio), done)
            if self._current is not None:
                left, done = self._current
                chunk = bytes(left[:size])
                del left[:size]
                if not left:
                    self._current = None
                    if not done.done():
                        # When its audio has ended, or (a loaded client running late) when it was sent.
                        done.set_result(max(at + len(chunk) / 2 / RATE, loop.time()))
            chunk += bytes(size - len(chunk))
            frame = AudioFrame.from_ndarray(
                np.frombuffer(chunk, dtype="<i2").reshape(1, -1), format="s16", layout="mono"
            )
            frame.sample_rate = RATE
            frame.pts = self._sent
            frame.time_base = fractions.Fraction(1, RATE)
            self._sent += FRAME_SAMPLES
            return frame

    return Microphone


@dataclass
class WebRtcClient:
    """One browser-like WebRTC session (see the module's docstring). `form`: the offer's body, raw SDP or JSON."""

    offer_url: str
    http: httpx.AsyncClient
    form: Literal["sdp", "json"] = "sdp"
    trickle: Literal["json", "sdpfrag"] | None = None
    apply_answer: bool = True  # False: a client that never connects (it drops the answer)
    messages: list[Received] = field(default_factory=list)
    heard: list[tuple[float, bytes]] = field(default_factory=list)  # (arrival loop time, PCM16 48 kHz mono)
    on_message: Callable[[Received], None] | None = None

    def __post_init__(self) -> None:
        self.pc: Any = None
        self.channel: Any = None
        self.microphone: Any = None
        self.answer: httpx.Response | None = None
        self.channel_closed = asyncio.Event()
        self.channel_open = asyncio.Event()
        self._arrived = asyncio.Event()
        self._frame = asyncio.Event()  # set at each frame heard
        self._tasks: list[asyncio.Task[Any]] = []

    async def __aenter__(self) -> WebRtcClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def offer(self) -> httpx.Response:
        """Make the offer, POST it to the offerUrl and, when it is answered (201), apply the answer (and
        trickle the candidates). The response, whatever its status."""
        from aiortc import RTCBundlePolicy, RTCConfiguration, RTCPeerConnection, RTCSessionDescription

        from realtime.webrtc.ice import use_host_addresses

        use_host_addresses()
        loop = asyncio.get_running_loop()
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[], bundlePolicy=RTCBundlePolicy.MAX_BUNDLE))
        self.microphone = _microphone_class()()
        self.pc.addTransceiver(self.microphone, direction="sendrecv")
        self.channel = self.pc.createDataChannel("events")

        @self.channel.on("message")
        def _message(data: Any) -> None:
            if not isinstance(data, str):
                return
            item = Received(at=loop.time(), message=json.loads(data))
            self.messages.append(item)
            if self.on_message is not None:
                self.on_message(item)
            self._arrived.set()

        self.channel.on("close", self._closed)
        self.channel.on("open", self.channel_open.set)

        @self.pc.on("track")
        def _track(track: Any) -> None:
            self._tasks.append(asyncio.create_task(self._listen(track)))

        @self.pc.on("connectionstatechange")
        def _state() -> None:
            if self.pc.connectionState in ("failed", "closed"):
                self._closed()

        await self.pc.setLocalDescription(await self.pc.createOffer())
        sdp = self.pc.localDescription.sdp
        candidates = [line for line in sdp.splitlines() if line.startswith("a=candidate:")]
        if self.trickle:
            sdp = "".join(
                line + "\r\n"
                for line in sdp.splitlines()
                if not line.startswith(("a=candidate:", "a=end-of-candidates"))
            )
        if self.form == "json":
            response = await self.http.post(self.offer_url, json={"type": "offer", "sdp": sdp})
        else:
            response = await self.http.post(self.offer_url, content=sdp, headers={"Content-Type": "application/sdp"})
        self.answer = response
        if response.status_code != 201:
            await self.pc.close()
            return response
        if not self.apply_answer:
            return response
        answer = response.json()["sdp"] if self.form == "json" else response.text
        await self.pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
        if self.trickle:
            await self._trickle(candidates)
        return response

    async def _trickle(self, candidates: list[str]) -> None:
        if self.trickle == "json":
            for line in candidates:
                body = {"candidate": line[len("a=") :], "sdpMid": "0", "sdpMLineIndex": 0}
                patched = await self.http.patch(self.offer_url, json=body)
                assert patched.status_code == 204, patched.text
            patched = await self.http.patch(self.offer_url, json={"candidate": "", "sdpMid": "0"})
        else:
            fragment = "m=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=mid:0\r\n" + "".join(f"{line}\r\n" for line in candidates)
            fragment += "a=end-of-candidates\r\n"
            patched = await self.http.patch(
                self.offer_url, content=fragment, headers={"Content-Type": "application/trickle-ice-sdpfrag"}
            )
        assert patched.status_code == 204, patched.text

    async def _listen(self, track: Any) -> None:
        from aiortc.mediastreams import MediaStreamError

        loop = asyncio.get_running_loop()
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            channels = len(frame.layout.channels)
            samples = frame.to_ndarray().reshape(-1, channels)[:, 0]
            if frame.sample_rate != RATE:
                import soxr

                samples = soxr.resample(samples, frame.sample_rate, RATE).astype("<i2")
            self.heard.append((loop.time(), np.ascontiguousarray(samples).astype("<i2").tobytes()))
            self._frame.set()

    def _closed(self) -> None:
        self.channel_closed.set()
        self._arrived.set()

    # --- messages --------------------------------------------------------------------------------

    async def send(self, message: dict[str, Any]) -> None:
        self.channel.send(json.dumps(message))

    async def send_raw(self, data: str | bytes) -> None:
        self.channel.send(data)

    async def wait_open(self, timeout: float = 30) -> None:
        """Until the `events` channel is open (the connection is up)."""
        await asyncio.wait_for(self.channel_open.wait(), timeout)

    async def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], *, after: int = 0, timeout: float = 30
    ) -> int:
        """Index of the first message from `after` on that matches; TimeoutError otherwise (ConnectionError
        once the channel has closed without one)."""
        return await first_matching(
            self.messages,
            self._arrived,
            predicate,
            after=after,
            timeout=timeout,
            ended=lambda: "the events channel closed while waiting" if self.channel_closed.is_set() else None,
        )

    async def wait_closed(self, timeout: float = 30) -> None:
        await asyncio.wait_for(self.channel_closed.wait(), timeout)

    # --- audio -----------------------------------------------------------------------------------

    async def say(self, pcm16_16k: bytes) -> float:
        """Speak (PCM16 16 kHz) after what is being said; returns the loop time its audio ended."""
        return await self.microphone.say(pcm16_16k)

    def audio_between(self, start: float, end: float) -> bytes:
        """What arrived of the agent's track from loop time `start` to `end` (PCM16 48 kHz mono)."""
        return b"".join(pcm for at, pcm in self.heard if start <= at < end)

    async def heard_seconds(self, seconds: float, *, since: float, level: float = 300.0, timeout: float = 30) -> float:
        """Until `seconds` of loud agent audio (20 ms frames above `level` RMS) have arrived since loop time
        `since`; returns the loop time of the first loud frame."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            loud = [at for at, pcm in self.heard if at >= since and rms(pcm) > level]
            if len(loud) * 0.02 >= seconds:
                return loud[0]
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"{len(loud) * 0.02:.2f} s of agent audio heard of {seconds} s")
            self._frame.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._frame.wait(), remaining)

    async def first_sound(self, *, after: float, level: float = 50.0, timeout: float = 60) -> float:
        """The arrival time of the first frame of agent audio louder than `level` (RMS) that arrived after
        loop time `after` (the track carries silence between the agent's words)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        checked = 0
        while True:
            for index in range(checked, len(self.heard)):
                at, pcm = self.heard[index]
                if at > after and rms(pcm) > level:
                    return at
            checked = len(self.heard)
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError("no agent audio")
            self._frame.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._frame.wait(), remaining)

    async def quiet(self, seconds: float, *, level: float = 50.0, timeout: float = 60) -> None:
        """Until the agent's track has been quiet (every frame at most `level` RMS) for `seconds` of frames."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            recent = self.heard[-max(1, round(seconds / 0.02)) :]
            if len(recent) * 0.02 >= seconds and all(rms(pcm) <= level for _, pcm in recent):
                return
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError("the agent's track did not go quiet")
            self._frame.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._frame.wait(), remaining)

    async def listen_until(self, at: float, *, timeout: float = 30) -> None:
        """Until a frame of the agent's track has arrived at loop time `at` or later (the track plays
        silence between the agent's words: a frame every 20 ms)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not self.heard or self.heard[-1][0] < at:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"no agent audio arrived after {at:.2f}")
            self._frame.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._frame.wait(), remaining)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self.pc is not None:
            await self.pc.close()
