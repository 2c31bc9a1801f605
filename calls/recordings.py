"""Call recordings: the stereo Ogg/Opus encoder, the recordings storage, signed URLs and HTTP Range.

The engine (realtime/engine/session/recording.py) keeps a call's two tracks as raw PCM while the call
runs; when it has ended, `encode_stereo_ogg` turns them into one Ogg/Opus file (caller left, agent
right), off the event loop, and `recording_store` writes it ONCE through Django's storage API, to the
storage named "recordings" in STORAGES (settings: RECORDINGS_STORAGE_URL; the local filesystem under
var/media/recordings by default, any S3-compatible store through django-storages).

A recording is reached in two ways: with the API key (`GET /public/v1/calls/{id}/recording`), or through
the call's `recordingUrl`, a URL of this service signed with an HMAC (a key derived from SECRET_KEY)
over the call, its recording and an expiry (RECORDING_URL_TTL_SECONDS). Both answer Range requests.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Generator, Iterator
from dataclasses import dataclass
from typing import IO, Any
from urllib.parse import urlencode

import numpy as np
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.files import File
from django.core.files.storage import Storage, storages
from django.db import transaction
from django.http import HttpRequest, StreamingHttpResponse
from django.utils.crypto import constant_time_compare, salted_hmac

from calls.models import Call
from kit.errors import ApiError

CONTENT_TYPE = "audio/ogg"
OUTPUT_RATE = 24000  # Opus at 24 kHz: super-wideband speech, both tracks resampled to it
BIT_RATE = 32000  # stereo, at most about 240 kB per minute (less with pauses)
# libopus's effort, 0-10 (its default 10): 5 costs a quarter of the CPU (bench/recording_cost.py); one side
# leaks into the other at -44 dB (at 24 kbit/s it was -23 dB: audible, so not lower).
COMPLEXITY = "5"
READ_SECONDS = 10  # the encoder reads, resamples and encodes this much at a time (bounded memory)
STREAM_CHUNK = 64 * 1024
SIGNING_SALT = "voiceagent.calls.recordings"
RETRY_NOT_READY_SECONDS = 2  # Retry-After of a recording still being stored

logger = logging.getLogger(__name__)


def recording_storage() -> Storage:
    return storages["recordings"]


def recording_key_for(call: Call) -> str:
    return f"{call.organization_id}/{call.started_at:%Y/%m}/{call.pk}.ogg"


# --- encoding ------------------------------------------------------------------------------------


def _pcm_blocks(track: IO[bytes], rate: int, out_rate: int) -> Iterator[np.ndarray]:
    """A PCM16 mono track (read from the start) as float32 blocks at out_rate, READ_SECONDS at a time."""
    import soxr  # imported on first use: only the processes that encode recordings pay for it

    track.seek(0)
    stream = None if rate == out_rate else soxr.ResampleStream(rate, out_rate, 1, dtype="float32")
    size = rate * READ_SECONDS * 2
    while True:
        data = track.read(size)
        last = len(data) < size
        samples = np.frombuffer(data[: len(data) // 2 * 2], dtype="<i2").astype(np.float32) / 32768.0
        block = samples if stream is None else stream.resample_chunk(samples, last=last)
        if block.size:
            yield block
        if last:
            return


def encode_stereo_ogg(*, left: IO[bytes], left_rate: int, right: IO[bytes], right_rate: int, out: IO[bytes]) -> float:
    """Encode two PCM16 mono tracks into one Ogg/Opus stereo file written to `out`: `left` on the left
    channel, `right` on the right, both from time 0 (the shorter padded with silence). Returns the
    recording's length in seconds. Runs in a worker thread: seconds of CPU for a long call."""
    import av  # imported on first use (PyAV loads FFmpeg's libraries)

    container = av.open(out, mode="w", format="ogg")
    try:
        stream = container.add_stream("libopus", rate=OUTPUT_RATE, layout="stereo")
        stream.bit_rate = BIT_RATE
        stream.options = {"compression_level": COMPLEXITY}
        sources: list[Iterator[np.ndarray] | None] = [
            _pcm_blocks(left, left_rate, OUTPUT_RATE),
            _pcm_blocks(right, right_rate, OUTPUT_RATE),
        ]
        pending = [np.zeros(0, np.float32), np.zeros(0, np.float32)]
        want = OUTPUT_RATE * READ_SECONDS
        pts = 0
        while True:
            for side, source in enumerate(sources):
                while source is not None and pending[side].size < want:
                    block = next(source, None)
                    if block is None:
                        source = sources[side] = None
                    else:
                        pending[side] = np.concatenate([pending[side], block])
            alive = [pending[side].size for side in (0, 1) if sources[side] is not None]
            length = min(alive) if alive else max(pending[0].size, pending[1].size)
            if not length:
                break
            pair = np.zeros((2, length), np.float32)
            for side in (0, 1):
                taken = pending[side][:length]
                pair[side, : taken.size] = taken
                pending[side] = pending[side][taken.size :]
            frame = av.AudioFrame.from_ndarray(np.clip(pair, -1, 1), format="fltp", layout="stereo")
            frame.sample_rate = OUTPUT_RATE
            frame.pts = pts
            pts += length
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    finally:
        container.close()
    return pts / OUTPUT_RATE


def recording_store(*, call: Call, data: IO[bytes]) -> str:
    """Write the encoded recording once to the recordings storage; its storage key."""
    data.seek(0)
    return recording_storage().save(recording_key_for(call), File(data, name=f"{call.pk}.ogg"))


def recording_remove(key: str) -> None:
    if key:
        recording_storage().delete(key)


def remove_with_call(sender: Any, instance: Call, **kwargs: Any) -> None:
    """post_delete of a call (its organization deleted, say): its recording goes too, once committed."""
    key = instance.recording_key
    if not key:
        return

    def remove() -> None:
        try:
            recording_remove(key)
        except Exception:
            logger.warning("could not delete the recording %s of a deleted call", key, exc_info=True)

    transaction.on_commit(remove)


# --- signed URLs ---------------------------------------------------------------------------------


def _signature(call_id: str, key: str, expires: int) -> str:
    return salted_hmac(SIGNING_SALT, f"{call_id}\n{key}\n{expires}", algorithm="sha256").hexdigest()


def recording_path(call: Call, *, now: float | None = None) -> str | None:
    """The signed path of the call's recording (null when there is none), valid RECORDING_URL_TTL_SECONDS."""
    if not call.recording_key:
        return None
    expires = int((now if now is not None else time.time()) + int(settings.RECORDING_URL_TTL_SECONDS))
    query = urlencode({"expires": expires, "signature": _signature(str(call.pk), call.recording_key, expires)})
    return f"/public/v1/recordings/{call.pk}?{query}"


def public_base_url() -> str:
    """This service's public address for links it hands out: PUBLIC_BASE_URL, else the http(s) twin of
    REALTIME_WS_URL (`make run` sets it: ws://host:port -> http://host:port), else "" (unknown)."""
    if settings.PUBLIC_BASE_URL:
        return str(settings.PUBLIC_BASE_URL)
    socket_base = settings.REALTIME_WS_URL.strip().rstrip("/")
    for socket_scheme, web_scheme in (("wss://", "https://"), ("ws://", "http://")):
        if socket_base.startswith(socket_scheme):
            return web_scheme + socket_base.removeprefix(socket_scheme)
    return ""


def recording_url(call: Call) -> str | None:
    """recordingUrl: absolute on public_base_url(), else a path on this service (the API view makes it
    absolute on the request's host)."""
    path = recording_path(call)
    if path is None:
        return None
    return f"{public_base_url()}{path}"


def signature_valid(call: Call, *, expires: str, signature: str) -> bool:
    """Whether a signed URL's parameters are right for the call's current recording and unexpired."""
    if not call.recording_key or not _digits(expires) or len(expires) > 12:
        return False
    if int(expires) < time.time():
        return False
    return constant_time_compare(_signature(str(call.pk), call.recording_key, int(expires)), signature)


# --- HTTP Range ----------------------------------------------------------------------------------


def _digits(text: str) -> bool:
    """ASCII digits only ("²".isdigit() is true, and int() refuses it)."""
    return text.isascii() and text.isdigit()


@dataclass(frozen=True)
class ByteRange:
    start: int
    end: int  # inclusive


def parse_range(header: str, size: int) -> ByteRange | None:
    """One `bytes=` range of a Range header (None: no header, the whole file). ApiError 416 for a range
    that is malformed, several ranges, or not satisfiable."""
    if not header:
        return None
    unit, _, spec = header.partition("=")
    start_text, dash, end_text = spec.strip().partition("-")
    start_text, end_text = start_text.strip(), end_text.strip()
    valid = (
        unit.strip().lower() == "bytes"
        and dash == "-"
        and "," not in spec
        and (_digits(start_text) or start_text == "")
        and (_digits(end_text) or end_text == "")
        and (start_text or end_text)
        and len(start_text) < 19
        and len(end_text) < 19
    )
    if valid and start_text:
        start = int(start_text)
        end = min(int(end_text), size - 1) if end_text else size - 1
        valid = start < size and start <= end
    elif valid:
        suffix = int(end_text)
        start, end = max(0, size - suffix), size - 1
        valid = suffix > 0 and size > 0
    if not valid:
        raise ApiError(
            "Range not satisfiable: one bytes=start-end range within the recording is served.",
            status_code=416,
            code="RANGE_NOT_SATISFIABLE",
            extra={"size": size},
        )
    return ByteRange(start, end)


def _open_range(storage: Storage, key: str, start: int, end: int) -> Any:
    """A readable of bytes start..end (inclusive) of a stored recording. An S3-compatible store is asked
    for that range only (a ranged GET: django-storages' own file object fetches the whole object first);
    any other storage is opened and sought."""
    bucket, normalize = getattr(storage, "bucket", None), getattr(storage, "_normalize_name", None)
    if bucket is not None and normalize is not None:
        from storages.utils import clean_name  # type: ignore[import-untyped]  # django-storages ships no types

        return bucket.Object(normalize(clean_name(key))).get(Range=f"bytes={start}-{end}")["Body"]
    handle = storage.open(key, "rb")
    handle.seek(start)
    return handle


def _chunks(storage: Storage, key: str, start: int, length: int) -> Generator[bytes]:
    if length <= 0:
        return
    handle = _open_range(storage, key, start, start + length - 1)
    try:
        left = length
        while left > 0:
            data = handle.read(min(STREAM_CHUNK, left))
            if not data:
                return
            left -= len(data)
            yield data
    finally:
        handle.close()


async def _async_chunks(chunks: Generator[bytes]) -> AsyncIterator[bytes]:
    def following() -> bytes | None:
        return next(chunks, None)

    try:
        while (data := await sync_to_async(following)()) is not None:
            yield data
    finally:
        await sync_to_async(chunks.close)()


def _size(storage: Storage, key: str) -> int:
    """The stored recording's size; ApiError 404 when the file is gone from the storage."""
    try:
        return storage.size(key)
    except Exception as exc:
        if isinstance(exc, FileNotFoundError) or not storage.exists(key):
            raise ApiError.not_found("This call has no recording", code="RECORDING_NOT_FOUND") from exc
        raise


def recording_response(request: HttpRequest, call: Call) -> StreamingHttpResponse:
    """The call's recording, streamed: 200 whole, or 206 for one Range (416 when not satisfiable)."""
    if not call.recording_key:
        raise ApiError.not_found("This call has no recording", code="RECORDING_NOT_FOUND")
    if call.recording_saved_at is None:  # the call has ended and its recording is being stored
        raise ApiError(
            "The recording is being stored: try again in a few seconds",
            status_code=404,
            code="RECORDING_NOT_READY",
            extra={"retryAfter": RETRY_NOT_READY_SECONDS},
        )
    storage = recording_storage()
    size = _size(storage, call.recording_key)
    wanted = parse_range(request.headers.get("Range", ""), size)
    start, end = (0, size - 1) if wanted is None else (wanted.start, wanted.end)
    length = max(0, end - start + 1)
    from django.core.handlers.asgi import ASGIRequest

    chunks = _chunks(storage, call.recording_key, start, length)  # opened when the body is read
    body: Any = _async_chunks(chunks) if isinstance(request, ASGIRequest) else chunks
    response = StreamingHttpResponse(body, content_type=CONTENT_TYPE, status=200 if wanted is None else 206)
    response["Content-Length"] = str(length)
    response["Accept-Ranges"] = "bytes"
    response["Cache-Control"] = "private, no-store"
    response["Content-Disposition"] = f'inline; filename="{call.pk}.ogg"'
    if wanted is not None:
        response["Content-Range"] = f"bytes {start}-{end}/{size}"
    return response
