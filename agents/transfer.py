"""An agent's `transfer`: how `transfer_call` passes the caller to a person
(docs/guides/phone-calls.md#warm-transfers).

`{mode, briefing, message, ringTimeoutSeconds}` (default `{"mode": "cold", "briefing": "summary",
"message": "", "ringTimeoutSeconds": 30}`):
- `mode`: "cold" (default: the call is handed to the number at once) or "warm" (the caller holds while the
  person is called and briefed; they press 1 to take the call, otherwise the caller is back with the agent);
- `briefing`: what the person hears on a warm transfer: "summary" (default: a summary of the call so far,
  written by the agent's brain) or "static" (`message`);
- `message`: the static briefing, with {{variables}} filled from the call's; at most MAX_MESSAGE_CHARS
  characters as sent, stored trimmed; required (not blank) when `briefing` is "static";
- `ringTimeoutSeconds`: 5 to 120 (default 30), how long the person's phone rings before the caller is back
  with the agent.

A key left out takes its default, an unknown key is refused; the setting is stored normalized (every key),
so readers need no defaults. The engine reads it through `transfer_setting(agent)`
(realtime/engine/tools/transfer_call.py).
"""

from __future__ import annotations

from typing import Any

from agents.models import DEFAULT_TRANSFER, default_transfer

MODE_COLD = "cold"
MODE_WARM = "warm"
MODES = (MODE_COLD, MODE_WARM)
BRIEFING_SUMMARY = "summary"
BRIEFING_STATIC = "static"
BRIEFINGS = (BRIEFING_SUMMARY, BRIEFING_STATIC)
MAX_MESSAGE_CHARS = 1000
RING_TIMEOUT_SECONDS_RANGE = (5, 120)
KEYS = tuple(DEFAULT_TRANSFER)
DEFAULT = DEFAULT_TRANSFER


class TransferError(ValueError):
    """An invalid setting: `key` is the key inside it ("mode", "ringTimeoutSeconds"), or "" for the whole."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}" if key else message)
        self.key = key
        self.message = message


def normalize_transfer(value: Any) -> dict[str, Any]:
    """The setting as stored, from a request body's `transfer`; TransferError when it is not valid."""
    if not isinstance(value, dict):
        raise TransferError("", "Must be a JSON object with mode, briefing, message and ringTimeoutSeconds.")
    unknown = sorted(str(key) for key in value if key not in KEYS)
    if unknown:
        raise TransferError(unknown[0], "Unknown key; the keys are mode, briefing, message and ringTimeoutSeconds.")
    setting = default_transfer()
    for key, allowed in (("mode", MODES), ("briefing", BRIEFINGS)):
        if key in value:
            chosen = value[key]
            if not isinstance(chosen, str) or chosen not in allowed:
                raise TransferError(key, f"Must be one of {', '.join(allowed)}, not {_shown(chosen)}.")
            setting[key] = chosen
    if "message" in value:
        setting["message"] = _message(value["message"])
    if "ringTimeoutSeconds" in value:
        setting["ringTimeoutSeconds"] = _seconds(value["ringTimeoutSeconds"])
    if setting["briefing"] == BRIEFING_STATIC and not setting["message"]:
        raise TransferError(
            "message", 'Required when briefing is "static" (what the person hears before taking the call).'
        )
    return setting


def _message(value: Any) -> str:
    if not isinstance(value, str):
        raise TransferError("message", f"Must be a string, not {_shown(value)}.")
    if len(value) > MAX_MESSAGE_CHARS:
        raise TransferError("message", f"At most {MAX_MESSAGE_CHARS} characters (this one has {len(value)}).")
    if any(0xD800 <= ord(c) <= 0xDFFF or c == "\x00" for c in value):
        raise TransferError("message", "May not contain NUL or surrogate characters.")
    return value.strip()


def _seconds(value: Any) -> int:
    low, high = RING_TIMEOUT_SECONDS_RANGE
    # A whole float (30.0) is a whole number, as JSON Schema's integer has it.
    whole = (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, float) and value.is_integer()
    )
    if not whole or not low <= value <= high:
        raise TransferError(
            "ringTimeoutSeconds", f"Must be a whole number of seconds from {low} to {high}, not {_shown(value)}."
        )
    return int(value)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
