"""Chunking: sections by heading, then paragraphs, then sentences.

Headings are Markdown's `#` lines and, in every document type, bare heading lines as plain text and
PDFs have them (see `plain_headings`): a title or a "Parking" line is a heading, never chunk text.
A paragraph (text between blank lines) ends a chunk, so that a short FAQ of five facts gives five
chunks a caller can be told one by one; a paragraph shorter than MIN_TOKENS, or one that ends with
"?" or ":" (a question and its answer, a lead-in and its list), stays with the next one. A paragraph
longer than TARGET_TOKENS model tokens is cut between sentences into chunks of about TARGET_TOKENS
(never more than MAX_TOKENS, below the model's 256-token window so that nothing is cut off when
embedded) that overlap by up to OVERLAP_TOKENS. Each chunk keeps its heading path and (for PDFs) its
page number.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from knowledge.embeddings import count_tokens

TARGET_TOKENS = 180
MAX_TOKENS = 230
OVERLAP_TOKENS = 40
# A paragraph shorter than this (a title line, "Note:", a one-word answer) stays with the next one.
MIN_TOKENS = 16
# A bare heading line: a few words, no sentence punctuation at its end.
PLAIN_HEADING_WORDS = 8
PLAIN_HEADING_CHARS = 70
# Levels of bare headings, below every Markdown level: a title (or the first of two heading lines in a
# row) and a section.
PLAIN_TITLE_LEVEL = 7
PLAIN_SECTION_LEVEL = 8

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_LIST_OR_TABLE = re.compile(r"^\s*([-*+]\s|\d+[.)]\s|\|)")
# A sentence ends with . ! ? (maybe followed by quotes or brackets) before white space and a capital,
# a digit or an opening quote/bracket.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_BLANK_LINES = re.compile(r"\n[ \t]*\n+")
_ENDS_SENTENCE = re.compile(r"[.!?:;,\"')\]]$")
_STARTS_UPPER = re.compile(r"^[\"'(\[]?[A-Z0-9]")
_SENTENCE_AT_END = re.compile(r"[.!?][\"')\]]*$")
_LEAD_IN = re.compile(r"[?:][\"')\]]*$")

Unit = tuple[str, str]  # (separator written before it, sentence)


@dataclass
class Chunk:
    text: str
    heading_path: list[str]
    page: int | None
    token_count: int


@dataclass
class _Section:
    heading_path: list[str]
    page: int | None
    paragraphs: list[list[Unit]] = field(default_factory=list)


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def heading_like(line: str) -> bool:
    """A line shaped like a bare heading: "Parking", "Seaview Hotel - Frequently Asked Questions"."""
    text = line.strip()
    return (
        0 < len(text) <= PLAIN_HEADING_CHARS
        and len(text.split()) <= PLAIN_HEADING_WORDS
        and _STARTS_UPPER.match(text) is not None
        and _ENDS_SENTENCE.search(text) is None
        and any(c.isalpha() for c in text)
        and not _LIST_OR_TABLE.match(text)
        and not _HEADING.match(text)
    )


def plain_headings(lines: list[str], *, document_start: bool = True) -> dict[int, int]:
    """The bare heading lines among `lines` (index -> PLAIN_TITLE_LEVEL or PLAIN_SECTION_LEVEL).

    A heading-like line is a heading when the line before it ended (a blank line, a sentence end, a
    list item or another heading) and the next line of text starts a body: a line that is not
    heading-like, or a heading, or a list; a line that goes on in lower case is a wrapped sentence.
    Three or more heading-like lines in a row are a list (a menu, an address), not headings. A heading
    followed by another one, and the document's first line when a blank line follows it, is a title."""
    shaped = [heading_like(line) for line in lines]
    blank = [not line.strip() for line in lines]
    in_list = [False] * len(lines)
    start = 0
    for index in range(len(lines) + 1):
        if index == len(lines) or not shaped[index]:
            if index - start >= 3:
                in_list[start:index] = [True] * (index - start)
            start = index + 1

    def ended(index: int) -> bool:
        if index < 0 or blank[index]:
            return True
        text = lines[index].strip()
        return shaped[index] or _ENDS_SENTENCE.search(text) is not None or _LIST_OR_TABLE.match(text) is not None

    headings: dict[int, int] = {}
    following: int | None = None  # the next line with text after the one being looked at
    for index in range(len(lines) - 1, -1, -1):
        if blank[index]:
            continue
        body = following is not None and (
            (not shaped[following] and _STARTS_UPPER.match(lines[following].strip()) is not None)
            or _LIST_OR_TABLE.match(lines[following].strip()) is not None
            or following in headings
            or in_list[following]
        )
        if shaped[index] and not in_list[index] and body and ended(index - 1):
            headings[index] = PLAIN_SECTION_LEVEL
            if following in headings:
                headings[index] = PLAIN_TITLE_LEVEL
        following = index
    first = next((i for i, empty in enumerate(blank) if not empty), None)
    if document_start and first in headings and first + 1 < len(lines) and blank[first + 1]:
        headings[first] = PLAIN_TITLE_LEVEL
    return headings


def paragraph_units(paragraph: str) -> list[Unit]:
    """Sentences of a paragraph. List items, table rows and short lines (a menu item) keep their own
    lines; the other lines are joined (a sentence may be wrapped over several) and split in sentences."""
    lines = [line.strip() for line in paragraph.split("\n") if line.strip()]
    units: list[Unit] = []
    prose: list[str] = []

    def flush_prose() -> None:
        units.extend(("\n" if i == 0 else " ", s) for i, s in enumerate(split_sentences(" ".join(prose))))
        prose.clear()

    for index, line in enumerate(lines):
        after = lines[index + 1] if index + 1 < len(lines) else ""
        # A short line is a unit of its own when the line before it ended and it does not go on in
        # lower case on the next line (then it is the start of a wrapped sentence).
        own_line = _LIST_OR_TABLE.match(line) is not None or (
            heading_like(line) and not prose and not after[:1].islower()
        )
        if own_line:
            flush_prose()
            units.extend(("\n" if i == 0 else " ", s) for i, s in enumerate(split_sentences(line)))
        else:
            prose.append(line)
            if _SENTENCE_AT_END.search(line):
                flush_prose()
    flush_prose()
    return units


def _headings(lines: list[str], *, markdown: bool, document_start: bool) -> dict[int, tuple[int, str]]:
    """The heading lines among `lines`: index -> (level, title). Markdown `#` lines outside code fences
    (when `markdown`) and bare heading lines (plain_headings) outside code fences."""
    found: dict[int, tuple[int, str]] = {}
    candidates: list[str] = []
    in_fence = False
    for index, line in enumerate(lines):
        fence = markdown and _FENCE.match(line) is not None
        if fence:
            in_fence = not in_fence
        heading = _HEADING.match(line) if markdown and not in_fence and not fence else None
        if heading:
            found[index] = (len(heading.group(1)), heading.group(2).strip())
        candidates.append("" if heading or fence or in_fence else line)
    for index, level in plain_headings(candidates, document_start=document_start).items():
        found[index] = (level, lines[index].strip())
    return found


def heading_lines(text: str) -> set[int]:
    """Indexes of the heading lines of a chunk's or passage's text (Markdown or bare ones): what is
    never read out as an answer."""
    return set(_headings(text.split("\n"), markdown=True, document_start=True))


def _sections(
    text: str, *, markdown: bool, page: int | None, path: list[tuple[int, str]], first_page: bool
) -> list[_Section]:
    """The sections of one page; `path` (level, title) is carried over from the page before."""
    sections: list[_Section] = []
    body: list[str] = []
    lines = text.split("\n")
    headings = _headings(lines, markdown=markdown, document_start=first_page)

    def flush() -> None:
        block = "\n".join(body).strip()
        body.clear()
        if not block:
            return
        section = _Section(heading_path=[title for _, title in path], page=page)
        for paragraph in _BLANK_LINES.split(block):
            units = paragraph_units(paragraph)
            if units:
                section.paragraphs.append(units)
        if section.paragraphs:
            sections.append(section)

    for index, line in enumerate(lines):
        if index not in headings:
            body.append(line)
            continue
        flush()
        level, title = headings[index]
        while path and path[-1][0] >= level:
            path.pop()
        path.append((level, title))
    flush()
    return sections


def _fit(sentence: str, tokens: int) -> list[tuple[str, int]]:
    """A sentence longer than MAX_TOKENS is cut into even word windows."""
    if tokens <= MAX_TOKENS:
        return [(sentence, tokens)]
    words = sentence.split()
    pieces = math.ceil(tokens / TARGET_TOKENS)
    size = max(1, math.ceil(len(words) / pieces))
    parts = [" ".join(words[i : i + size]) for i in range(0, len(words), size)]
    return list(zip(parts, count_tokens(parts), strict=True))


def _pack(section: _Section, counts: dict[str, int]) -> list[Chunk]:
    chunks: list[Chunk] = []
    current: list[tuple[str, int, str]] = []  # (sentence, tokens, separator before it)
    fresh = True  # the current chunk starts at a paragraph, not with the overlap of a cut paragraph

    def total() -> int:
        return sum(t for _, t, _ in current)

    def emit() -> None:
        text = ""
        for sentence, _, separator in current:
            text += separator + sentence if text else sentence
        chunks.append(Chunk(text=text, heading_path=section.heading_path, page=section.page, token_count=total()))

    lead_in = False
    for paragraph in section.paragraphs:
        if current and total() >= MIN_TOKENS and not lead_in:
            emit()
            current, fresh = [], True
        for index, (separator, sentence) in enumerate(paragraph):
            for piece, tokens in _fit(sentence, counts[sentence]):
                if current and total() + tokens > TARGET_TOKENS:
                    emit()
                    # The next chunk starts with the last sentences of this one (never all of them),
                    # as many as leave room for this piece within MAX_TOKENS.
                    overlap: list[tuple[str, int, str]] = []
                    for item in reversed(current[1:]):
                        kept = sum(t for _, t, _ in overlap) + item[1]
                        if kept > OVERLAP_TOKENS or kept + tokens > MAX_TOKENS:
                            break
                        overlap.insert(0, item)
                    current, fresh = overlap, not overlap and index == 0
                current.append((piece, tokens, "\n\n" if index == 0 else separator))
        lead_in = _LEAD_IN.search(paragraph[-1][1]) is not None
    if current:
        if fresh and chunks and total() < MIN_TOKENS and chunks[-1].token_count + total() <= TARGET_TOKENS:
            # A short last paragraph ("Thank you!") joins the chunk before it.
            last = chunks.pop()
            current.insert(0, (last.text, last.token_count, ""))
        emit()
    return chunks


def chunk_pages(pages: list[str], *, markdown: bool, paged: bool) -> list[Chunk]:
    """Chunks of a document's extracted pages, in reading order."""
    sections: list[_Section] = []
    path: list[tuple[int, str]] = []
    for number, text in enumerate(pages, start=1):
        page = number if paged else None
        sections.extend(_sections(text, markdown=markdown, page=page, path=path, first_page=number == 1))
    sentences = sorted({s for section in sections for paragraph in section.paragraphs for _, s in paragraph})
    counts = dict(zip(sentences, count_tokens(sentences), strict=True))
    chunks: list[Chunk] = []
    for section in sections:
        chunks.extend(_pack(section, counts))
    return chunks


def embedding_text(chunk_text: str, heading_path: list[str]) -> str:
    """What is embedded: the heading path gives a chunk the context of its section."""
    return f"{' > '.join(heading_path)}\n{chunk_text}" if heading_path else chunk_text
