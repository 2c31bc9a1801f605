"""The embedded brain presses keys when asked ("press 1", "enter 1 2 3 4 pound") with send_digits, on
calls that offer it (phone calls), through the real tool kind."""

from __future__ import annotations

import json

import pytest

from realtime.engine.brain.embedded.keys import keys_asked
from realtime.engine.brain.embedded.responder import EmbeddedBrain
from realtime.engine.contracts import BrainContext, TextPiece, ToolCall, ToolSpec, Turn
from realtime.engine.tools import send_digits
from realtime.engine.tools.base import CallContext, ToolError

SEND_DIGITS = ToolSpec("send_digits", send_digits.DESCRIPTION, send_digits.PARAMETERS)
PHONE = BrainContext(agent_name="Kim", language="en-US", instructions="Work through phone menus.", tools=(SEND_DIGITS,))
BROWSER = BrainContext(agent_name="Kim", language="en-US", instructions="Work through phone menus.")


async def turn(context: BrainContext, text: str) -> tuple[list[ToolCall], str]:
    """One caller turn the way the shell runs it: tool calls go to the real send_digits kind."""
    brain = EmbeddedBrain(language="en-US")
    history = [Turn(role="user", text=text)]
    calls: list[ToolCall] = []
    said: list[str] = []
    for _ in range(3):
        call = None
        async for output in brain.respond(context, tuple(history)):
            if isinstance(output, TextPiece):
                said.append(output.text)
            elif isinstance(output, ToolCall):
                call = output
        if call is None:
            break
        calls.append(call)
        try:
            result = await send_digits.SendDigitsTool().invoke(
                call.arguments, tool_call_id=call.id, context=CallContext(call_id=None, agent_id="a")
            )
        except ToolError as exc:
            result = {"error": exc.message}
        history += [
            Turn(role="assistant", tool_calls=(call,)),
            Turn(role="tool", text=json.dumps(result), tool_call_id=call.id, name=call.name),
        ]
    return calls, " ".join(said)


@pytest.mark.parametrize(
    ("said", "keys"),
    [
        ("press 1", "1"),
        ("Please press one.", "1"),
        ("enter 1 2 3 4 pound", "1234#"),
        ("dial star five and then two", "*52"),
        ("type in 4321 hash", None),  # "in" is not a key: nothing after the verb
        ("the caller entered 4 5 6 7", None),  # the keypad's own turns never match
        ("the caller pressed 4", None),
        ("what can you do", None),
    ],
)
def test_it_reads_the_keys_a_turn_asks_for(said: str, keys: str | None) -> None:
    assert keys_asked(said) == keys


async def test_asked_to_press_keys_on_a_phone_call_it_sends_them_then_says_done() -> None:
    calls, said = await turn(PHONE, "enter 1 2 3 4 pound")
    assert [(call.name, call.arguments) for call in calls] == [("send_digits", {"digits": "1234#"})]
    assert said == "Done."


async def test_without_send_digits_offered_it_presses_nothing() -> None:
    calls, said = await turn(BROWSER, "press 1")
    assert calls == [] and said
