"""Text extraction from uploads: UTF-8 for .txt and .md, pypdf page by page for .pdf.

Every failure is an ApiError (400) with a message the uploader can act on.
"""

from __future__ import annotations

import io
import logging
import re
from dataclasses import dataclass

from kit.errors import ApiError
from knowledge.models import DocumentType

logger = logging.getLogger(__name__)

EXTENSIONS = {
    ".txt": DocumentType.TEXT,
    ".md": DocumentType.MARKDOWN,
    ".markdown": DocumentType.MARKDOWN,
    ".pdf": DocumentType.PDF,
}
# Control characters other than tab, newline, carriage return and form feed mark binary data.
_BINARY = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


@dataclass(frozen=True)
class Extracted:
    type: str
    pages: list[str]  # one entry per PDF page (1-based page = index + 1); a single entry otherwise


def looks_binary(text: str) -> bool:
    return _BINARY.search(text) is not None


def document_type_for(filename: str) -> str:
    lower = filename.lower()
    for extension, doc_type in EXTENSIONS.items():
        if lower.endswith(extension):
            return doc_type
    raise ApiError.field("file", "Unsupported file type: upload a .txt, .md or .pdf file.")


def decode_text(data: bytes, *, what: str = "file") -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ApiError.field(
            what, f"The text is not valid UTF-8 (undecodable byte at position {exc.start}); save it as UTF-8."
        ) from None
    if looks_binary(text):
        raise ApiError.field(what, "The file holds binary data, not text.")
    return normalize(text)


def normalize(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\f", "\n")


def extract_pdf(data: bytes) -> list[str]:
    from pypdf import PdfReader

    if not data.lstrip()[:5] == b"%PDF-":
        raise ApiError.field("file", "The file is not a PDF document.")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ApiError.field("file", "The PDF is password-protected; upload an unprotected copy.")
        pages = [normalize(page.extract_text() or "") for page in reader.pages]
    except ApiError:
        raise
    except Exception as exc:  # noqa: BLE001 - pypdf raises many exception types on damaged files
        logger.info("pdf extraction failed: %s", type(exc).__name__)
        raise ApiError.field("file", "The PDF could not be read; it may be damaged.") from None
    if not any(page.strip() for page in pages):
        raise ApiError.field(
            "file", "No text could be extracted from the PDF (it may hold only scanned images); upload a text PDF."
        )
    return pages


def extract_upload(*, filename: str, data: bytes) -> Extracted:
    doc_type = document_type_for(filename)
    if doc_type == DocumentType.PDF:
        return Extracted(type=doc_type, pages=extract_pdf(data))
    return Extracted(type=doc_type, pages=[decode_text(data)])
