"""The native `send_digits` tool: offered on phone calls only. The agent presses keys, for example to
work through a phone menu when its instructions tell it to: `digits` is a string of 0-9, `*`, `#` and `w`
(a half-second pause). The session shell plays them as keypad tones (realtime/engine/sound/dtmf.py) into
the call's outgoing audio, after what the agent is already saying and never cut by a barge-in.

Result: {"status": "sent", "digits": "<the keys>"}; digits with any other character give an error
result naming them, and nothing is played.
"""

from __future__ import annotations

from typing import Any

from realtime.engine.tools.base import CallContext, ToolError, ToolKind

ALLOWED = frozenset("0123456789*#w")
MAX_DIGITS = 64
DESCRIPTION = (
    "Press keys on the phone's keypad, for example to choose an option of a phone menu or to enter a "
    "number when asked to. `digits`: the keys in order, 0-9, * and #, with w for a half-second pause."
)
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "digits": {
            "type": "string",
            "description": "The keys to press, for example 1, 1234# or 1w2 (w: wait half a second).",
        }
    },
    "required": ["digits"],
}


def digits_problem(digits: str) -> str | None:
    """None when `digits` can be sent, else what is wrong with it, in plain words."""
    if not digits:
        return "No digits were given: send at least one of 0-9, * and #."
    bad = sorted(set(digits) - ALLOWED)
    if bad:
        named = ", ".join(repr(character) for character in bad)
        return f"Digits may only be 0-9, * and #, with w for a pause; not {named}. Nothing was sent."
    if len(digits) > MAX_DIGITS:
        return f"At most {MAX_DIGITS} digits at a time. Nothing was sent."
    return None


class SendDigitsTool(ToolKind):
    kind = "send_digits"

    async def invoke(self, arguments: dict[str, Any], *, tool_call_id: str, context: CallContext) -> dict[str, Any]:
        digits = str(arguments.get("digits", ""))
        problem = digits_problem(digits)
        if problem is not None:
            raise ToolError(problem, permanent=True)
        return {"status": "sent", "digits": digits}

    def digits_to_send(self, result: dict[str, Any]) -> str | None:
        digits = result.get("digits")
        return digits if isinstance(digits, str) and digits else None
