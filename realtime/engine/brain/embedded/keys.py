"""Keys the caller (or a phone menu) asks the agent to press: "press 1", "enter 1 2 3 4 pound",
"dial star 5". The embedded brain answers such a turn with the `send_digits` tool when it is offered
(phone calls). The keypad's own turns ("the caller entered 4 5 6 7", "the caller pressed 4") use other
verb forms and never match.
"""

from __future__ import annotations

import re

VERBS = frozenset({"press", "enter", "dial", "type", "push", "hit", "key"})
KEY_WORDS = {
    "zero": "0",
    "oh": "0",
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "star": "*",
    "asterisk": "*",
    "pound": "#",
    "hash": "#",
    "hashtag": "#",
}
# Words that may stand between the keys of one request ("one and then two").
JOINERS = frozenset({"and", "then", "the", "key", "keys", "button", "number", "digits", "digit"})
_TOKEN = re.compile(r"[a-z]+|\d+|[*#]")


def keys_asked(text: str) -> str | None:
    """The keys a turn asks to press, in order ("123#"), or None when it asks for none."""
    tokens = _TOKEN.findall(text.lower())
    for start, token in enumerate(tokens):
        if token not in VERBS:
            continue
        keys: list[str] = []
        for word in tokens[start + 1 :]:
            if word.isdigit() or word in ("*", "#"):
                keys.append(word)
            elif word in KEY_WORDS:
                keys.append(KEY_WORDS[word])
            elif word in JOINERS:
                continue
            else:
                break
        if keys:
            return "".join(keys)
    return None
