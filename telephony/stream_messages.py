"""Media-stream messages read and written as pure functions: no socket, no session, no database, so each
rule of the wire format is tested alone. Two dialects (`Dialect`): Twilio Media Streams
(twilio.com/docs/voice/media-streams/websocket-messages) and Telnyx media streaming
(developers.telnyx.com, "Stream call media over WebSocket"), which differ in the stream's field name
(`streamSid`, `stream_id`), in the `start` message and in what the server sends back; `media`, `dtmf`,
`mark` and `stop` read the same.

telephony/consumers.py decides what a message means for the call (its order, its streamSid, what to log);
this module only turns text into values and values into messages. A message it cannot read comes back as
`Malformed(reason)`, and the reason is what the consumer logs: a string that could not be stored (a lone
surrogate or NUL, kit.text, as in a `callSid` that would become the call record's) makes the whole frame
malformed, named by its field, never by its value.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from realtime.sockets import BAD_JSON, Unstorable, parse_json

MAX_MESSAGE_CHARS = 64_000  # Twilio's messages are a few hundred characters
_DIGIT = re.compile(r"^[0-9*#A-D]$")


@dataclass(frozen=True)
class Malformed:
    """A message (or a part of one) that cannot be read: `reason` says why, for the log."""

    reason: str


@dataclass(frozen=True)
class Start:
    """A `start` message: the stream and call it opens, and the stream token (None when missing or not a
    string); `problem`, when set, says why the stream cannot be taken (audio in another encoding)."""

    stream_sid: Any
    call_sid: Any
    token: str | None
    problem: str | None = None


def read_message(text_data: str | None) -> dict[str, Any] | Malformed:
    """One socket frame as a JSON object (its `event` and `streamSid` are read by the caller)."""
    if text_data is None:
        return Malformed("binary frame")
    if len(text_data) > MAX_MESSAGE_CHARS:
        return Malformed(f"message of {len(text_data)} characters")
    message = parse_json(text_data)
    if message is BAD_JSON:
        return Malformed("not JSON")
    if isinstance(message, Unstorable):  # a lone surrogate or NUL (kit.text): nothing of it is stored
        return Malformed(f"{message.field}: {message.reason}")
    if not isinstance(message, dict):
        return Malformed("not a JSON object")
    return message


def read_start(message: dict[str, Any]) -> Start:
    """The stream sid (of the `start` object, else of the message), the call sid and the token."""
    start = message.get("start")
    start = start if isinstance(start, dict) else {}
    parameters = start.get("customParameters")
    token = parameters.get("token") if isinstance(parameters, dict) else None
    return Start(
        stream_sid=start.get("streamSid") or message.get("streamSid"),
        call_sid=start.get("callSid"),
        token=token if isinstance(token, str) else None,
    )


def read_media(message: dict[str, Any]) -> bytes | Malformed | None:
    """The caller's audio of a `media` message (mu-law 8 kHz bytes); None for another track than the
    inbound one (not the caller's voice)."""
    media = message.get("media")
    if not isinstance(media, dict):
        return Malformed("media without a media object")
    if media.get("track", "inbound") != "inbound":
        return None
    payload = media.get("payload")
    try:
        ulaw = base64.b64decode(payload, validate=True) if isinstance(payload, str) else None
    except (binascii.Error, ValueError):
        ulaw = None
    if ulaw is None:
        return Malformed("media payload is not base64")
    return ulaw


def read_dtmf(message: dict[str, Any]) -> str | Malformed:
    """The key of a `dtmf` message: one of 0-9, *, # and A-D."""
    dtmf = message.get("dtmf")
    digit = dtmf.get("digit") if isinstance(dtmf, dict) else None
    if not isinstance(digit, str) or not _DIGIT.match(digit):
        return Malformed("dtmf without a key")
    return digit


def read_mark(message: dict[str, Any]) -> str | Malformed:
    """The name of a `mark` echo."""
    mark = message.get("mark")
    name = mark.get("name") if isinstance(mark, dict) else None
    if not isinstance(name, str):
        return Malformed("mark without a name")
    return name


def media_message(stream_sid: str, frame: bytes) -> dict[str, Any]:
    """One frame of agent audio (mu-law 8 kHz) for the caller."""
    return {"event": "media", "streamSid": stream_sid, "media": {"payload": base64.b64encode(frame).decode()}}


def mark_message(stream_sid: str, name: str) -> dict[str, Any]:
    """A mark after the audio sent so far: Twilio echoes it once that audio has played (or was cleared)."""
    return {"event": "mark", "streamSid": stream_sid, "mark": {"name": name}}


def clear_message(stream_sid: str) -> dict[str, Any]:
    """Drop the audio Twilio still holds for the caller (barge-in)."""
    return {"event": "clear", "streamSid": stream_sid}


# --- Telnyx --------------------------------------------------------------------------------------

TELNYX_ENCODING = "PCMU"  # asked for when the stream is opened (telephony/providers/telnyx.py)


def read_telnyx_start(message: dict[str, Any]) -> Start:
    """Telnyx's `start`: the stream (`stream_id`), the call (`start.call_control_id`) and the stream token,
    which the service sent as the call's `client_state` (base64, as Telnyx requires it)."""
    start = message.get("start")
    start = start if isinstance(start, dict) else {}
    state = start.get("client_state")
    try:
        token = base64.b64decode(state, validate=True).decode() if isinstance(state, str) else None
    except (binascii.Error, ValueError):
        token = None
    media_format = start.get("media_format")
    encoding = media_format.get("encoding") if isinstance(media_format, dict) else None
    problem = None
    if encoding is not None and encoding != TELNYX_ENCODING:
        problem = f"media encoding {str(encoding)[:20]!r}, not {TELNYX_ENCODING}"
    return Start(
        stream_sid=message.get("stream_id"), call_sid=start.get("call_control_id"), token=token, problem=problem
    )


def telnyx_media_message(stream_id: str, frame: bytes) -> dict[str, Any]:
    """One frame of agent audio (mu-law 8 kHz, an RTP payload) for the caller: Telnyx plays what it is sent
    on a bidirectional stream (`stream_bidirectional_mode: rtp`)."""
    return {"event": "media", "media": {"payload": base64.b64encode(frame).decode()}}


def telnyx_mark_message(stream_id: str, name: str) -> dict[str, Any]:
    return {"event": "mark", "mark": {"name": name}}


def telnyx_clear_message(stream_id: str) -> dict[str, Any]:
    return {"event": "clear"}


@dataclass(frozen=True)
class Dialect:
    """One carrier's media-stream wire format: what the consumer reads and writes differently."""

    carrier: str  # for logs
    stream_key: str  # the field naming the stream in the carrier's messages
    read_start: Callable[[dict[str, Any]], Start]
    media: Callable[[str, bytes], dict[str, Any]]
    mark: Callable[[str, str], dict[str, Any]]
    clear: Callable[[str], dict[str, Any]]


TWILIO = Dialect("Twilio", "streamSid", read_start, media_message, mark_message, clear_message)
TELNYX = Dialect(
    "Telnyx", "stream_id", read_telnyx_start, telnyx_media_message, telnyx_mark_message, telnyx_clear_message
)
