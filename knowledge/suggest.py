"""Name and description suggested from a document's own text, without any network call."""

from __future__ import annotations

import re

import numpy as np

from knowledge import faq
from knowledge.chunking import split_sentences
from knowledge.embeddings import embed

NAME_MAX = 200
DESCRIPTION_MAX = 200
# Only the start of a long document is read for the description: bounded time in the upload request.
DESCRIPTION_SCAN_CHARS = 20_000
DESCRIPTION_CANDIDATES = 48
DESCRIPTION_TOPICS = 3

_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_SECTION = re.compile(r"^ {0,3}#{2,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)  # below the title
_MARKUP = re.compile(r"[*_`>#|]+|^\s*([-+]|\d+[.)])\s+|\[([^\]]*)\]\([^)]*\)")
_WORD = re.compile(r"[^\W\d_]{2,}")


def _plain(line: str, *, trim: str = " -:.") -> str:
    text = _MARKUP.sub(lambda m: m.group(2) or " ", line)
    return re.sub(r"\s+", " ", text).strip(trim)


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0].rstrip(" ,;:-")
    return f"{cut}…"


def suggest_name(text: str, *, markdown: bool, fallback: str = "Untitled document") -> str:
    """The first Markdown heading, else the first line with words in it."""
    if markdown:
        heading = _HEADING.search(text)
        if heading and _plain(heading.group(1)):
            return _shorten(_plain(heading.group(1)), NAME_MAX)
    for line in text.split("\n"):
        plain = _plain(line)
        if _WORD.search(plain):
            return _shorten(plain, NAME_MAX)
    return fallback


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def suggest_description(text: str) -> str | None:
    """What the document is: for questions and answers (knowledge/faq.py), "Answers to questions about"
    the topics of its first questions; for a document of several sections, "About" its sections;
    otherwise the sentence closest to the mean embedding of its first sentences (never a question)."""
    scanned = text[:DESCRIPTION_SCAN_CHARS]
    title = _HEADING.search(scanned)
    found = faq.entries(scanned)
    if faq.is_faq(found):
        topics = faq.topics(scanned, title=title.group(1) if title else "", limit=DESCRIPTION_TOPICS)
        if topics:
            return _shorten(f"Answers to questions about {_listed(topics)}.", DESCRIPTION_MAX)
    sections = [faq.heading_topic(match.group(1)) for match in _SECTION.finditer(scanned)]
    sections = [section for index, section in enumerate(sections) if section and section not in sections[:index]]
    if len(sections) >= 2:
        return _shorten(f"About {_listed(sections[:DESCRIPTION_TOPICS])}.", DESCRIPTION_MAX)
    body = _HEADING.sub("", scanned)
    candidates: list[str] = []
    for paragraph in re.split(r"\n[ \t]*\n", body):
        for sentence in split_sentences(" ".join(_plain(line, trim=" ") for line in paragraph.split("\n"))):
            if len(_WORD.findall(sentence)) >= 4 and not sentence.endswith("?") and not faq.LABEL.match(sentence):
                candidates.append(sentence)
        if len(candidates) >= DESCRIPTION_CANDIDATES:
            break
    candidates = candidates[:DESCRIPTION_CANDIDATES]
    if not candidates:
        return None
    if len(candidates) == 1:
        return _shorten(candidates[0], DESCRIPTION_MAX)
    vectors = embed(candidates)
    centroid = vectors.mean(axis=0)
    best = int(np.argmax(vectors @ centroid))
    return _shorten(candidates[best], DESCRIPTION_MAX)
