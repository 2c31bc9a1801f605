"""Caller keypad gathering (telephony/keypad.py), driven by hand-told time."""

from __future__ import annotations

from telephony.keypad import KeypadGatherer


def test_consecutive_keys_become_one_turn_after_the_timeout() -> None:
    keypad = KeypadGatherer(enabled=True, timeout_s=2.0, terminator="#")
    assert keypad.press("4", 10.0) is None
    assert keypad.press("5", 10.5) is None
    assert keypad.press("6", 11.9) is None
    assert keypad.press("7", 13.8) is None
    assert keypad.deadline == 15.8
    assert keypad.expire(15.7) is None
    assert keypad.expire(15.8) == "the caller entered 4 5 6 7"
    assert keypad.deadline is None and keypad.expire(99.0) is None


def test_the_terminator_ends_the_turn_at_once_and_is_not_a_digit() -> None:
    keypad = KeypadGatherer(enabled=True, timeout_s=2.0, terminator="#")
    assert keypad.press("1", 0.0) is None
    assert keypad.press("*", 0.1) is None  # not the terminator: a key like any other
    assert keypad.press("#", 0.2) == "the caller entered 1 *"
    assert keypad.deadline is None
    # The terminator alone is a turn of its own.
    assert keypad.press("#", 5.0) == "the caller pressed #"


def test_without_a_terminator_only_the_timeout_ends_the_turn() -> None:
    keypad = KeypadGatherer(enabled=True, timeout_s=0.5, terminator="")
    for at, key in enumerate("12#"):
        assert keypad.press(key, at * 0.1) is None
    assert keypad.expire(0.7) == "the caller entered 1 2 #"


def test_a_disabled_keypad_makes_each_key_a_turn() -> None:
    keypad = KeypadGatherer(enabled=False, timeout_s=2.0, terminator="#")
    assert [keypad.press(key, 0.0) for key in "45#"] == [
        "the caller pressed 4",
        "the caller pressed 5",
        "the caller pressed #",
    ]
    assert keypad.deadline is None


def test_an_agents_settings_and_a_broken_stored_value() -> None:
    keypad = KeypadGatherer.for_agent({"enabled": True, "timeoutMs": 3500, "terminator": "*"})
    assert (keypad.enabled, keypad.timeout_s, keypad.terminator) == (True, 3.5, "*")
    fallback = KeypadGatherer.for_agent({"timeoutMs": "soon"})
    assert (fallback.enabled, fallback.timeout_s, fallback.terminator) == (True, 2.0, "#")


def test_a_caller_who_keeps_pressing_still_gets_a_turn() -> None:
    keypad = KeypadGatherer(enabled=True, timeout_s=2.0, terminator="#")
    turns = [keypad.press("1", 0.0) for _ in range(64)]
    assert turns[:-1] == [None] * 63 and turns[-1] == "the caller entered " + " ".join("1" * 64)
