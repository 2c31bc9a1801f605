"""The channel-layer group of a live phone call, by the carrier's call id (Twilio's CallSid, Telnyx's call
control id, a SIP Call-ID): whatever holds the call (a media-stream consumer, the SIP endpoint) joins it;
status callbacks and call control, possibly from another process, send to it."""

from __future__ import annotations

import re

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def call_group(call_sid: str) -> str:
    """The group of the live call `call_sid`."""
    return "call." + _UNSAFE.sub("_", call_sid)[:80]
