"""Markdown-aware chunking: sections by heading, then paragraphs, then sentences.

Chunks hold about TARGET_TOKENS model tokens (never more than MAX_TOKENS, below the model's 256-token
window so that nothing is cut off when embedded), consecutive chunks of one section overlap by up to
OVERLAP_TOKENS, and each chunk keeps its heading path and (for PDFs) its page number.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from knowledge.embeddings import count_tokens

TARGET_TOKENS = 180
MAX_TOKENS = 230
OVERLAP_TOKENS = 40

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_LIST_OR_TABLE = re.compile(r"^\s*([-*+]\s|\d+[.)]\s|\|)")
# A sentence ends with . ! ? (maybe followed by quotes or brackets) before white space and a capital,
# a digit or an opening quote/bracket.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_BLANK_LINES = re.compile(r"\n[ \t]*\n+")

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


def _paragraph_units(paragraph: str) -> list[Unit]:
    """List items and table rows stay on their own lines; prose lines are joined and split in sentences."""
    lines = [line.strip() for line in paragraph.split("\n") if line.strip()]
    if any(_LIST_OR_TABLE.match(line) for line in lines):
        units: list[Unit] = []
        for line in lines:
            units.extend(("\n" if i == 0 else " ", s) for i, s in enumerate(split_sentences(line)))
        return units
    return [(" ", s) for s in split_sentences(" ".join(lines))]


def _sections(text: str, *, markdown: bool, page: int | None) -> list[_Section]:
    sections: list[_Section] = []
    path: list[tuple[int, str]] = []
    body: list[str] = []
    in_fence = False

    def flush() -> None:
        block = "\n".join(body).strip()
        body.clear()
        if not block:
            return
        section = _Section(heading_path=[title for _, title in path], page=page)
        for paragraph in _BLANK_LINES.split(block):
            units = _paragraph_units(paragraph)
            if units:
                section.paragraphs.append(units)
        if section.paragraphs:
            sections.append(section)

    for line in text.split("\n"):
        if markdown and _FENCE.match(line):
            in_fence = not in_fence
        heading = _HEADING.match(line) if markdown and not in_fence else None
        if heading:
            flush()
            level = len(heading.group(1))
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, heading.group(2).strip()))
        else:
            body.append(line)
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

    def total() -> int:
        return sum(t for _, t, _ in current)

    def emit() -> None:
        text = ""
        for sentence, _, separator in current:
            text += separator + sentence if text else sentence
        chunks.append(Chunk(text=text, heading_path=section.heading_path, page=section.page, token_count=total()))

    for paragraph in section.paragraphs:
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
                    current = overlap
                current.append((piece, tokens, "\n\n" if index == 0 else separator))
    if current:
        emit()
    return chunks


def chunk_pages(pages: list[str], *, markdown: bool, paged: bool) -> list[Chunk]:
    """Chunks of a document's extracted pages, in reading order."""
    sections: list[_Section] = []
    for number, text in enumerate(pages, start=1):
        sections.extend(_sections(text, markdown=markdown, page=number if paged else None))
    sentences = sorted({s for section in sections for paragraph in section.paragraphs for _, s in paragraph})
    counts = dict(zip(sentences, count_tokens(sentences), strict=True))
    chunks: list[Chunk] = []
    for section in sections:
        chunks.extend(_pack(section, counts))
    return chunks


def embedding_text(chunk_text: str, heading_path: list[str]) -> str:
    """What is embedded: the heading path gives a chunk the context of its section."""
    return f"{' > '.join(heading_path)}\n{chunk_text}" if heading_path else chunk_text
