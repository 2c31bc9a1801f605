"""A short extractive summary of a transcript, computed offline (no network, no model).

Sentences are scored by how often their content words occur in the whole conversation (Luhn-style
frequency scoring); the best few are kept in their original order, each tagged with its speaker.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

MAX_SENTENCES = 3
MAX_CHARS = 500

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[^\W\d_]{3,}", re.UNICODE)
_STOPWORDS = frozenset(
    """
    the and for are but not you your yours with this that these those have has had was were will would
    could should can may might must shall from into onto over under about above below than then them they
    their there here what when where which who whom whose why how all any both each few more most other
    some such only own same very just also too our ours out off its it's i'm you're we're they're i've
    yes yeah okay hello thanks thank please sure right well let get got one two like want need know
    para por con los las una uno del que sus est esta este como pero
    """.split()
)

SPEAKERS = {"user": "Caller", "assistant": "Agent"}


def _words(text: str) -> list[str]:
    return [w for w in (m.group(0).lower() for m in _WORD.finditer(text)) if w not in _STOPWORDS]


def summarize(messages: Iterable[tuple[str, str]]) -> str:
    """`messages` are (role, content) pairs in order; only caller and agent turns are summarized."""
    sentences: list[tuple[str, str]] = []
    seen: set[str] = set()
    for role, content in messages:
        if role not in SPEAKERS:
            continue
        for sentence in _SENTENCE_END.split(" ".join(content.split())):
            # Repeats ("Could you repeat that?") and greetings without content words say nothing.
            key = sentence.lower()
            if sentence and key not in seen and _words(sentence):
                seen.add(key)
                sentences.append((role, sentence))
    if not sentences:
        return ""
    frequency = Counter(w for _, s in sentences for w in set(_words(s)))

    def score(item: tuple[int, tuple[str, str]]) -> float:
        words = _words(item[1][1])
        if not words:
            return 0.0
        return sum(frequency[w] for w in set(words)) / (len(words) ** 0.5)

    ranked = sorted(enumerate(sentences), key=lambda item: (-score(item), item[0]))
    # The caller's first sentence says why they called: always keep it when there is one.
    first_user = next((i for i, (role, _) in enumerate(sentences) if role == "user"), None)
    chosen = {first_user} if first_user is not None else set()
    for index, _ in ranked:
        if len(chosen) >= MAX_SENTENCES:
            break
        chosen.add(index)
    parts = [f"{SPEAKERS[sentences[i][0]]}: {sentences[i][1]}" for i in sorted(chosen)]
    text = " ".join(parts)
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1].rstrip() + "…"
