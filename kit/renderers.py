"""The API's JSON renderer (DEFAULT_RENDERER_CLASSES; a module of its own, since DRF's views read that
setting while they are imported)."""

from __future__ import annotations

import gzip
import json
from typing import Any

import orjson
from rest_framework import renderers
from rest_framework.utils.encoders import JSONEncoder

from kit.text import storable_value


class JsonRenderer(renderers.JSONRenderer):
    """DRF's JSON renderer, written by orjson: the same JSON as DRF's (compact, UTF-8, U+2028/U+2029
    escaped, DRF's text for dates, times, decimals and durations, which orjson hands back to DRF's
    encoder), about ten times faster (a list of 1,000 agents took 20 ms to render with the standard
    library). A request for indented JSON (`Accept: application/json; indent=2`) gets DRF's own."""

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if data is None:
            return b""
        if self.get_indent(accepted_media_type or "", renderer_context or {}):
            rendered: bytes = super().render(data, accepted_media_type, renderer_context)
            return rendered
        return dumps(data)


_fallback = JSONEncoder().default
_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_NON_STR_KEYS


def dumps(data: Any) -> bytes:
    """`data` as the API writes JSON (JsonRenderer; also for a body rendered ahead of its request). Text
    that cannot be written (a lone surrogate in a row stored before the API refused it, kit/text.py) is
    written mended (U+FFFD) rather than failing the whole response; an integer beyond orjson's 64 bits (in
    a row stored before the API refused it) is written by the standard library, as DRF would."""
    try:
        text = orjson.dumps(data, default=_fallback, option=_OPTIONS)
    except orjson.JSONEncodeError as error:
        if "64-bit range" in str(error):
            return _standard_dumps(data)
        if "surrogates not allowed" not in str(error):
            raise
        text = orjson.dumps(storable_value(data), default=_fallback, option=_OPTIONS)
    if b"\xe2\x80\xa8" in text or b"\xe2\x80\xa9" in text:  # line separators break JavaScript strings
        text = text.replace("\u2028".encode(), b"\\u2028").replace("\u2029".encode(), b"\\u2029")
    return text


def _standard_dumps(data: Any) -> bytes:
    """`dumps` by the standard library (DRF's encoder and layout): for what orjson cannot write."""
    text = json.dumps(storable_value(data), cls=JSONEncoder, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").encode()


# A body rendered ahead of its request at least this long is also kept gzip-compressed.
COMPRESS_FROM_BYTES = 16 * 1024


class RenderedJson:
    """A JSON body rendered ahead of its request (kit.api.rendered_json_response sends it), and the same
    gzip-compressed, made on the first request that accepts it and kept."""

    def __init__(self, body: bytes, *, level: int) -> None:
        """`level`: zlib's, 1 (fastest) to 9: higher for a body sent many times, 1 for one sent once."""
        self.body = body
        self._level = level
        self._gzipped: bytes | None = None

    @property
    def compressible(self) -> bool:
        """Whether the body is long enough for gzip to pay."""
        return len(self.body) >= COMPRESS_FROM_BYTES

    def gzipped(self) -> bytes | None:
        """The body gzip-compressed, or None when it is too short to pay."""
        if not self.compressible:
            return None
        if self._gzipped is None:  # two threads may both compress it: the same bytes
            self._gzipped = gzip.compress(self.body, compresslevel=self._level, mtime=0)
        return self._gzipped
