"""Request bodies in the server: kept on disk, handed to the application as it reads them, and an upload
refused before its body is read when the process is already at its bound.

Twisted (under Daphne) writes a body of 100,000 bytes or more to a temporary file as it arrives. Then,
measured on a 19 MiB multipart upload: Twisted read the whole file back into memory to parse the form
into `request.args` (which nobody reads: that copy and the parsed parts held about twice the body), and
Daphne read the whole file into its queue for the application, at once, in 8 KiB messages (the body
once more), all before Django had seen a byte (Django then writes it to a spooled temporary file on
disk, FILE_UPLOAD_MAX_MEMORY_SIZE, before the view runs, and its multipart parser streams files over
that size to disk). Here Twisted's form parsing is off, a large body stays in Twisted's file, and
`receive` reads it from there, one BODY_CHUNK_BYTES message per call.

A knowledge upload takes its slot of the process's bound on documents being processed
(knowledge/admission.py) as soon as its headers arrive, before its body is read, and hands it to the
application in the scope (admission.SCOPE_KEY). One that arrives while the process is at the bound is answered
429 with Retry-After; the body the client still sends is discarded as it arrives (neither kept in memory
nor written to disk) and no application is started for it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

import orjson
from daphne.http_protocol import WebRequest  # type: ignore[import-untyped]  # Daphne ships no types

if TYPE_CHECKING:
    from kit.errors import ApiError
    from knowledge.admission import Ticket

logger = logging.getLogger(__name__)

# A body at least this long is read from Twisted's file as the application asks for it (smaller ones are
# in memory already: Twisted keeps them in a BytesIO).
LAZY_BODY_BYTES = 100_000
BODY_CHUNK_BYTES = 64 * 1024


class _Discarded:
    """The body of a refused request: every byte dropped as it arrives."""

    closed = False

    def write(self, data: bytes) -> None:
        pass

    def read(self, size: int = -1) -> bytes:
        return b""

    def seek(self, offset: int, whence: int = 0) -> int:
        return 0

    def tell(self) -> int:
        return 0

    def close(self) -> None:
        self.closed = True


class _HandedOver:
    """What Daphne reads in place of a large body (nothing: it queues one empty final message, which
    FileBody skips); the real file stays with the request for FileBody to read."""

    def __init__(self, file: Any) -> None:
        self.file = file

    @property
    def closed(self) -> bool:
        return bool(self.file.closed)

    def read(self, size: int = -1) -> bytes:
        return b""

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self.file.seek(offset, whence))

    def tell(self) -> int:
        return int(self.file.tell())

    def close(self) -> None:
        self.file.close()  # Twisted closes the content when the connection is lost


class BoundedBodyRequest(WebRequest):
    """Daphne's request with the two rules above."""

    refusal: ApiError | None = None
    content: Any  # Twisted's body file, or one of the stand-ins above
    body_file: Any = None
    upload_ticket: Ticket | None = None  # this upload's slot, taken as its headers arrived

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Twisted parses a multipart or form POST into `args` itself, reading the whole body into memory
        # twice over (the bytes, then every part); nothing here reads `args`: Django parses the body.
        self._parsePOSTFormSubmission = False

    def gotLength(self, length: int | None) -> None:
        # The headers are in; the body is not. Twisted's channel knows the method and target by now
        # (its request learns them only with the whole body).
        method = (getattr(self.channel, "_command", b"") or b"").decode("latin-1")
        target = (getattr(self.channel, "_path", b"") or b"").decode("latin-1")
        # Imported here: this module is imported with the server, before Django is set up.
        from knowledge import admission

        try:
            if admission.is_upload(method, target):
                self.upload_ticket = admission.ticket_take()
                if self.upload_ticket is None:
                    self.refusal = admission.busy("process")
        except Exception:  # never let the check break the server's HTTP handling
            logger.exception("upload admission check failed")
        if self.refusal is not None:
            self.content = _Discarded()
            return
        super().gotLength(length)

    def finish(self) -> Any:
        try:
            return super().finish()
        finally:
            self._release()

    def connectionLost(self, reason: Any) -> None:
        try:
            super().connectionLost(reason)
        finally:
            self._release()

    def _release(self) -> None:
        # The application gives the slot back when its view ends (knowledge/apis.py); this covers a
        # request that never got that far (the client left while sending the body, an error on the way).
        if self.upload_ticket is not None:
            self.upload_ticket.release()

    def process(self) -> Any:
        if self.refusal is not None:
            self._refuse(self.refusal)
            return None
        content = self.content
        if content is not None and not content.closed and content.seek(0, 2) >= LAZY_BODY_BYTES:
            content.seek(0)
            self.body_file = content
            self.content = _HandedOver(content)
        return super().process()

    def _refuse(self, error: ApiError) -> None:
        from kit.errors import response_headers

        self.request_start = time.time()
        if hasattr(self.client, "host") and hasattr(self.client, "port"):
            self.client_addr = [str(self.client.host), self.client.port]
        headers = [(b"content-type", b"application/json")]
        headers += [(name.lower().encode(), value.encode()) for name, value in response_headers(error).items()]
        self.handle_reply({"type": "http.response.start", "status": error.status_code, "headers": headers})
        self.handle_reply({"type": "http.response.body", "body": orjson.dumps(error.body())})


class FileBody:
    """`receive` for a request whose body is in a file: the body in BODY_CHUNK_BYTES messages, read as the
    application asks, then what Daphne queues (a disconnect)."""

    def __init__(self, file: Any, queue: asyncio.Queue[dict[str, Any]]) -> None:
        self.file = file
        self.queue = queue
        self.done = False

    async def receive(self) -> dict[str, Any]:
        if not self.done:
            try:
                chunk: bytes | None = self.file.read(BODY_CHUNK_BYTES)
            except ValueError:  # the file is closed: the client went away
                chunk = None
            if chunk is not None and len(chunk) == BODY_CHUNK_BYTES:
                return {"type": "http.request", "body": chunk, "more_body": True}
            self.done = True
            # Daphne queued one empty final body message (it read nothing from _HandedOver), before any
            # disconnect: skip it.
            placeholder = await self.queue.get()
            if placeholder["type"] != "http.request":
                return placeholder
            if chunk is not None:
                return {"type": "http.request", "body": chunk, "more_body": False}
        return await self.queue.get()
