"""Questions and answers in a document or a passage of one, in the usual FAQ forms, and the topics
they name.

A question is a line labelled `Q:`, `Q1.`, `Question:` (bold or not, in a list or not), a heading that
ends with "?", a bold question that opens a line (`**When are you open?** We open at 9.`) or a line
that is one question; its answer is what follows up to the next question or heading, without its
`A:`/`Answer:` label (also when it follows the question on the same line). The other headings name a
section. `entries` reads a text in this shape, for the embedded brain's answers (only what answers is
spoken, never a label, a heading or the question) and for a document's suggested description.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from knowledge.chunking import heading_lines

_EMPHASIS = r"(?:\*\*|__|\*|_)?"
_LEAD = r"^\s*(?:>\s*)?(?:[-*+]\s+|\d+[.)]\s+)?"
# A label: Q, A, Question, Answer, Ans, maybe numbered ("Q1"), then ":", ".", ")" or a dash.
LABEL = re.compile(
    _LEAD + _EMPHASIS + r"\s*(q|question|a|ans|answer)\s*\d{0,3}\s*[:.)\u2013\u2014-]" + _EMPHASIS + r"(?:\s+|$)",
    re.IGNORECASE,
)
# An answer label after a question on the same line ("Q: When are you open? A: From 9.").
_INLINE_ANSWER = re.compile(
    r"(?<=\?)"
    + _EMPHASIS
    + r"\s+"
    + _EMPHASIS
    + r"(?:a|ans|answer)\s*\d{0,3}\s*[:.)\u2013\u2014-]"
    + _EMPHASIS
    + r"\s+",
    re.IGNORECASE,
)
# A bold question that opens a line, its answer after it.
_BOLD_QUESTION = re.compile(_LEAD + r"(\*\*|__)(?P<question>[^*_]+?\?)\s*(?:\1)\s*(?P<rest>.*)$")
_HEADING_MARK = re.compile(r"^\s{0,3}#{1,6}\s*|\s*#+\s*$")
_MARKUP = re.compile(r"(\*\*|__|`+)")

# Words of a question that do not name its topic ("what are your opening hours" -> "opening hours").
_QUESTION_WORDS = frozenset(
    """what when where which who whom whose why how is are am was were do does did can could will would
    shall should may might must i me my we us our you your yours it its it's there their they a an the
    to of for in on at by with about much many long often soon early late if have has had get got be
    been any some anything something there's what's when's where's how's i'm let tell know need want
    please possible ok okay also still just here this that these those up""".split()
)
# Verbs that only carry a question's topic ("do you take insurance" -> "insurance").
_CARRIER_VERBS = frozenset(
    "take accept offer provide allow support have give make bring use find see reach contact call".split()
)
# A topic said as a verb, as a caller's subject ("where can I park" -> "parking").
_TOPIC_OF_VERB = {
    "open": "opening hours",
    "close": "opening hours",
    "closed": "opening hours",
    "park": "parking",
    "pay": "payment",
    "book": "booking",
    "cancel": "cancellations",
    "deliver": "delivery",
    "ship": "shipping",
    "return": "returns",
    "refund": "refunds",
    "cost": "prices",
    "costs": "prices",
    "charge": "prices",
    "eat": "food",
    "stay": "your stay",
}
TOPIC_WORDS = 4


@dataclass
class Entry:
    """A question and its answer (`question` empty: text under a heading or at the start)."""

    question: str = ""
    section: str = ""  # the heading above it, if any
    lines: list[str] = field(default_factory=list)  # the answer's lines, labels and markup left as written

    @property
    def answer(self) -> str:
        return "\n".join(self.lines).strip()


def _plain(text: str) -> str:
    return re.sub(r"\s+", " ", _MARKUP.sub("", _HEADING_MARK.sub("", text))).strip()


def _split_inline(lines: list[str]) -> list[str]:
    split: list[str] = []
    for line in lines:
        split.extend(_INLINE_ANSWER.sub("\nA: ", line).split("\n") if "?" in line else [line])
    return split


def _one_question(line: str) -> bool:
    plain = _plain(re.sub(_LEAD, "", line))
    return plain.endswith("?") and not re.search(r"[.!?]\s", plain[:-1])


def entries(text: str) -> list[Entry]:
    """The text as questions with their answers, in order (see the module's docstring)."""
    lines = _split_inline(text.split("\n"))
    headings = heading_lines("\n".join(lines))
    found: list[Entry] = []
    current = Entry()
    section = ""

    def start(question: str = "", heading: str = "") -> None:
        nonlocal current, section
        if current.question or current.answer:
            found.append(current)
        section = heading or section
        current = Entry(question=question, section=section)

    for index, line in enumerate(lines):
        if index in headings:
            plain = _plain(line)
            if plain.endswith("?"):
                start(question=plain)
            else:
                start(heading=plain)
            continue
        label = LABEL.match(line)
        if label:
            rest = line[label.end() :]
            if label.group(1).lower().startswith("q"):
                start(question=_plain(rest))
            else:
                current.lines.append(rest)
            continue
        bold = _BOLD_QUESTION.match(line)
        if bold:
            start(question=_plain(bold.group("question")))
            if bold.group("rest").strip():
                current.lines.append(bold.group("rest"))
            continue
        if line.strip() and _one_question(line) and not current.answer.endswith(":"):
            start(question=_plain(re.sub(_LEAD, "", line)))
            continue
        current.lines.append(line)
    start()
    return found


def is_faq(found: list[Entry]) -> bool:
    """Questions with answers: at least one question that has an answer."""
    return any(entry.question and entry.answer for entry in found)


def topic_of(question: str) -> str:
    """What a question is about, as a short phrase: "What are your opening hours?" -> "opening hours",
    "What if I have a dental emergency?" -> "dental emergency", "Where can I park?" -> "parking"."""
    words = re.findall(r"[\w'\u2019-]+", question.lower().replace("\u2019", "'"))
    kept = [word for word in words if word not in _QUESTION_WORDS]
    while len(kept) > 1 and kept[0] in _CARRIER_VERBS:
        kept = kept[1:]
    if not kept:
        return ""
    if len(kept) == 1 or (kept[0] in _TOPIC_OF_VERB and len(kept) <= 2):
        if kept[0] in _TOPIC_OF_VERB:
            return _TOPIC_OF_VERB[kept[0]]
    return " ".join(kept[:TOPIC_WORDS])


def heading_topic(heading: str) -> str:
    """A section heading as a topic ("Opening Hours" -> "opening hours"; acronyms stay)."""
    plain = _plain(heading).rstrip(".:?!")
    words = [word if (word.isupper() and len(word) > 1) else word.lower() for word in plain.split()]
    return " ".join(words)


def topics(text: str, *, title: str = "", limit: int = 3) -> list[str]:
    """The topics a text covers, in order, without repeats: its questions' topics, then its sections'
    headings; never the document's title (`title`, or the text's first line)."""
    found = entries(text)
    first_line = next((line for line in text.split("\n") if line.strip()), "")
    skip = {heading_topic(title) if title else "", heading_topic(first_line)}
    asked = [topic_of(entry.question) for entry in found if entry.question and entry.answer]
    sections = [heading_topic(entry.section) for entry in found if entry.section and entry.answer]
    named: list[str] = []
    # Questions and answers are named by their questions (their sections may be only a title).
    for topic in [*asked, *sections] if asked else sections:
        if topic and topic not in skip and topic not in named:
            named.append(topic)
    return named[:limit]
