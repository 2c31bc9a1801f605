"""The media-stream wire formats alone (telephony/stream_messages.py), Twilio's and Telnyx's: what is read
from a message, why a message is refused, and the messages written back."""

from __future__ import annotations

import base64
import json

from telephony.stream_messages import (
    MAX_MESSAGE_CHARS,
    TELNYX,
    Malformed,
    Start,
    clear_message,
    mark_message,
    media_message,
    read_dtmf,
    read_mark,
    read_media,
    read_message,
    read_start,
)


def test_it_refuses_what_is_not_one_json_object():
    assert read_message(None) == Malformed("binary frame")
    assert read_message("x" * (MAX_MESSAGE_CHARS + 1)) == Malformed(f"message of {MAX_MESSAGE_CHARS + 1} characters")
    assert read_message("{not json") == Malformed("not JSON")
    assert read_message("[1, 2]") == Malformed("not a JSON object")
    assert read_message('{"event": "connected"}') == {"event": "connected"}


def test_a_string_that_cannot_be_stored_makes_the_frame_malformed_naming_the_field():
    nul = '{"event": "start", "start": {"callSid": "CA1\\u0000", "customParameters": {"token": "t"}}}'
    assert read_message(nul) == Malformed("start.callSid: Must not contain the NUL character (\\u0000).")
    surrogate = read_message('{"event": "mark", "mark": {"name": "\\udc00"}}')
    assert isinstance(surrogate, Malformed) and surrogate.reason.startswith("mark.name: Must not contain a lone")
    assert read_message('{"event": "dtmf", "dtmf": {"digit": "\\u0031"}}') == {"event": "dtmf", "dtmf": {"digit": "1"}}


def test_start_reads_the_token_and_falls_back_to_the_message_stream_sid():
    message = {"event": "start", "streamSid": "MZ1", "start": {"callSid": "CA1", "customParameters": {"token": "t"}}}
    assert read_start(message) == Start(stream_sid="MZ1", call_sid="CA1", token="t")
    assert read_start({"start": {"streamSid": "MZ2", "customParameters": {"token": 7}}}) == Start("MZ2", None, None)
    assert read_start({"start": "nonsense"}) == Start(None, None, None)


def test_media_is_the_inbound_track_decoded_and_other_tracks_are_ignored():
    payload = base64.b64encode(b"\xff\x7f").decode()
    assert read_media({"media": {"payload": payload}}) == b"\xff\x7f"
    assert read_media({"media": {"track": "outbound", "payload": payload}}) is None
    assert read_media({"media": {"payload": "not base64!"}}) == Malformed("media payload is not base64")
    assert read_media({"media": "x"}) == Malformed("media without a media object")


def test_dtmf_and_mark_need_a_key_and_a_name():
    assert read_dtmf({"dtmf": {"digit": "#"}}) == "#"
    assert read_dtmf({"dtmf": {"digit": "12"}}) == Malformed("dtmf without a key")
    assert read_mark({"mark": {"name": "a1"}}) == "a1"
    assert read_mark({"mark": {}}) == Malformed("mark without a name")


def test_the_messages_written_back():
    assert media_message("MZ1", b"\x00\xff") == {"event": "media", "streamSid": "MZ1", "media": {"payload": "AP8="}}
    assert mark_message("MZ1", "a3") == {"event": "mark", "streamSid": "MZ1", "mark": {"name": "a3"}}
    assert json.dumps(clear_message("MZ1")) == '{"event": "clear", "streamSid": "MZ1"}'


def test_telnyx_start_reads_the_token_from_the_client_state_and_refuses_other_encodings():
    state = base64.b64encode(b"t0ken").decode()
    start = {"call_control_id": "v3:abc", "client_state": state, "media_format": {"encoding": "PCMU"}}
    assert TELNYX.read_start({"event": "start", "stream_id": "s1", "start": start}) == Start("s1", "v3:abc", "t0ken")
    assert TELNYX.read_start({"stream_id": "s1", "start": {"client_state": "not base64!"}}) == Start("s1", None, None)
    wideband = TELNYX.read_start({"stream_id": "s1", "start": {**start, "media_format": {"encoding": "L16"}}})
    assert wideband.problem == "media encoding 'L16', not PCMU"


def test_telnyx_messages_written_back_name_no_stream():
    assert TELNYX.media("s1", b"\x00\xff") == {"event": "media", "media": {"payload": "AP8="}}
    assert TELNYX.mark("s1", "a3") == {"event": "mark", "mark": {"name": "a3"}}
    assert TELNYX.clear("s1") == {"event": "clear"}
