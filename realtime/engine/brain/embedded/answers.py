"""The embedded brain's answers from text it holds: a knowledge passage found by `search_knowledge`,
or the facts written in the agent's own prompt; and the topics it can name when it has no answer.

A passage is read as questions and answers (knowledge/faq.py: `Q:`/`A:`, `Question:`/`Answer:`,
headings and bold questions, or plain paragraphs). In a Q&A passage the answer of the question closest
to the caller's is spoken, whole when it fits in ANSWER_WORDS, else its best sentences; in plain text
the best sentences. Never spoken: a label, a heading, the document's title, a question of the passage.
A sentence kept is kept whole with its figures (times, prices, phone numbers: the cut falls between
sentences), and the sentence after the best one is added when it carries a figure the best one lacks
("A dentist is on call 24 hours a day. Call 555 0199."). The text is the readable form (digits as
written); the voice reads its numbers as a caller expects (realtime/engine/speech/reading.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from knowledge import faq
from knowledge.chunking import paragraph_units
from knowledge.embeddings import similarities
from realtime.engine.brain.embedded.replies import ANSWER_WORDS, plain_text, trim

# Sentences of the passage that score within this of the best one are spoken with it, room permitting.
NEAR_BEST = 0.1
# The facts of a prompt answer a question when their best sentence's cosine similarity reaches this.
PROMPT_MIN_SIMILARITY = 0.45
# A best sentence that starts with one of these words is spoken with the sentence before it.
_REFERRING = frozenset("it its this that these those they them their there such he she his her".split())
_FIGURE = re.compile(r"\d")
# A prompt's sentence that tells the agent what to do is not a fact to tell a caller.
_DIRECTIVE_START = frozenset(
    """you your be always never don't do not if when keep speak use ask greet respond reply say introduce act
    stay avoid try make answer help assist take handle book find check tell give offer collect confirm
    remember only please follow refer transfer end introduce mention""".split()
)


def _sentences(text: str, title: str) -> list[str]:
    """Sentences of a block as heard, without the document's title where one runs into a sentence."""
    found = []
    for paragraph in re.split(r"\n\s*\n", text):
        for _, unit in paragraph_units(paragraph):
            spoken = plain_text(unit)
            rest = spoken[len(title) :].lstrip(" .:-\u2013\u2014")
            # "Guest Policy Cancellation Reservations can..." loses its title, "Parking is free" keeps it.
            if title and spoken.lower().startswith(title) and not rest[:1].islower() and not rest[:1] == "'":
                spoken = rest
            if re.search(r"\w", spoken):
                found.append(spoken)
    return found


def passage_sentences(passage: str, document: str = "") -> list[str]:
    """A passage's answer sentences as they are heard, in order: no heading, label, question or title."""
    title = plain_text(document).rstrip(".").lower()
    return [s for entry in faq.entries(passage) for s in _sentences(entry.answer, title) if not s.endswith("?")]


def speak_passage(passage: str, question: str, *, document: str = "") -> str:
    """What `passage` says in answer to `question` (see the module's docstring); empty when it holds no
    answer sentence."""
    title = plain_text(document).rstrip(".").lower()
    entries = [entry for entry in faq.entries(passage) if entry.answer]
    blocks = [[s for s in _sentences(entry.answer, title) if not s.endswith("?")] for entry in entries]
    kept = [(entry.question, block) for entry, block in zip(entries, blocks, strict=True) if block]
    if not any(asked for asked, _ in kept):
        return best_sentences([s for _, block in kept for s in block], question)
    # The entry closest to the caller's question: by its own question (a question may be terse) or
    # by its best sentence.
    asked_texts = [asked for asked, _ in kept if asked]
    heads = iter(similarities(question, asked_texts))
    scores = [
        max(float(next(heads)) if asked else -1.0, float(max(similarities(question, block)))) for asked, block in kept
    ]
    asked, block = kept[max(range(len(kept)), key=lambda i: scores[i])]
    if asked and len(" ".join(block).split()) <= ANSWER_WORDS:
        return " ".join(block)
    return best_sentences(block, question)


def best_sentences(sentences: Sequence[str], question: str) -> str:
    """The best of `sentences` for `question`, at most about ANSWER_WORDS words: the best one, the one
    before it when it starts with "it", "this"..., the one after it when it carries a figure the best
    lacks, and the next best that score nearly as well."""
    if not sentences:
        return ""
    scores = similarities(question, list(sentences))
    ranked = sorted(range(len(sentences)), key=lambda k: -scores[k])
    best = ranked[0]
    chosen = {best}
    words = len(sentences[best].split())

    def add(index: int) -> None:
        nonlocal words
        size = len(sentences[index].split()) if 0 <= index < len(sentences) else ANSWER_WORDS + 1
        if index not in chosen and words + size <= ANSWER_WORDS:
            chosen.add(index)
            words += size

    if sentences[best].split()[0].lower().strip(",;:") in _REFERRING and best > 0:
        add(best - 1)
    if best + 1 < len(sentences) and _FIGURE.search(sentences[best + 1]) and not _FIGURE.search(sentences[best]):
        add(best + 1)
    for k in ranked[1:]:
        if scores[k] < scores[best] - NEAR_BEST:
            break
        add(k)
    # A single sentence longer than the bound is kept whole up to half as long again (its figures too).
    limit = ANSWER_WORDS if len(chosen) > 1 else max(ANSWER_WORDS, min(words, ANSWER_WORDS * 3 // 2))
    return trim(" ".join(sentences[index] for index in sorted(chosen)), limit)


def prompt_facts(text: str) -> list[str]:
    """The sentences of a prompt that state facts ("We are open on Saturday from 10 am to 2 pm."), not
    the ones that tell the agent what to do ("Answer questions about opening hours.")."""
    facts = []
    for sentence in _sentences(text, ""):
        first = sentence.split()[0].lower().strip(",;:") if sentence.split() else ""
        if sentence.endswith("?") or first in _DIRECTIVE_START or first.endswith("ly"):
            continue
        facts.append(sentence)
    return facts


def answer_from_prompt(texts: Sequence[str], question: str) -> str:
    """The prompt's facts that answer `question` (empty when none is close enough)."""
    facts = [fact for text in texts if text for fact in prompt_facts(text)]
    if not facts:
        return ""
    if float(max(similarities(question, facts))) < PROMPT_MIN_SIMILARITY:
        return ""
    return best_sentences(facts, question)


def passage_topics(passages: Sequence[tuple[str, str, str]], limit: int = 2) -> list[str]:
    """Topics named by passages (text, document name, section), for "I can help with ...": their
    sections, else their questions' topics; never a document's title."""
    named: list[str] = []
    for text, document, section in passages:
        title = faq.heading_topic(document) if document else ""
        # A passage's own questions and headings first: its section may be the document's title.
        candidates = faq.topics(text, title=document) or ([faq.heading_topic(section)] if section else [])
        for topic in candidates:
            if topic and topic != title and topic not in named:
                named.append(topic)
    return named[:limit]
