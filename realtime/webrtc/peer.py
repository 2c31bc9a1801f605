"""One WebRTC session in this process: the peer connection that answered a client's offer, the conversation
it carries, and the engine's Transport over it.

The offer is answered before the token is spent (a bad offer costs the client nothing), then the token is
redeemed exactly as the socket redeems it (realtime.services.realtime_session_open: single use across
processes, whichever of the socket and the offer comes first) and the conversation opens like the socket's
(`open_session`, channel web: the call record, billing, events, recordings, limits and redaction are the
same). The session starts at once: its call record exists from the answer on, and `started` (which the
greeting waits for) waits until the client has connected (ICE and DTLS, and the `events` data channel
when the offer has one), at most CONNECT_TIMEOUT_SECONDS, after which the call ends `failed`
(connection-lost).

Messages: the `events` data channel carries the socket's JSON messages both ways (realtime.session_messages)
except `output_audio` and `input_audio` (audio is on the tracks, media.py). Messages the session sends
before the channel is open wait for it.

Every exit ends the call exactly once (`end`; the session's own `stop` decides the first reason):
- `stop` on the channel, DELETE on the offerUrl, the client's peer connection closed (DTLS close, or the
  channel closed while connected): completed, caller-hung-up;
- the connection failed (ICE consent lost: the client went away; DTLS failed) or never came up within
  CONNECT_TIMEOUT_SECONDS: failed, connection-lost;
- an API hang-up (POST /calls/{id}/hang-up, through the call's channel-layer group, as for the socket):
  completed, agent-ended-call;
- the server stopping (kit.shutdown's closers): failed, server-shutdown;
- the session ending itself (end_call, idle, transfer, an engine failure): its `hang_up` closes the
  connection once the audio still queued has played (at most DRAIN_SECONDS).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
from typing import Any

from aiortc import (
    RTCConfiguration,
    RTCDataChannel,
    RTCIceCandidate,
    RTCPeerConnection,
    RTCRtpSender,
    RTCSessionDescription,
)
from aiortc import sdp as sdp_format
from aiortc.exceptions import InvalidAccessError, InvalidStateError, OperationError
from aiortc.mediastreams import MediaStreamTrack
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from calls.models import CallStatus, EndedReason
from kit import shutdown
from realtime.engine.contracts import Ending
from realtime.engine.session.shell import Session
from realtime.services import OpenedSession, realtime_session_open
from realtime.session_messages import ClientMessages, MessageTransport
from realtime.sockets import call_control_group
from realtime.webrtc.ice import server_ice_servers, use_host_addresses
from realtime.webrtc.media import AgentTrack, listen

logger = logging.getLogger(__name__)

CHANNEL_LABEL = "events"
# The client must connect (ICE, DTLS, the data channel) this soon after the answer, or the call fails.
CONNECT_TIMEOUT_SECONDS = 30.0
# At the session's own end, queued agent audio (the goodbye's last frames) and messages play out this long at most.
DRAIN_SECONDS = 1.0
# Codecs the server takes, most preferred first: Opus, then G.711 for clients that offer nothing better.
CODECS = ("audio/opus", "audio/PCMU", "audio/PCMA")
# Retries of a channel layer that is down (the API hang-up's group), as the socket's.
LAYER_RETRY_FIRST_SECONDS = 0.2
LAYER_RETRY_MAX_SECONDS = 2.0
LAYER_LEAVE_TIMEOUT_SECONDS = 2.0

# The live sessions of this process, by their token's id: PATCH and DELETE on the offerUrl find them here.
_peers: dict[str, PeerSession] = {}
# Endings under way, referenced until they have run.
_endings: set[asyncio.Task[None]] = set()


class BadOffer(Exception):
    """An offer that cannot be answered (400): `message` says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def find(token_id: str) -> PeerSession | None:
    return _peers.get(token_id)


def live_count() -> int:
    return len(_peers)


def offer_problem(offer: str) -> str | None:
    """Why an SDP offer cannot be answered before anything is spent on it (no audio m-line), or None."""
    try:
        description = sdp_format.SessionDescription.parse(offer)
    except (ValueError, IndexError, KeyError, AssertionError) as exc:
        return f"The SDP offer cannot be read ({type(exc).__name__})"
    if not any(media.kind == "audio" for media in description.media):
        return "The SDP offer has no audio m-line"
    return None


def _sending_rate(answer: str) -> int:
    """The clock rate of the codec the answer sends audio with (its audio m-line's first codec)."""
    description = sdp_format.SessionDescription.parse(answer)
    for media in description.media:
        if media.kind == "audio" and media.rtp.codecs:
            return int(media.rtp.codecs[0].clockRate)
    return 48000


async def answer(*, token: str, token_id: str, agent_id: str, offer: str) -> PeerSession:
    """Answer `offer` (SDP, checked by offer_problem), spend the token and start the session. BadOffer when
    the offer cannot be answered (nothing spent); tokens.TokenError when the token is refused (the
    connection is closed)."""
    use_host_addresses()
    pc = RTCPeerConnection(RTCConfiguration(iceServers=server_ice_servers()))
    track = AgentTrack()
    transceiver = pc.addTransceiver(track, direction="sendrecv")
    capabilities = RTCRtpSender.getCapabilities("audio").codecs
    transceiver.setCodecPreferences(
        sorted(
            (codec for codec in capabilities if codec.mimeType in CODECS),
            key=lambda codec: CODECS.index(codec.mimeType),
        )
    )
    peer = PeerSession(pc, track, token_id=token_id, data_channel="m=application" in offer)
    try:
        await pc.setRemoteDescription(RTCSessionDescription(sdp=offer, type="offer"))
        await pc.setLocalDescription(await pc.createAnswer())
    except (ValueError, InvalidAccessError, InvalidStateError, OperationError) as exc:
        await pc.close()
        track.stop()
        raise BadOffer(f"The SDP offer cannot be answered: {exc or type(exc).__name__}") from exc
    local = pc.localDescription
    assert local is not None
    track.use_rate(_sending_rate(local.sdp))
    try:
        opened = await database_sync_to_async(realtime_session_open)(token=token, agent_id=agent_id)
    except BaseException:
        await pc.close()
        track.stop()
        raise
    peer.open(opened)
    return peer


class WebRtcTransport(MessageTransport):
    """The engine's Transport over a peer connection: the session's messages on the data channel, agent
    audio on the track."""

    def __init__(self, peer: PeerSession, *, tool_events: bool = False) -> None:
        super().__init__(peer.send, tool_events=tool_events)
        self.peer = peer

    async def started(self, call_id: str) -> None:
        if not await self.peer.wait_connected():
            return  # the session is ending (it never connected, or the client left): no greeting to hear
        await super().started(call_id)
        self.peer.watch_control(call_id)  # an API hang-up reaches it there

    async def send_audio(self, pcm16_24k: bytes) -> None:
        self.peer.track.push(pcm16_24k)

    async def clear(self) -> None:
        self.peer.track.clear()
        await super().clear()

    async def hang_up(self, ending: Ending, message: str = "") -> None:
        if ending == Ending.FAILED:
            await self.send(
                {"type": "error", "code": "engine_error", "message": message or "The conversation engine failed"}
            )
        # The session has stopped already (its first reason stands): this closes the connection.
        await asyncio.shield(self.peer.end(CallStatus.COMPLETED, EndedReason.CALLER_HUNG_UP, drain=True))


class PeerSession:
    """A peer connection and the conversation it carries (see the module's docstring)."""

    def __init__(self, pc: RTCPeerConnection, track: AgentTrack, *, token_id: str, data_channel: bool) -> None:
        self.pc = pc
        self.track = track
        self.token_id = token_id
        self.data_channel = data_channel  # the offer has an application m-line: the `events` channel comes
        self.conversation: Session | None = None
        self.messages: ClientMessages | None = None
        self.channel: RTCDataChannel | None = None
        self.connected = asyncio.Event()  # ICE and DTLS up, and the channel open when one was offered
        self.gone = asyncio.Event()  # the session is ending
        self.refused_audio = 0  # caller frames the session refused (faster than real time)
        self._pending: list[str] = []  # messages waiting for the channel to open
        self._inbox: asyncio.Queue[str | bytes] = asyncio.Queue()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._run: asyncio.Task[None] | None = None
        self._ending: asyncio.Task[None] | None = None
        self._listening = False
        self._layer: Any = None
        self._layer_channel: str | None = None
        self._layer_group: str | None = None
        self._lost: tuple[str, str, str] | None = None  # the connection ended before the session opened
        # The session's tasks run in a context of their own: the request that answered the offer (an
        # asgiref thread context its database calls would go to) ends long before them.
        self._context = contextvars.Context()
        pc.on("track", self._on_track)
        pc.on("datachannel", self._on_datachannel)
        pc.on("connectionstatechange", self._on_connection_state)

    # --- start -------------------------------------------------------------------------------------

    def open(self, opened: OpenedSession) -> None:
        """The token is spent: the conversation opens and starts (the greeting waits for the connection)."""
        self.messages = ClientMessages.open(
            opened,
            WebRtcTransport(self, tool_events="tool" in opened.events),
            send=self.send,
            close=self._closed_by_messages,
        )
        self.conversation = self.messages.conversation
        _peers[self.token_id] = self
        shutdown.on_stop(end_all)
        self._run = asyncio.get_running_loop().create_task(
            self.conversation.run(), name=f"conversation-{self.conversation.recorder.session_id}", context=self._context
        )
        self._spawn(self._read_messages(), "webrtc-messages")
        self._spawn(self._connect_bound(), "webrtc-connect")
        if self._lost is not None:
            self.end(*self._lost)

    async def wait_connected(self) -> bool:
        """Until the client has connected (True) or the session ends first (False)."""
        connected = asyncio.ensure_future(self.connected.wait())
        gone = asyncio.ensure_future(self.gone.wait())
        try:
            await asyncio.wait([connected, gone], return_when=asyncio.FIRST_COMPLETED)
        finally:
            connected.cancel()
            gone.cancel()
        return self.connected.is_set() and not self.gone.is_set()

    async def _connect_bound(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.connected.wait(), CONNECT_TIMEOUT_SECONDS)
            return
        if self.conversation is not None:
            self.conversation.recorder.log(
                "warning", "the WebRTC client did not connect in time", seconds=CONNECT_TIMEOUT_SECONDS
            )
        message = f"The client did not connect (ICE, DTLS) within {CONNECT_TIMEOUT_SECONDS:g} s."
        self.end(CallStatus.FAILED, EndedReason.CONNECTION_LOST, message)  # not awaited: it cancels this task

    def _ready(self) -> None:
        channel_open = self.channel is not None and self.channel.readyState == "open"
        if self.pc.connectionState == "connected" and (channel_open or not self.data_channel):
            self.connected.set()

    # --- the peer connection's events ---------------------------------------------------------------

    def _on_track(self, track: MediaStreamTrack) -> None:
        if track.kind == "audio" and not self._listening:  # one audio track each way
            self._listening = True
            self._spawn(listen(track, self._caller_audio), "webrtc-caller-audio")

    def _caller_audio(self, pcm16_16k: bytes) -> None:
        if self.conversation is not None and not self.conversation.push_audio(pcm16_16k):
            self.refused_audio += 1

    def _on_datachannel(self, channel: RTCDataChannel) -> None:
        if channel.label != CHANNEL_LABEL or self.channel is not None:
            return
        self.channel = channel
        channel.on("open", self._channel_open)
        channel.on("message", self._inbox.put_nowait)
        channel.on("close", self._channel_closed)
        if channel.readyState == "open":
            self._channel_open()

    def _channel_open(self) -> None:
        pending, self._pending = self._pending, []
        for text in pending:
            self._send_now(text)
        self._ready()

    def _channel_closed(self) -> None:
        # The client closed its channel while the connection stays up: it left. (A connection that
        # fails closes the channel too: the connection's own state says so.)
        if self.conversation is not None and self.pc.connectionState == "connected":
            self.end(CallStatus.COMPLETED, EndedReason.CALLER_HUNG_UP)

    def _on_connection_state(self) -> None:
        state = self.pc.connectionState
        ending: tuple[str, str, str] | None = None
        if state == "connected":
            self._ready()
        elif state == "failed":
            ending = (CallStatus.FAILED, EndedReason.CONNECTION_LOST, "The WebRTC connection failed (ICE or DTLS).")
        elif state == "closed":
            ending = (CallStatus.COMPLETED, EndedReason.CALLER_HUNG_UP, "")
        if ending is not None and self.conversation is None:
            self._lost = self._lost or ending  # still answering: the session ends as soon as it opens
        elif ending is not None:
            self.end(*ending)

    # --- messages ----------------------------------------------------------------------------------

    async def send(self, message: dict[str, Any]) -> None:
        text = json.dumps(message, separators=(",", ":"))
        channel = self.channel
        if channel is not None and channel.readyState == "open":
            self._send_now(text)
        elif not self.gone.is_set() and (channel is None or channel.readyState == "connecting"):
            self._pending.append(text)

    def _send_now(self, text: str) -> None:
        assert self.channel is not None
        try:
            self.channel.send(text)
        except (InvalidStateError, ConnectionError):  # closed under us
            logger.debug("send on a closed data channel", exc_info=True)

    async def _read_messages(self) -> None:
        while True:
            message = await self._inbox.get()
            if self.messages is None or self.gone.is_set():
                continue
            if isinstance(message, bytes):
                await self.messages.error("bad_message", "Binary messages are not supported; send JSON text messages")
                continue
            await self.messages.receive(message)

    async def _closed_by_messages(self, code: int, reason: str) -> None:
        # After `stop` (the conversation is stopped already) or a typed-input flood: close the connection
        # (not awaited: the ending cancels the message reader this runs in).
        self.end(CallStatus.COMPLETED, EndedReason.CALLER_HUNG_UP)

    # --- trickle ICE -------------------------------------------------------------------------------

    async def add_candidate(self, candidate: RTCIceCandidate | None) -> None:
        """A remote candidate (PATCH on the offerUrl); None: the end of the client's candidates."""
        await self.pc.addIceCandidate(candidate)

    # --- the API hang-up -----------------------------------------------------------------------------

    def watch_control(self, call_id: str) -> None:
        """Listen on the call's channel-layer group for an API hang-up (POST /calls/{id}/hang-up), which
        may come from another process; an outage of the layer is waited out."""
        self._layer = get_channel_layer()
        if self._layer is not None:
            self._layer_group = call_control_group(call_id)
            self._spawn(self._control(), "webrtc-control")

    async def _control(self) -> None:
        layer, group = self._layer, self._layer_group
        delay, joined, down = LAYER_RETRY_FIRST_SECONDS, False, False
        while True:
            try:
                if self._layer_channel is None:
                    self._layer_channel = await layer.new_channel()
                if not joined:
                    await layer.group_add(group, self._layer_channel)
                    joined = True
                message = await layer.receive(self._layer_channel)
            except Exception as exc:  # noqa: BLE001 - any failure of the layer is an outage to wait out
                if not down:
                    logger.warning("channel layer unavailable (%s: %s); retrying", type(exc).__name__, str(exc)[:200])
                down, joined = True, False
                await asyncio.sleep(delay)
                delay = min(delay * 2, LAYER_RETRY_MAX_SECONDS)
                continue
            down, delay = False, LAYER_RETRY_FIRST_SECONDS
            if message.get("type") == "call.hangup":
                # The service ends the call: agent-ended-call, as for the socket.
                self.end(CallStatus.COMPLETED, EndedReason.AGENT_ENDED_CALL)
                return

    async def _leave_layer(self) -> None:
        if self._layer is not None and self._layer_channel is not None and self._layer_group is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    self._layer.group_discard(self._layer_group, self._layer_channel), LAYER_LEAVE_TIMEOUT_SECONDS
                )

    # --- the end -----------------------------------------------------------------------------------

    def end(self, status: str, reason: str, message: str = "", *, drain: bool = False) -> asyncio.Task[None]:
        """End the session (once; later calls return the same ending): the call record is finished with
        the first reason given (the session's own stop, if it came first, decides), then the connection is
        closed. Await the result to wait for both."""
        if self._ending is None:
            self._ending = asyncio.get_running_loop().create_task(
                self._finish(status, reason, message, drain=drain), name="webrtc-end", context=self._context
            )
            _endings.add(self._ending)
            self._ending.add_done_callback(_endings.discard)
            self._ending.add_done_callback(_log_failure)
        return self._ending

    async def _finish(self, status: str, reason: str, message: str, *, drain: bool) -> None:
        # `gone` first releases a start waiting for the connection; `stop` below has taken the reason by then.
        self.gone.set()
        try:
            if self.conversation is not None:
                await self.conversation.stop(status, reason, message)
            if drain and self.pc.connectionState == "connected":
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.track.drained.wait(), DRAIN_SECONDS)
            await self._messages_sent()
        finally:
            if _peers.get(self.token_id) is self:
                del _peers[self.token_id]
            current = asyncio.current_task()
            for task in list(self._tasks):
                if task is not current:
                    task.cancel()
            await self._leave_layer()
            await self.pc.close()
            self.track.stop()

    async def _messages_sent(self) -> None:
        """Until the channel has handed every message sent so far to SCTP (the last transcript before the
        end), at most DRAIN_SECONDS: closing the connection aborts the association."""
        channel = self.channel
        if channel is None or channel.readyState != "open" or not channel.bufferedAmount:
            return
        sent = asyncio.Event()
        channel.bufferedAmountLowThreshold = 0
        channel.once("bufferedamountlow", sent.set)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(sent.wait(), DRAIN_SECONDS)

    def _spawn(self, coroutine: Any, name: str) -> None:
        task = asyncio.get_running_loop().create_task(coroutine, name=name, context=self._context)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_log_failure)


async def end_all() -> None:
    """The server is stopping: every live session of this process ends (failed, server-shutdown)."""
    endings = [peer.end(CallStatus.FAILED, EndedReason.SERVER_SHUTDOWN) for peer in list(_peers.values())]
    if endings:
        await asyncio.gather(*endings, return_exceptions=True)


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("a WebRTC session task failed (%s)", task.get_name(), exc_info=task.exception())
