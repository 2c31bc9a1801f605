"""The SIP endpoint: Sippy's transaction manager and user agents on their own thread (Sippy's event
dispatcher is one per process), RTP through Sippy's RTP endpoint (its own threads), and each call's
conversation as a session of the engine on the asyncio loop the endpoint was started with.

An incoming call, as a caller experiences it: the INVITE is admitted, challenged or refused
(telephony/sip/admission.py, on a worker thread: 100 Trying meanwhile; 401, 403, 480, 486); an admitted call is answered at once (200 with our SDP:
G.722 when the offer has it, wideband both ways with no round trip through 8 kHz, else G.711 mu-law, else A-law; RFC
4733 telephone events offered), the session opens the call record, greets and converses.

An outbound call (telephony/providers/sip.py hands it here): an INVITE to `sip:<to>@<the account's domain>`
offering G.722 and G.711 (mu-law, A-law), from the call's number, with the account's digest credentials when
challenged; ringing until the far end answers or the ring timeout (then CANCEL); a final refusal ends the
call record unanswered (busy, no-answer, failed: telephony/sip/outbound.py); the answer opens the call
record's session, which greets with the call's variables. A hang-up asked for while it rings cancels it.

Either way, the far end's audio arrives decoded at 16 kHz in 40 ms pieces from the jitter buffer and
reaches the session as 20 ms frames; keys (telephone events) are taken out before the jitter buffer and
gathered per the agent's keypad. The agent's audio (24 kHz, paced by the session) is filtered down to the
codec's rate in 20 ms frames (telephony/sip/media.py) and handed to the RTP endpoint, which encodes and
sends a frame every 20 ms; barge-in drops what it still holds. A
re-INVITE (hold, a new media address) is answered with the same codec. A transfer is a REFER to
`sip:<destination>@<the account's domain>`: once the far end reports the transferred call answered (its
NOTIFY's sipfrag says 200), the agent's leg is hung up. The call ends exactly once, whichever side ends it:
the far end's BYE (completed, caller-hung-up), the agent (a BYE is sent), a hang-up asked for through the
API (the call's channel-layer group, or this process's endpoint directly), or a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.db import close_old_connections
from sippy.CCEvents import CCEventConnect, CCEventDisconnect, CCEventFail, CCEventRing, CCEventTry, CCEventUpdate
from sippy.Core.EventDispatcher import ED2
from sippy.Rtp.Codecs.G711 import G711Codec
from sippy.Rtp.Conf import RTPConf
from sippy.Rtp.Core.AudioChunk import AudioChunk
from sippy.Rtp.EPoint import RTPEPoint
from sippy.Rtp.Params import RTPParams
from sippy.SipAddress import SipAddress as SipNameAddress
from sippy.SipCallId import SipCallId
from sippy.SipConf import SipConf
from sippy.SipHeader import SipHeader
from sippy.SipReferredBy import SipReferredBy
from sippy.SipReferTo import SipReferTo
from sippy.SipTransactionManager import RINGING, TRYING, SipTransactionManager
from sippy.SipURL import SipURL
from sippy.SipWWWAuthenticate import SipWWWAuthenticate
from sippy.Time.Timeout import Timeout
from sippy.UA import UA

from calls.models import CallChannel, CallStatus, EndedReason
from kit.providers import ProviderError
from realtime.engine.contracts import Ending
from realtime.engine.session.shell import Session, open_session
from realtime.services import call_slot_release
from telephony.groups import call_group
from telephony.keypad import KeypadTurns
from telephony.providers.sip import OUTBOUND_CHANNEL, SipDial, local_endpoint_set
from telephony.sip.admission import Admitted, Authorize, Challenge, Refused, sip_call_admit
from telephony.sip.media import TELEPHONE_EVENT, AgentAudio, Handlers, Media, answer_sdp, offer_sdp, remote_media
from telephony.sip.outbound import DialProblem, DialTarget, sip_dial_target, sip_dial_unanswered
from telephony.streams import outbound_call_waiting, phone_call_get

logger = logging.getLogger(__name__)

ENGINE_RATE = 16000  # what the session takes from the far end
FRAME_BYTES = ENGINE_RATE * 2 // 50  # 20 ms of PCM16
TRANSFER_SECONDS = 60  # how long a transfer may take to be answered before it counts as failed


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


def sip_address(bind: str, rtp_ports: str, public: str = "") -> SipAddress:
    """SIP_BIND (`HOST:PORT`), SIP_RTP_PORTS (`LOW-HIGH`) and SIP_PUBLIC_ADDRESS as an address; ValueError
    saying what is wrong."""
    host, _, port = bind.rpartition(":")
    low, _, high = rtp_ports.partition("-")
    if not host or not port.isdigit() or not low.isdigit() or not high.isdigit() or int(low) > int(high):
        raise ValueError(f"Bind to HOST:PORT with RTP ports LOW-HIGH, not {bind!r} and {rtp_ports!r}")
    return SipAddress(host=host, port=int(port), public=public, rtp_ports=(int(low), int(high)))


def start_in_web_server() -> SipEndpoint | None:
    """On the embedded default (no Redis: the channel layer is this process's), a web server started with
    SIP_BIND serves SIP itself, so that the API's hang-ups and outbound calls reach its calls; with Redis,
    `manage.py sipserver` processes serve it. Never raises: a bad address or a port taken is logged."""
    if not settings.SIP_BIND or not isinstance(get_channel_layer(), InMemoryChannelLayer):
        return None
    loop = getattr(sys.modules.get("daphne.server"), "twisted_loop", None)  # the loop Daphne serves on
    if loop is None:
        return None
    try:
        endpoint = SipEndpoint(
            sip_address(settings.SIP_BIND, settings.SIP_RTP_PORTS, settings.SIP_PUBLIC_ADDRESS), loop
        )
        endpoint.start()
    except (ValueError, OSError) as exc:
        logger.error("SIP is not served (SIP_BIND=%s): %s", settings.SIP_BIND, exc)
        return None
    logger.info("SIP endpoint on udp:%s (advertised %s)", settings.SIP_BIND, endpoint.address.advertised)
    return endpoint


class SipEndpoint:
    """One per process. `start()` binds and serves from a thread; calls run on `loop`. Calls placed or
    hung up in this process reach it directly (telephony/providers/sip.py); `take_outbound()` takes those
    placed in other processes."""

    def __init__(self, address: SipAddress, loop: asyncio.AbstractEventLoop) -> None:
        self.address = address
        self.loop = loop
        self.rtp_conf = RTPConf(*address.rtp_ports)
        self.calls: dict[str, SipCall] = {}
        self.config: dict[str, Any] = {}
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failed: BaseException | None = None
        self._dialing: set[asyncio.Task[None]] = set()
        self._admitting = ThreadPoolExecutor(max_workers=4, thread_name_prefix="sip-admit")

    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name="sip-endpoint", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._failed is not None:
            raise self._failed
        local_endpoint_set(self)

    def stop(self) -> None:
        local_endpoint_set(None)
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

    # --- any thread (telephony/providers/sip.py's LocalEndpoint) ----------------------------------------
    def place(self, dial: SipDial) -> None:
        self.loop.call_soon_threadsafe(self._dial_soon, dial)

    def hang_up(self, call_sid: str) -> bool:
        call = self.calls.get(call_sid)
        if call is None:
            return False
        self.loop.call_soon_threadsafe(call.hang_up_requested)
        return True

    # --- the loop -------------------------------------------------------------------------------------
    async def take_outbound(self) -> None:
        """Place the calls other processes hand to the SIP endpoints through the channel layer (one of the
        `sipserver` processes takes each). Runs until cancelled; a channel layer that is down is retried."""
        layer = get_channel_layer()
        if layer is None or isinstance(layer, InMemoryChannelLayer):
            return  # nobody else can reach this process: calls are placed here directly
        while True:
            try:
                message = await layer.receive(OUTBOUND_CHANNEL)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("SIP endpoint: the channel layer is down; retrying", exc_info=True)
                await asyncio.sleep(1)
                continue
            try:
                dial = SipDial.from_message(message)
            except (KeyError, TypeError, ValueError):
                logger.warning("SIP endpoint: a malformed call to place was dropped")
                continue
            self._dial_soon(dial)

    def _dial_soon(self, dial: SipDial) -> None:
        task = self.loop.create_task(self._dial(dial), name=f"sip-dial-{dial.call_sid[:12]}")
        self._dialing.add(task)
        task.add_done_callback(self._dialing.discard)

    async def _dial(self, dial: SipDial) -> None:
        target = await asyncio.to_thread(_closing, sip_dial_target, dial)
        if isinstance(target, DialProblem):
            logger.warning("outbound SIP call %s not placed: %s", dial.call_sid[:12], target.problem)
            if target.call_id is not None:
                await asyncio.to_thread(_closing, sip_dial_unanswered, target.call_id, code=-1, reason=target.problem)
            return
        call = SipCall(self, dial.call_sid, outbound=target, dial=dial)
        self.calls[dial.call_sid] = call
        call.listening = asyncio.create_task(call._listen())
        ED2.callFromThread(call._invite)

    # --- Sippy's thread -------------------------------------------------------------------------------
    def _request(self, req: Any, sip_t: Any) -> Any:
        try:
            return self._answer_request(req, sip_t)
        except Exception:  # a request the stack parsed but that lacks what a call needs
            logger.warning("SIP request refused: it could not be read", exc_info=True)
            return (req.genResponse(400, "Bad Request"), None, None)

    def _answer_request(self, req: Any, sip_t: Any) -> Any:
        method = req.getMethod()
        if method == "OPTIONS":
            return (req.genResponse(200, "OK"), None, None)
        if method != "INVITE":
            return (req.genResponse(501, "Not Implemented"), None, None)
        if req.getHFBody("to").getTag() is not None:
            return (req.genResponse(481, "Call Leg/Transaction Does Not Exist"), None, None)
        call_id = str(req.getHFBody("call-id"))[:64]
        question = {
            "called": (req.getRURI().username or "")[:20],
            "caller": (req.getHFBody("from").getUrl().username or "")[:64],
            "address": str(req.getSource()[0]),
            "call_id": call_id,
            "authorize": _authorization(req),
        }
        # The database decides, on a worker thread: the signalling of every other call goes on meanwhile,
        # and the caller hears 100 Trying until the answer.
        self._admitting.submit(self._admit, req, sip_t, question)
        return (req.genResponse(100, "Trying"), None, None)

    def _admit(self, req: Any, sip_t: Any, question: dict[str, Any]) -> None:  # a worker thread
        try:
            decision: Admitted | Refused | Challenge = _closing(sip_call_admit, **question)
        except Exception:
            logger.exception("SIP call %s: could not be admitted", question["call_id"])
            decision = Refused(500, "Server Internal Error")
        ED2.callFromThread(self._admitted, req, sip_t, question["call_id"], decision)

    def _admitted(self, req: Any, sip_t: Any, call_id: str, decision: Admitted | Refused | Challenge) -> None:
        tm = self.config["_sip_tm"]
        if sip_t.state not in (TRYING, RINGING):  # canceled (487) while it was being admitted
            if isinstance(decision, Admitted):
                self._admitting.submit(_release, call_id)  # its live-call slot
            return
        if isinstance(decision, Refused):
            tm.sendResponse(req.genResponse(decision.code, decision.reason), t=sip_t)
            return
        if isinstance(decision, Challenge):
            challenge = req.genResponse(401, "Unauthorized")
            realm = self.address.advertised
            challenge.appendHeader(SipHeader(name="www-authenticate", body=SipWWWAuthenticate(realm=realm)))
            tm.sendResponse(challenge, t=sip_t)
            return
        call = SipCall(self, call_id, admitted=decision)
        self.calls[call_id] = call
        answer = call.ua.recvRequest(req, sip_t)
        if answer is not None:  # as the transaction manager does with a request callback's answer
            response, sip_t.cancel_cb, sip_t.noack_cb = answer
            if response is not None:
                tm.sendResponse(response, t=sip_t)


def _closing(function: Any, *args: Any, **kwargs: Any) -> Any:
    """`function` run on a worker thread, its database connection closed after it (no thread of the pool
    keeps one open between calls)."""
    try:
        return function(*args, **kwargs)
    finally:
        close_old_connections()


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


class _CallerSide:
    """What the RTP endpoint's threads hand the call: audio (40 ms pieces at 16 kHz) and keys."""

    def __init__(self, call: SipCall) -> None:
        self.call = call

    def __call__(self, chunk: AudioChunk) -> None:
        self.call.endpoint.loop.call_soon_threadsafe(self.call._push, chunk.to_bytes())

    def key(self, key: str) -> None:
        self.call.endpoint.loop.call_soon_threadsafe(self.call._key, key)


class _DialogUA(UA):
    """Sippy's user agent, with the NOTIFYs of a transfer (RFC 3515: its progress as a SIP status line,
    a message/sipfrag body) handed to the call; Sippy's own states leave a NOTIFY unanswered."""

    def __init__(self, call: SipCall, config: dict[str, Any], **options: Any) -> None:
        super().__init__(config, call._event, **options)
        self.call = call

    def recvRequest(self, req: Any, sip_t: Any) -> Any:
        if req.getMethod() != "NOTIFY":
            return super().recvRequest(req, sip_t)
        body = req.getBody()
        self.call._notified(str(body.content) if body is not None else "")
        return (req.genResponse(200, "OK"), None, None)


def sipfrag_status(text: str) -> int | None:
    """The status code of a message/sipfrag body's status line (RFC 3420: "SIP/2.0 200 OK"), or None."""
    version, _, rest = text.strip().partition(" ")
    code = rest[:3]
    return int(code) if version.upper() == "SIP/2.0" and code.isdigit() else None


class SipCall:
    """One call: its user agent (Sippy's thread), its RTP endpoint and its session (the loop). Incoming
    (`admitted`) or outbound (`outbound`, `dial`)."""

    def __init__(
        self,
        endpoint: SipEndpoint,
        call_id: str,
        *,
        admitted: Admitted | None = None,
        outbound: DialTarget | None = None,
        dial: SipDial | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.admitted = admitted
        self.outbound = outbound
        self.dial = dial
        self.call_id = call_id
        self.domain = admitted.domain if admitted is not None else outbound.domain if outbound is not None else ("", 0)
        if outbound is not None:
            self.ua = _DialogUA(
                self,
                endpoint.config,
                username=outbound.username or None,
                password=outbound.password or None,
                nh_address=outbound.domain,
            )
            self.ua.outbound_proxy = outbound.address  # the domain resolved (off this thread)
        else:
            self.ua = _DialogUA(self, endpoint.config)
        self.rtp: RTPEPoint | None = None
        self.media: Media | None = None  # the codec and address agreed with the far end
        self.session: Session | None = None
        self.task: asyncio.Task[None] | None = None
        self.listening: asyncio.Task[None] | None = None
        self.connected = False  # answered (the far end's 200, or ours)
        self.progressed = False  # the far end answered the INVITE at all (100 Trying, 180, 183)
        self.remote_gone = False  # the far end ended the dialog (BYE, CANCEL)
        self.unanswered: tuple[int, str] | None = None  # an outbound call's end before an answer
        self._settled = False  # that end was recorded
        self._hung_up = threading.Event()
        self._pending = bytearray()
        self.keys: KeypadTurns | None = None
        self._pressing: set[asyncio.Task[None]] = set()
        self._transfer: asyncio.Future[None] | None = None
        self._agent_audio: AgentAudio | None = None  # the agent's audio at the codec's rate

    # --- Sippy's thread -------------------------------------------------------------------------------
    def _event(self, event: Any, ua: Any) -> None:
        try:
            self._on_event(event)
        except Exception:  # never into Sippy's loop, which every call shares: this call ends instead
            logger.exception("SIP call %s: could not handle %s", self.call_id[:12], type(event).__name__)
            self.hang_up_from_endpoint()
            if self.session is not None:
                self.endpoint.loop.call_soon_threadsafe(self.hang_up_requested)

    def _on_event(self, event: Any) -> None:
        if isinstance(event, CCEventRing):
            self.progressed = True
        elif isinstance(event, CCEventTry):
            self._answer(event.getData()[3])
        elif isinstance(event, CCEventConnect) and self.outbound is not None and not self.connected:
            self._answered(event.getData()[2])
        elif isinstance(event, CCEventUpdate):
            self._reinvited(event.getData())
        elif isinstance(event, (CCEventDisconnect, CCEventFail)):
            if self.outbound is not None and not self.connected:
                if self.unanswered is None:
                    data = event.getData() if isinstance(event, CCEventFail) else None
                    self.unanswered = (int(data[0]), str(data[1])) if data else (487, "Request Terminated")
                    if self.unanswered[0] == 408 and not self.progressed:  # the transaction's own timeout
                        host, port = self.domain
                        self.unanswered = (-1, f"{host}:{port} did not answer (unreachable, or no SIP server there)")
                self.endpoint.loop.call_soon_threadsafe(self._not_answered)
                return
            self.remote_gone = True
            self.endpoint.loop.call_soon_threadsafe(self._remote_ended)

    def _rtp(self, media: Media | None) -> RTPEPoint:
        params = RTPParams(media.target if media is not None else None, out_ptime=20, out_sr=ENGINE_RATE)
        params.codec = media.codec if media is not None else G711Codec
        params.rtp_laddr = self.endpoint.address.host
        params.telephone_event = media.telephone_event if media is not None else TELEPHONE_EVENT
        return RTPEPoint(self.endpoint.rtp_conf, params, _CallerSide(self), handlers=Handlers())

    def _answer(self, offer: Any) -> None:
        media = remote_media(offer)
        if media is None:
            self.ua.recvEvent(CCEventFail((488, "Not Acceptable Here")))
            self._forget()
            return
        self.rtp = self._rtp(media)
        self.media = media
        self.connected = True
        self.ua.recvEvent(CCEventConnect((200, "OK", self._our_sdp())))
        self.endpoint.loop.call_soon_threadsafe(self._start)

    def _our_sdp(self) -> Any:
        assert self.rtp is not None and self.media is not None
        return answer_sdp(self.endpoint.address.advertised, self.rtp.rserv.local_addr[1], self.media)

    def _invite(self) -> None:
        assert self.dial is not None
        if self._hung_up.is_set():  # canceled before it was sent
            return
        self.rtp = self._rtp(None)
        offer = offer_sdp(self.endpoint.address.advertised, self.rtp.rserv.local_addr[1])
        self.ua.recvEvent(
            CCEventTry((SipCallId(body=self.call_id), self.dial.from_number, self.dial.to, offer, None, None))
        )
        Timeout(self._ring_timeout, max(1, self.dial.ring_timeout_seconds))

    def _ring_timeout(self) -> None:
        if not self.connected and self.unanswered is None and not self._hung_up.is_set():
            self.unanswered = (0, "no answer")
            self.endpoint.loop.call_soon_threadsafe(self._not_answered)  # CANCEL, and the call ends no-answer

    def _answered(self, body: Any) -> None:
        media = remote_media(body)
        if media is None or self.rtp is None:
            self.unanswered = (-1, "the far end answered without audio this endpoint takes")
            self.ua.recvEvent(CCEventDisconnect())  # BYE
            self.endpoint.loop.call_soon_threadsafe(self._not_answered)
            return
        self.connected = True
        self.media = media
        params = RTPParams(media.target, out_ptime=20, out_sr=ENGINE_RATE)
        params.codec = media.codec
        self.rtp.rtp_params.telephone_event = media.telephone_event
        self.rtp.update(params)
        self.endpoint.loop.call_soon_threadsafe(self._start)

    def _reinvited(self, body: Any) -> None:
        """A re-INVITE (hold, a moved media address): the same codec, to where the far end says now."""
        media = remote_media(body)
        if media is None or self.rtp is None or not self.connected:
            self.ua.recvEvent(CCEventFail((488, "Not Acceptable Here")))
            return
        if media.target != self.rtp.rtp_params.rtp_target:
            params = RTPParams(media.target, out_ptime=20, out_sr=ENGINE_RATE)
            params.codec = self.rtp.rtp_params.codec
            self.rtp.update(params)
        self.ua.recvEvent(CCEventConnect((200, "OK", self._our_sdp())))

    def _refer(self, destination: str) -> None:
        """A REFER (RFC 3515) asking the far end to call `destination` at the account's domain."""
        host, port = self.domain
        url = SipURL(username=destination, host=host, port=port)
        req = self.ua.genRequest("REFER")
        req.appendHeader(SipHeader(name="refer-to", body=SipReferTo(address=SipNameAddress(url=url))))
        referrer = SipReferredBy(address=SipNameAddress(url=self.ua.lUri.getUrl()))
        req.appendHeader(SipHeader(name="referred-by", body=referrer))
        self.ua.newTransaction(req, resp_cb=self._referred)

    def _referred(self, resp: Any) -> None:
        code, reason = resp.getSCode()
        if code >= 300:
            self._transfer_over(ProviderError(f"The far end refused the transfer ({code} {reason})", permanent=True))

    def _notified(self, sipfrag: str) -> None:
        code = sipfrag_status(sipfrag)
        if code is None or code < 200:
            return
        failure = None if code < 300 else ProviderError(f"The transfer target answered {code}", permanent=True)
        self._transfer_over(failure)

    def _transfer_over(self, failure: ProviderError | None) -> None:
        def settle() -> None:
            future = self._transfer
            if future is not None and not future.done():
                if failure is None:
                    future.set_result(None)
                else:
                    future.set_exception(failure)

        self.endpoint.loop.call_soon_threadsafe(settle)

    # --- the loop -------------------------------------------------------------------------------------
    def _start(self) -> None:
        self.task = self.endpoint.loop.create_task(self._run(), name=f"sip-call-{self.call_id[:12]}")

    async def _conversation(self) -> Session | None:
        """The session of the call: a new call record (incoming), or the outbound call's own, if it is
        still waiting for its answer and its agent is still active."""
        admitted = self.admitted
        if admitted is not None:
            agent, from_number, to_number, call_id = admitted.agent, admitted.from_number, admitted.to_number, None
        else:
            assert self.outbound is not None
            grant = self.outbound.grant
            assert grant.call_id is not None
            if not await asyncio.to_thread(_closing, outbound_call_waiting, grant.call_id):
                logger.info("outbound SIP call %s answered after it was canceled: hung up", self.call_id[:12])
                return None
            phone = await asyncio.to_thread(_closing, phone_call_get, grant)
            if phone is None:
                logger.warning("outbound SIP call %s answered but its agent is gone: hung up", self.call_id[:12])
                return None
            # The outbound call's own record becomes active.
            agent, from_number, to_number, call_id = phone.agent, grant.from_number, grant.to_number, str(grant.call_id)
        return open_session(
            agent=agent,
            transport=SipTransport(self),
            channel=CallChannel.PHONE,
            from_number=from_number,
            to_number=to_number,
            provider_call_id=self.call_id,
            carrier="sip",
            call_id=call_id,
        )

    async def _run(self) -> None:
        try:
            self.session = await self._conversation()
            if self.session is None:
                return
            self.keys = KeypadTurns(self.session, self.session.agent.keypad, self.session.clock)
            if self.listening is None:
                self.listening = asyncio.create_task(self._listen())
            if self.remote_gone:  # the far end hung up while the call was being answered
                await self.session.stop(CallStatus.COMPLETED, EndedReason.CALLER_HUNG_UP)
            await self.session.run()
        except Exception:
            logger.exception("SIP call %s: the conversation failed", self.call_id[:12])
            if self.session is not None:
                await self.session.stop(CallStatus.FAILED, EndedReason.ERROR)
        finally:
            if self.listening is not None:
                self.listening.cancel()
                await asyncio.gather(self.listening, return_exceptions=True)
            if self.keys is not None:
                self.keys.close()
            self.hang_up_from_endpoint()

    async def _listen(self) -> None:
        """A hang-up asked for elsewhere (POST /calls/{id}/hang-up, a canceled call, in any process)
        reaches the call through its channel-layer group, as a Twilio call's does."""
        layer = get_channel_layer()
        if layer is None:
            return
        name = await layer.new_channel()
        group = call_group(self.call_id)
        await layer.group_add(group, name)
        try:
            while True:
                message = await layer.receive(name)
                if message.get("type") == "call.hangup":
                    self.hang_up_requested()
                    return
        finally:
            with contextlib.suppress(Exception):
                await layer.group_discard(group, name)

    def hang_up_requested(self) -> None:
        """A hang-up asked for through the API: a live call ends as the agent's, one still ringing is
        canceled (its record was ended `canceled` by the request)."""
        if self.session is not None:
            self._ending = asyncio.ensure_future(self.session.stop(CallStatus.COMPLETED, EndedReason.AGENT_ENDED_CALL))
        elif not self.connected and self.outbound is not None:
            if self.unanswered is None:
                self.unanswered = (487, "Request Terminated")
            self._not_answered()  # CANCEL (the request ended the call record `canceled` already)

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
        elif self.admitted is not None:  # ended before its session opened: the slot is free again
            self._ending = asyncio.ensure_future(asyncio.to_thread(_release, self.call_id))
            self.hang_up_from_endpoint()

    def _not_answered(self) -> None:
        """An outbound call that ended before an answer: its record ends by the far end's answer (once)."""
        if self._settled:
            return
        self._settled = True
        if self.listening is not None:
            self.listening.cancel()
        self.hang_up_from_endpoint()
        assert self.outbound is not None and self.outbound.grant.call_id is not None
        code, reason = self.unanswered or (-1, "the call ended before it was answered")
        self._ending = asyncio.ensure_future(
            asyncio.to_thread(_closing, sip_dial_unanswered, self.outbound.grant.call_id, code=code, reason=reason)
        )

    async def transfer(self, destination: str) -> None:
        """REFER the far end to `destination`; returns once the transferred call is answered (NOTIFY 200).
        ProviderError when it is refused, fails or is not answered within TRANSFER_SECONDS."""
        self._transfer = self.endpoint.loop.create_future()
        ED2.callFromThread(self._refer, destination)
        try:
            await asyncio.wait_for(self._transfer, TRANSFER_SECONDS)
        except TimeoutError:
            raise ProviderError(f"The transfer was not answered within {TRANSFER_SECONDS} s", permanent=True) from None

    # --- any thread: idempotent ------------------------------------------------------------------------
    def hang_up_from_endpoint(self) -> None:
        if self._hung_up.is_set():
            return
        self._hung_up.set()
        ED2.callFromThread(self._end_dialog)

    def _end_dialog(self) -> None:  # Sippy's thread
        if not self.remote_gone and not self.ua.isDead():
            with contextlib.suppress(Exception):
                self.ua.recvEvent(CCEventDisconnect())  # BYE, or CANCEL while it rings
        if self.rtp is not None:
            self.rtp.shutdown()
            self.rtp = None
        self._forget()

    def _forget(self) -> None:
        self.endpoint.calls.pop(self.call_id, None)

    def send_audio(self, pcm16_24k: bytes) -> None:
        rtp, media = self.rtp, self.media
        if rtp is None or media is None or not pcm16_24k:
            return
        if self._agent_audio is None or self._agent_audio.rate != media.codec.srate:
            self._agent_audio = AgentAudio(media.codec.srate)
        for frame in self._agent_audio.frames(pcm16_24k):
            rtp.soundout(AudioChunk(frame, self._agent_audio.rate))

    def drop_audio(self) -> None:
        """Barge-in: what the RTP endpoint has not sent yet is dropped (its queue of 20 ms frames; the
        packet it is sending goes out)."""
        if self._agent_audio is not None:
            self._agent_audio.reset()
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
        await self.call.transfer(destination)

    async def hang_up(self, ending: Ending, message: str = "") -> None:
        self.call.hang_up_from_endpoint()
