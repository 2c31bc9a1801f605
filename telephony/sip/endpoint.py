"""The SIP endpoint: Sippy's transaction manager and user agents on their own thread (Sippy's event
dispatcher is one per process), RTP through Sippy's RTP endpoint (its own threads), and each admitted
call's conversation as a session of the engine on the asyncio loop the endpoint was started with.

A call, as a caller experiences it: the INVITE is admitted, challenged or refused
(telephony/sip/admission.py: 401, 403, 480, 486); an admitted call is answered at once (200 with our SDP:
G.722 when the offer has it, wideband both ways with no round trip through 8 kHz, else G.711 mu-law; RFC
4733 telephone events offered), the session opens the call record, greets and converses. The caller's
audio arrives decoded at 16 kHz in 100 ms pieces from the jitter buffer and reaches the session as 20 ms
frames; keys (telephone events) are taken out before the jitter buffer and gathered per the agent's
keypad. The agent's audio (24 kHz, paced by the session) is handed to the RTP endpoint, which resamples,
encodes and sends it every 20 ms; barge-in drops what it still holds. The call ends exactly once, whichever side ends
it: the caller's BYE (completed, caller-hung-up), the agent (a BYE is sent), a hang-up asked for through
the API (the call's channel-layer group, as for Twilio calls), or a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from dataclasses import dataclass
from typing import Any

from channels.layers import get_channel_layer
from django.db import close_old_connections
from sippy.CCEvents import CCEventConnect, CCEventDisconnect, CCEventFail, CCEventTry
from sippy.Core.EventDispatcher import ED2
from sippy.MsgBody import MsgBody
from sippy.Rtp.Codecs.G711 import G711Codec
from sippy.Rtp.Codecs.G722 import G722Codec
from sippy.Rtp.Conf import RTPConf
from sippy.Rtp.Core.AudioChunk import AudioChunk
from sippy.Rtp.EPoint import RTPEPoint
from sippy.Rtp.Handlers import RTPHandlers
from sippy.Rtp.Ingest import RTPInStream
from sippy.Rtp.Params import RTPParams
from sippy.SipConf import SipConf
from sippy.SipHeader import SipHeader
from sippy.SipTransactionManager import SipTransactionManager
from sippy.SipWWWAuthenticate import SipWWWAuthenticate
from sippy.UA import UA

from calls.models import CallChannel, CallStatus, EndedReason
from kit.providers import ProviderError
from realtime.engine.contracts import Ending
from realtime.engine.session.shell import Session, open_session
from realtime.services import call_slot_release
from telephony.keypad import KeypadTurns
from telephony.sip.admission import Admitted, Authorize, Challenge, Refused, sip_call_admit
from telephony.streams import call_group

logger = logging.getLogger(__name__)

ENGINE_RATE = 16000  # what the session takes from the caller
FRAME_BYTES = ENGINE_RATE * 2 // 50  # 20 ms of PCM16
TELEPHONE_EVENT = 101  # the telephone-event payload type we offer (an offer's own is kept)
KEYS = "0123456789*#ABCD"  # RFC 4733's events 0-15


class G722Wideband(G722Codec):
    """G.722 decoded to and encoded from 16 kHz (Sippy's own decodes to 8 kHz)."""

    srate = 16000


# The codecs the endpoint takes, best first: payload type, SDP name and clock rate, Sippy codec.
CODECS = ((9, "G722/8000", G722Wideband), (0, "PCMU/8000", G711Codec))


class _SipLog:
    """Sippy's message log, into the service's log at DEBUG (messages carry numbers: never above)."""

    def write(self, *args: Any, **kwargs: Any) -> None:
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("%s", "".join(str(arg) for arg in args))


@dataclass(frozen=True)
class SipAddress:
    host: str  # the address the endpoint binds (and advertises unless `public` is set)
    port: int
    public: str = ""  # the address a NAT or load balancer shows the far end (SDP and Contact)
    rtp_ports: tuple[int, int] = (10000, 20000)

    @property
    def advertised(self) -> str:
        return self.public or self.host


class SipEndpoint:
    """One per process. `start()` binds and serves from a thread; calls run on `loop`."""

    def __init__(self, address: SipAddress, loop: asyncio.AbstractEventLoop) -> None:
        self.address = address
        self.loop = loop
        self.rtp_conf = RTPConf(*address.rtp_ports)
        self.calls: dict[str, SipCall] = {}
        self.config: dict[str, Any] = {}
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failed: BaseException | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name="sip-endpoint", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._failed is not None:
            raise self._failed

    def stop(self) -> None:
        for call in list(self.calls.values()):
            call.hang_up_from_endpoint()
        if self._thread is not None and self._thread.is_alive():
            ED2.callFromThread(ED2.breakLoop)
            self._thread.join(5)

    def _serve(self) -> None:
        # Sippy's dispatcher belongs to the thread that runs its loop: this one, not the importing one.
        ED2.my_ident = threading.get_ident()
        SipConf.my_address, SipConf.my_port = self.address.advertised, self.address.port
        SipConf.my_uaname = "voice-agent-service"
        self.config = {
            "_sip_address": self.address.host,
            "_sip_port": self.address.port,
            "_sip_logger": _SipLog(),
        }
        try:
            self.config["_sip_tm"] = SipTransactionManager(self.config, self._request)
        except OSError as exc:  # the address is taken: the command says so
            self._failed = exc
            self._ready.set()
            return
        self._ready.set()
        ED2.loop()

    # --- Sippy's thread ----------------------------------------------------------------------
    def _request(self, req: Any, sip_t: Any) -> Any:
        method = req.getMethod()
        if method == "OPTIONS":
            return (req.genResponse(200, "OK"), None, None)
        if method != "INVITE":
            return (req.genResponse(501, "Not Implemented"), None, None)
        if req.getHFBody("to").getTag() is not None:
            return (req.genResponse(481, "Call Leg/Transaction Does Not Exist"), None, None)
        call_id = str(req.getHFBody("call-id"))[:64]
        try:
            decision = sip_call_admit(
                called=(req.getRURI().username or "")[:20],
                caller=(req.getHFBody("from").getUrl().username or "")[:64],
                address=str(req.getSource()[0]),
                call_id=call_id,
                authorize=_authorization(req),
            )
        except Exception:
            logger.exception("SIP call %s: could not be admitted", call_id)
            return (req.genResponse(500, "Server Internal Error"), None, None)
        finally:
            close_old_connections()
        if isinstance(decision, Refused):
            return (req.genResponse(decision.code, decision.reason), None, None)
        if isinstance(decision, Challenge):
            challenge = req.genResponse(401, "Unauthorized")
            realm = self.address.advertised
            challenge.appendHeader(SipHeader(name="www-authenticate", body=SipWWWAuthenticate(realm=realm)))
            return (challenge, None, None)
        call = SipCall(self, decision, call_id)
        self.calls[call_id] = call
        return call.ua.recvRequest(req, sip_t)


def _authorization(req: Any) -> Authorize | None:
    """Whether the INVITE's digest Authorization (a response to our challenge: the nonce is ours and fresh)
    proves a username and password; None when it has none."""
    if req.countHFs("authorization") == 0:
        return None
    header = req.getHFBody("authorization")

    def proves(username: str, password: str) -> bool:
        try:
            return bool(header.username == username and header.verify(password, "INVITE"))
        except (ValueError, KeyError, TypeError, AttributeError):  # a malformed header proves nothing
            return False

    return proves


def _answer_sdp(host: str, port: int, media: _Media) -> MsgBody:
    events = media.telephone_event
    return MsgBody(
        f"v=0\r\no=- {port} 1 IN IP4 {host}\r\ns=-\r\nc=IN IP4 {host}\r\nt=0 0\r\n"
        f"m=audio {port} RTP/AVP {media.payload_type} {events}\r\na=rtpmap:{media.payload_type} {media.rtpmap}\r\n"
        f"a=rtpmap:{events} telephone-event/8000\r\na=fmtp:{events} 0-15\r\n"
        "a=ptime:20\r\na=sendrecv\r\n"
    )


@dataclass(frozen=True)
class _Media:
    target: tuple[str, int]  # the far end's RTP address
    payload_type: int
    rtpmap: str
    codec: Any
    telephone_event: int  # the payload type of RFC 4733 events: the offer's, else ours


def _remote_media(body: Any) -> _Media | None:
    """The far end's RTP address and the best codec of its offer we take (CODECS), or None."""
    if body is None:
        return None
    body.parse()
    for section in body.content.sections:
        formats = {int(f) for f in section.m_header.formats if str(f).isdigit()}
        if section.m_header.stype != "audio" or not section.m_header.port:
            continue
        events = [
            int(a.value.split()[0])
            for a in section.a_headers
            if a.name == "rtpmap" and a.value.lower().endswith("telephone-event/8000") and a.value.split()[0].isdigit()
        ]
        for payload_type, rtpmap, codec in CODECS:
            if payload_type in formats:
                connection = section.c_header or body.content.c_header
                target = (str(connection.addr), int(section.m_header.port))
                return _Media(target, payload_type, rtpmap, codec, events[0] if events else TELEPHONE_EVENT)
    return None


def _event_key(packet: bytes) -> tuple[bytes, str] | None:
    """(RTP timestamp, key) of an RFC 4733 telephone-event packet; None for an event that is no key or a
    packet too short. The timestamp is the event's: every packet of one key press repeats it."""
    offset = 12 + 4 * (packet[0] & 0x0F)  # the fixed header and its contributing sources
    if packet[0] & 0x10 and len(packet) >= offset + 4:  # a header extension
        offset += 4 + 4 * int.from_bytes(packet[offset + 2 : offset + 4], "big")
    if len(packet) < offset + 4 or packet[offset] >= len(KEYS):
        return None
    return packet[4:8], KEYS[packet[offset]]


class _CallerAudio(RTPInStream):
    """Sippy's jitter buffer and decoder of the caller's audio, with RFC 4733 telephone events taken out
    before it (it would decode them as audio): each key reaches the call once, at its event's first packet."""

    def __init__(self, rtp_params: Any, audio_in: Any) -> None:
        super().__init__(rtp_params, audio_in)
        self.telephone_event = getattr(rtp_params, "telephone_event", TELEPHONE_EVENT)
        self._last_event: bytes | None = None

    def rtp_received(self, data: bytes, address: Any, rtime: Any) -> None:
        if len(data) < 12 or (data[1] & 0x7F) != self.telephone_event:
            super().rtp_received(data, address, rtime)
            return
        event = _event_key(data)
        if event is not None and event[0] != self._last_event:
            self._last_event = event[0]
            self.audio_in.key(event[1])


class _Handlers(RTPHandlers):
    rtp_instream_cls = _CallerAudio


class _CallerSide:
    """What the RTP endpoint's threads hand the call: audio (100 ms pieces at 16 kHz) and keys."""

    def __init__(self, call: SipCall) -> None:
        self.call = call

    def __call__(self, chunk: AudioChunk) -> None:
        self.call.endpoint.loop.call_soon_threadsafe(self.call._push, chunk.to_bytes())

    def key(self, key: str) -> None:
        self.call.endpoint.loop.call_soon_threadsafe(self.call._key, key)


class SipCall:
    """One call: its user agent (Sippy's thread), its RTP endpoint and its session (the loop)."""

    def __init__(self, endpoint: SipEndpoint, admitted: Admitted, call_id: str) -> None:
        self.endpoint = endpoint
        self.admitted = admitted
        self.call_id = call_id
        self.ua = UA(endpoint.config, self._event)
        self.rtp: RTPEPoint | None = None
        self.session: Session | None = None
        self.remote_gone = False  # the caller's side ended the dialog (BYE, CANCEL)
        self._hung_up = threading.Event()
        self._pending = bytearray()
        self.keys: KeypadTurns | None = None
        self._pressing: set[asyncio.Task[None]] = set()

    # Sippy's thread.
    def _event(self, event: Any, ua: Any) -> None:
        if isinstance(event, CCEventTry):
            self._answer(event.getData()[3])
        elif isinstance(event, (CCEventDisconnect, CCEventFail)):
            self.remote_gone = True
            self.endpoint.loop.call_soon_threadsafe(self._remote_ended)

    def _answer(self, offer: Any) -> None:
        media = _remote_media(offer)
        if media is None:
            self.ua.recvEvent(CCEventFail((488, "Not Acceptable Here")))
            self._forget()
            return
        params = RTPParams(media.target, out_ptime=20, out_sr=ENGINE_RATE)
        params.codec = media.codec
        params.rtp_laddr = self.endpoint.address.host
        params.telephone_event = media.telephone_event
        self.rtp = RTPEPoint(self.endpoint.rtp_conf, params, _CallerSide(self), handlers=_Handlers())
        port = self.rtp.rserv.local_addr[1]
        answer = _answer_sdp(self.endpoint.address.advertised, port, media)
        self.ua.recvEvent(CCEventConnect((200, "OK", answer)))
        self.endpoint.loop.call_soon_threadsafe(self._start)

    # The loop.
    def _start(self) -> None:
        self.task = self.endpoint.loop.create_task(self._run(), name=f"sip-call-{self.call_id[:12]}")

    async def _run(self) -> None:
        admitted = self.admitted
        listener: asyncio.Task[None] | None = None
        try:
            self.session = open_session(
                agent=admitted.agent,
                transport=SipTransport(self),
                channel=CallChannel.PHONE,
                from_number=admitted.from_number,
                to_number=admitted.to_number,
                provider_call_id=self.call_id,
            )
            self.keys = KeypadTurns(self.session, admitted.agent.keypad, self.session.clock)
            listener = asyncio.create_task(self._listen())
            if self.remote_gone:  # the caller hung up while the call was being answered
                await self.session.stop(CallStatus.COMPLETED, EndedReason.CALLER_HUNG_UP)
            await self.session.run()
        except Exception:
            logger.exception("SIP call %s: the conversation failed", self.call_id[:12])
            if self.session is not None:
                await self.session.stop(CallStatus.FAILED, EndedReason.ERROR)
        finally:
            if listener is not None:
                listener.cancel()
                await asyncio.gather(listener, return_exceptions=True)
            if self.keys is not None:
                self.keys.close()
            self.hang_up_from_endpoint()

    async def _listen(self) -> None:
        """A hang-up asked for elsewhere (POST /calls/{id}/hang-up, in any process) reaches the call
        through its channel-layer group, as a Twilio call's does."""
        layer = get_channel_layer()
        if layer is None:
            return
        name = await layer.new_channel()
        group = call_group(self.call_id)
        await layer.group_add(group, name)
        try:
            while True:
                message = await layer.receive(name)
                if message.get("type") == "call.hangup" and self.session is not None:
                    await self.session.stop(CallStatus.COMPLETED, EndedReason.AGENT_ENDED_CALL)
                    return
        finally:
            with contextlib.suppress(Exception):
                await layer.group_discard(group, name)

    def _push(self, pcm16: bytes) -> None:
        if self.session is None:
            return
        self._pending.extend(pcm16)
        while len(self._pending) >= FRAME_BYTES:
            self.session.push_audio(bytes(self._pending[:FRAME_BYTES]))
            del self._pending[:FRAME_BYTES]

    def _key(self, key: str) -> None:
        if self.keys is not None:
            task = asyncio.create_task(self.keys.press(key))
            self._pressing.add(task)
            task.add_done_callback(self._pressing.discard)

    def _remote_ended(self) -> None:
        if self.session is not None:
            self._ending = asyncio.ensure_future(self.session.stop(CallStatus.COMPLETED, EndedReason.CALLER_HUNG_UP))
        else:  # ended before its session opened: the slot is free again
            self._ending = asyncio.ensure_future(asyncio.to_thread(_release, self.call_id))
            self.hang_up_from_endpoint()

    # Any thread: idempotent.
    def hang_up_from_endpoint(self) -> None:
        if self._hung_up.is_set():
            return
        self._hung_up.set()
        ED2.callFromThread(self._end_dialog)

    def _end_dialog(self) -> None:  # Sippy's thread
        if not self.remote_gone and not self.ua.isDead():
            with contextlib.suppress(Exception):
                self.ua.recvEvent(CCEventDisconnect())
        if self.rtp is not None:
            self.rtp.shutdown()
            self.rtp = None
        self._forget()

    def _forget(self) -> None:
        self.endpoint.calls.pop(self.call_id, None)

    def send_audio(self, pcm16_24k: bytes) -> None:
        rtp = self.rtp
        if rtp is not None and pcm16_24k:
            rtp.soundout(AudioChunk(pcm16_24k, 24000))

    def drop_audio(self) -> None:
        """Barge-in: what the RTP endpoint has not sent yet is dropped."""
        writer = self.rtp.writer if self.rtp is not None else None
        if writer is None:
            return
        with contextlib.suppress(queue.Empty):
            while True:
                writer.data_queue.get_nowait()


def _release(call_id: str) -> None:
    try:
        call_slot_release(channel="phone", key=call_id)
    finally:
        close_old_connections()


class SipTransport:
    """The engine's Transport over a SIP call."""

    def __init__(self, call: SipCall) -> None:
        self.call = call

    async def started(self, call_id: str) -> None:
        logger.debug("SIP call %s: session started (call record %s)", self.call.call_id[:12], call_id)

    async def send_audio(self, pcm16_24k: bytes) -> None:
        self.call.send_audio(pcm16_24k)

    async def clear(self) -> None:
        self.call.drop_audio()

    async def send_transcript(self, role: str, text: str) -> None:
        return None

    async def send_event(self, event: dict[str, Any]) -> None:
        return None

    async def transfer(self, destination: str) -> None:
        raise ProviderError("Transfers are not available over SIP yet", permanent=True)

    async def hang_up(self, ending: Ending, message: str = "") -> None:
        self.call.hang_up_from_endpoint()
