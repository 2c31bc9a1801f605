"""An agent's `keypad`: how the keys a caller presses on a phone call reach the agent.

`{enabled, timeoutMs, terminator}` (default `{"enabled": true, "timeoutMs": 2000, "terminator": "#"}`):
- enabled: consecutive keys are gathered into one caller turn ("the caller entered 4 5 6 7"), ended by
  `timeoutMs` without a key or by the terminator (not part of the digits);
- disabled: each key is a caller turn of its own ("the caller pressed 4").

A key left out of the object takes its default; the object is stored normalized (every key), so readers
need no defaults. The gathering itself is telephony/keypad.py's.
"""

from __future__ import annotations

from typing import Any

from agents.models import DEFAULT_KEYPAD, default_keypad

TIMEOUT_MS_RANGE = (500, 10000)
TERMINATORS = ("#", "*", "")
KEYS = tuple(DEFAULT_KEYPAD)


class KeypadError(ValueError):
    """An invalid keypad object; the message names the key (`timeoutMs: ...`)."""


def normalize_keypad(value: Any) -> dict[str, Any]:
    """The keypad settings as stored, from a request body's `keypad`; KeypadError when not valid."""
    if not isinstance(value, dict):
        raise KeypadError("Must be a JSON object with enabled, timeoutMs and terminator.")
    unknown = sorted(str(key) for key in value if key not in KEYS)
    if unknown:
        raise KeypadError(f"Unknown key {unknown[0]!r}; the keys are enabled, timeoutMs and terminator.")
    keypad = default_keypad()
    if "enabled" in value:
        if not isinstance(value["enabled"], bool):
            raise KeypadError("enabled: must be true or false.")
        keypad["enabled"] = value["enabled"]
    if "timeoutMs" in value:
        timeout = value["timeoutMs"]
        low, high = TIMEOUT_MS_RANGE
        # A whole float (2000.0) is a whole number, as JSON Schema's integer has it.
        whole = (isinstance(timeout, int) and not isinstance(timeout, bool)) or (
            isinstance(timeout, float) and timeout.is_integer()
        )
        if not whole or not low <= timeout <= high:
            raise KeypadError(f"timeoutMs: must be a whole number of milliseconds from {low} to {high}.")
        keypad["timeoutMs"] = int(timeout)
    if "terminator" in value:
        terminator = value["terminator"]
        if not isinstance(terminator, str) or terminator not in TERMINATORS:
            raise KeypadError('terminator: must be "#", "*" or "" (no terminator).')
        keypad["terminator"] = terminator
    return keypad


def keypad_of(stored: Any) -> dict[str, Any]:
    """An agent's stored keypad settings as used on a call: a value that is not valid (written around
    the API) falls back to the defaults rather than failing the call."""
    try:
        return normalize_keypad(stored)
    except KeypadError:
        return default_keypad()
