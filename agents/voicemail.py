"""An agent's `voicemail`: what happens when an answering machine picks up one of its outbound calls
(docs/guides/voicemail.md, docs/guides/voicemail.md).

- `detection`: "off" (default: the agent greets whoever answers) or "provider" (the carrier's
  answering-machine detection, Twilio's asynchronous AMD);
- `action`: "hang-up" (default: end the call at once) or "leave-message" (wait for the beep, speak
  `message`, hang up);
- `message`: what is left on the machine, with {{variables}} filled from the call's variables; required
  with leave-message, at most MAX_MESSAGE_CHARS characters.

A key left out takes its default; the setting is stored normalized (every key), so readers need no
defaults. The verdicts (Twilio's `AnsweredBy`) and what they mean are here too: the session and the
telephony layer share them.
"""

from __future__ import annotations

from typing import Any

from agents.models import DEFAULT_VOICEMAIL, default_voicemail

DETECTION_OFF = "off"
DETECTION_PROVIDER = "provider"
DETECTIONS = (DETECTION_OFF, DETECTION_PROVIDER)
ACTION_HANG_UP = "hang-up"
ACTION_LEAVE_MESSAGE = "leave-message"
ACTIONS = (ACTION_HANG_UP, ACTION_LEAVE_MESSAGE)
KEYS = ("detection", "action", "message")
MAX_MESSAGE_CHARS = 1000

DEFAULT = DEFAULT_VOICEMAIL

# Twilio's AnsweredBy values (protocols 1.7a).
HUMAN = "human"
UNKNOWN = "unknown"
MACHINE_START = "machine_start"
MACHINE_END_BEEP = "machine_end_beep"
MACHINE_END_SILENCE = "machine_end_silence"
MACHINE_END_OTHER = "machine_end_other"
FAX = "fax"
VERDICTS = (HUMAN, UNKNOWN, MACHINE_START, MACHINE_END_BEEP, MACHINE_END_SILENCE, MACHINE_END_OTHER, FAX)
# A person (or no answer from the detector): the agent talks.
TALK_VERDICTS = frozenset({HUMAN, UNKNOWN})
# The machine's greeting has ended (the beep, or silence): the moment to leave a message.
MESSAGE_END_VERDICTS = frozenset({MACHINE_END_BEEP, MACHINE_END_SILENCE, MACHINE_END_OTHER})
MACHINE_VERDICTS = frozenset({MACHINE_START, *MESSAGE_END_VERDICTS, FAX})


class VoicemailError(ValueError):
    """An invalid setting; the message names the key (`action: ...`)."""


def default_setting() -> dict[str, Any]:
    """A fresh copy of the default setting (the model field's default)."""
    return default_voicemail()


def normalize_voicemail(value: Any) -> dict[str, Any]:
    """The setting as stored, from a request body's `voicemail`; VoicemailError when it is not valid."""
    if not isinstance(value, dict):
        raise VoicemailError("Must be a JSON object with detection, action and message.")
    unknown = sorted(set(value) - set(KEYS))
    if unknown:
        raise VoicemailError(f"Unknown key {unknown[0]!r}; the keys are detection, action and message.")
    setting = default_setting()
    detection = value.get("detection", setting["detection"])
    if detection not in DETECTIONS:
        raise VoicemailError(f"detection: must be one of {', '.join(DETECTIONS)}, not {_shown(detection)}.")
    action = value.get("action", setting["action"])
    if action not in ACTIONS:
        raise VoicemailError(f"action: must be one of {', '.join(ACTIONS)}, not {_shown(action)}.")
    message = value.get("message", setting["message"])
    if message is None:
        message = ""
    if not isinstance(message, str):
        raise VoicemailError("message: must be a string.")
    if "\x00" in message:
        raise VoicemailError("message: may not contain NUL characters.")
    surrogate = next((c for c in message if 0xD800 <= ord(c) <= 0xDFFF), None)
    if surrogate is not None:
        raise VoicemailError(f"message: surrogate characters are not allowed: U+{ord(surrogate):04X}.")
    if len(message) > MAX_MESSAGE_CHARS:
        raise VoicemailError(f"message: at most {MAX_MESSAGE_CHARS} characters (this one has {len(message)}).")
    message = message.strip()
    if action == ACTION_LEAVE_MESSAGE and not message:
        raise VoicemailError("message: required when action is leave-message (what the agent says after the beep).")
    return {"detection": detection, "action": action, "message": message}


def detection_on(setting: Any) -> bool:
    """Whether the agent asks the carrier to tell a person from a machine on its outbound calls."""
    return isinstance(setting, dict) and setting.get("detection") == DETECTION_PROVIDER


def leaves_message(setting: Any) -> bool:
    return detection_on(setting) and setting.get("action") == ACTION_LEAVE_MESSAGE and bool(setting.get("message"))


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
