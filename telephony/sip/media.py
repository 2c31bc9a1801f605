"""A SIP call's media: the codecs the endpoint takes and how they are named in SDP (RFC 4566, through
Sippy's SDP parser), and the caller's RTP stream with RFC 4733 telephone events taken out before Sippy's
jitter buffer and decoder."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sippy.MsgBody import MsgBody
from sippy.Rtp.Codecs.G711 import G711Codec
from sippy.Rtp.Codecs.G722 import G722Codec
from sippy.Rtp.Core.AudioChunk import pcm16_from
from sippy.Rtp.Handlers import RTPHandlers
from sippy.Rtp.Ingest import RTPInStream

from telephony.audio import Downsampler, alaw_decode, alaw_encode

TELEPHONE_EVENT = 101  # the telephone-event payload type we offer (a far end's own is kept)
KEYS = "0123456789*#ABCD"  # RFC 4733's events 0-15


class G722Wideband(G722Codec):
    """G.722 decoded to and encoded from 16 kHz (Sippy's own decodes to 8 kHz)."""

    srate = 16000


class G711ALaw(G711Codec):
    """G.711 A-law (PCMA), the mu-law codec's twin that Europe's trunks use (telephony/audio.py's tables)."""

    ptype = 8
    ename = "PCMA"

    def encode(self, chunk: Any) -> bytes:
        return alaw_encode(np.frombuffer(pcm16_from(chunk.audio), dtype="<i2"))

    def decode(self, alaw: bytes, resample: bool = True, sample_rate: int | None = None) -> Any:
        chunk = self.make_chunk(pcm16_from(alaw_decode(alaw).tobytes()), self.srate)
        if resample and (sample_rate or self.out_srate) != self.srate:
            chunk.resample(sample_rate or self.out_srate)
        return chunk

    def silence(self, nframes: int) -> bytes:
        return b"\xd5" * nframes


# The codecs the endpoint takes, best first: payload type, SDP name and clock rate, Sippy codec.
CODECS = ((9, "G722/8000", G722Wideband), (0, "PCMU/8000", G711Codec), (8, "PCMA/8000", G711ALaw))


@dataclass(frozen=True)
class Media:
    target: tuple[str, int]  # the far end's RTP address
    payload_type: int
    rtpmap: str
    codec: Any
    telephone_event: int  # the payload type of RFC 4733 events: the far end's, else ours


def sdp(host: str, port: int, codecs: tuple[tuple[int, str], ...], telephone_event: int = TELEPHONE_EVENT) -> MsgBody:
    """Our side's SDP: an offer lists every codec we take (best first), an answer the one chosen."""
    formats = " ".join(str(payload_type) for payload_type, _ in codecs)
    rtpmaps = "".join(f"a=rtpmap:{payload_type} {rtpmap}\r\n" for payload_type, rtpmap in codecs)
    return MsgBody(
        f"v=0\r\no=- {port} 1 IN IP4 {host}\r\ns=-\r\nc=IN IP4 {host}\r\nt=0 0\r\n"
        f"m=audio {port} RTP/AVP {formats} {telephone_event}\r\n{rtpmaps}"
        f"a=rtpmap:{telephone_event} telephone-event/8000\r\na=fmtp:{telephone_event} 0-15\r\n"
        "a=ptime:20\r\na=sendrecv\r\n"
    )


def offer_sdp(host: str, port: int) -> MsgBody:
    return sdp(host, port, tuple((payload_type, rtpmap) for payload_type, rtpmap, _ in CODECS))


def answer_sdp(host: str, port: int, media: Media) -> MsgBody:
    return sdp(host, port, ((media.payload_type, media.rtpmap),), media.telephone_event)


def remote_media(body: Any) -> Media | None:
    """The far end's RTP address and the best codec of its SDP we take (CODECS), or None (also for SDP that
    does not parse)."""
    if body is None:
        return None
    try:
        body.parse()
        sections = list(body.content.sections)
    except Exception:  # noqa: BLE001 - Sippy's SDP parser raises what it meets; SDP is the far end's text
        return None
    for section in sections:
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
                return Media(target, payload_type, rtpmap, codec, events[0] if events else TELEPHONE_EVENT)
    return None


def event_key(packet: bytes) -> tuple[bytes, str] | None:
    """(RTP timestamp, key) of an RFC 4733 telephone-event packet; None for an event that is no key or a
    packet too short. The timestamp is the event's: every packet of one key press repeats it."""
    offset = 12 + 4 * (packet[0] & 0x0F)  # the fixed header and its contributing sources
    if packet[0] & 0x10 and len(packet) >= offset + 4:  # a header extension
        offset += 4 + 4 * int.from_bytes(packet[offset + 2 : offset + 4], "big")
    if len(packet) < offset + 4 or packet[offset] >= len(KEYS):
        return None
    return packet[4:8], KEYS[packet[offset]]


class CallerAudio(RTPInStream):
    """Sippy's jitter buffer and decoder of the far end's audio, with RFC 4733 telephone events taken out
    before it (it would decode them as audio): each key reaches the call once, at its event's first packet.
    The codec follows the RTP parameters when they change (an outbound call learns it from the answer)."""

    def __init__(self, rtp_params: Any, audio_in: Any) -> None:
        super().__init__(rtp_params, audio_in)
        self.out_chunk_sz_samples = rtp_params.out_sr // 25  # 40 ms pieces (Sippy's: 100 ms, a turn's wait)
        self.rtp_params = rtp_params
        self.telephone_event = getattr(rtp_params, "telephone_event", TELEPHONE_EVENT)
        self._last_event: bytes | None = None

    def stream_update(self) -> None:
        with self.ring_lock:
            self.codec = self.rtp_params.codec()
            self.codec.out_srate = self.rtp_params.out_sr
            self.telephone_event = getattr(self.rtp_params, "telephone_event", TELEPHONE_EVENT)
        super().stream_update()

    def rtp_received(self, data: bytes, address: Any, rtime: Any) -> None:
        if len(data) < 12 or (data[1] & 0x7F) != self.telephone_event:
            super().rtp_received(data, address, rtime)
            return
        event = event_key(data)
        if event is not None and event[0] != self._last_event:
            self._last_event = event[0]
            self.audio_in.key(event[1])


class Handlers(RTPHandlers):
    rtp_instream_cls = CallerAudio


class AgentAudio:
    """The agent's audio (PCM16 24 kHz) at the codec's rate (8 or 16 kHz), low-pass filtered (Sippy's own
    resampling is linear, without one: what lies above the codec's band would fold back into it), in whole
    20 ms frames (Sippy pads every piece it is handed to whole packets: a smaller piece would be a gap).
    `reset()` after a barge-in."""

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self._down = Downsampler(wideband=rate == 16000)
        self._frame = rate * 2 // 50
        self._pending = b""

    def reset(self) -> None:
        self._down.reset()
        self._pending = b""

    def frames(self, pcm16_24k: bytes) -> list[bytes]:
        data = self._pending + self._down.process(pcm16_24k).tobytes()
        whole = len(data) - len(data) % self._frame
        self._pending = data[whole:]
        return [data[offset : offset + self._frame] for offset in range(0, whole, self._frame)]
