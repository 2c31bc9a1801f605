"""The bounds on knowledge documents being processed (docs/operations/limits.md): uploads being received and
documents still ingesting hold memory and CPU, so a server process and an organization each take only
so many at once; beyond them an upload is answered 429 with Retry-After.

- Per process (KNOWLEDGE_MAX_CONCURRENT_UPLOADS): the uploads this process is receiving plus the
  documents queued or ingesting on its background worker. The server takes an upload's slot as soon as
  its headers are in, before its body is read, and refuses it there when none is free
  (voiceagent/bodies.py; under another server or Django's test client, the view takes it). The slot is
  given back when the request ends; a document ingested by this process holds one of its own until its
  ingestion ends (`ready`, `failed`, or stopped because it was deleted).
- Per organization (KNOWLEDGE_MAX_PROCESSING_PER_ORGANIZATION): the organization's documents
  `processing` (in the database: every process and Celery worker) plus the uploads of it this process is
  receiving. Checked once the request is authenticated, before its body is parsed, and again under the
  organization's row lock when the document is stored, so that racing uploads never pass it together.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from django.conf import settings
from django.urls import Resolver404, resolve

from kit import metrics
from kit.errors import ApiError

UPLOADS_BUSY = "UPLOADS_BUSY"
UPLOADS_RETRY_AFTER_SECONDS = 5
# Documents take a while to index: an organization at its bound is told to come back later than the
# process's own, shorter-lived bound.
ORGANIZATION_RETRY_AFTER_SECONDS = 15
UPLOAD_URL_NAME = "agent-knowledge"
SCOPE_KEY = "voiceagent.upload_ticket"  # where the server hands an upload's slot to the application


class ProcessSlots:
    """The process's documents being processed: uploads being received (per organization too) and
    documents on this process's ingestion worker. Counters under a lock; the bound is read from
    settings at each check."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.receiving: Counter[Any] = Counter()  # organization id -> uploads being received
        self.ingesting: set[str] = set()  # documents queued or ingesting on this process's worker

    @property
    def in_use(self) -> int:
        return self.receiving.total() + len(self.ingesting)

    def full(self) -> bool:
        return self.in_use >= settings.KNOWLEDGE_MAX_CONCURRENT_UPLOADS

    def try_receive(self, organization_id: Any = None) -> bool:
        with self._lock:
            if self.full():
                return False
            self.receiving[organization_id] += 1
            return True

    def move(self, *, organization_id: Any) -> None:
        """The request's slot (taken before it was authenticated) belongs to this organization."""
        with self._lock:
            self.receiving[None] -= 1
            self.receiving[organization_id] += 1

    def received(self, organization_id: Any = None) -> None:
        with self._lock:
            self.receiving[organization_id] -= 1
            if self.receiving[organization_id] <= 0:
                del self.receiving[organization_id]

    def receiving_for(self, organization_id: Any) -> int:
        with self._lock:
            return self.receiving[organization_id]

    def ingest_queued(self, document_id: str) -> None:
        with self._lock:
            self.ingesting.add(str(document_id))

    def ingest_done(self, document_id: str) -> None:
        """The document's work is done (or stopped); called again, it does nothing."""
        with self._lock:
            self.ingesting.discard(str(document_id))


slots = ProcessSlots()


class Ticket:
    """One upload request's slot: taken before the request is authenticated, then counted for its
    organization, given back when the request ends."""

    def __init__(self) -> None:
        self.organization_id: Any = None
        self._released = False

    def assign(self, organization_id: Any) -> None:
        if self.organization_id is None and not self._released:
            slots.move(organization_id=organization_id)
            self.organization_id = organization_id

    def release(self) -> None:
        if not self._released:
            self._released = True
            slots.received(self.organization_id)


def ticket_take() -> Ticket | None:
    """A slot for an upload request, or None when the process is at its bound."""
    return Ticket() if slots.try_receive() else None


# Each bound: its setting, its message (with the bound), and the Retry-After of its refusal.
BOUNDS = {
    "process": (
        "KNOWLEDGE_MAX_CONCURRENT_UPLOADS",
        "Too many knowledge documents being processed on this server ({limit} at once per server process: "
        "uploads being received and documents being indexed); retry shortly.",
        UPLOADS_RETRY_AFTER_SECONDS,
    ),
    "organization": (
        "KNOWLEDGE_MAX_PROCESSING_PER_ORGANIZATION",
        "Your organization already has {limit} knowledge documents being processed (uploaded and still "
        "indexing); retry when one of them is ready.",
        ORGANIZATION_RETRY_AFTER_SECONDS,
    ),
}


def busy(bound: str) -> ApiError:
    """The 429 of an upload over the process's or the organization's bound."""
    setting, message, retry_after = BOUNDS[bound]
    limit = getattr(settings, setting)
    metrics.record_rate_limit_refusal("uploads")
    return ApiError.too_many(message.format(limit=limit), code=UPLOADS_BUSY, retry_after=retry_after, limit=limit)


def organization_full(*, organization_id: Any, processing: int) -> bool:
    """Whether the organization is at its bound: `processing`, its documents being indexed, plus the
    uploads of it this process is receiving other than the caller's own."""
    receiving_here = max(0, slots.receiving_for(organization_id) - 1)
    return processing + receiving_here >= settings.KNOWLEDGE_MAX_PROCESSING_PER_ORGANIZATION


def is_upload(method: str, path: str) -> bool:
    """A knowledge upload (POST /public/v1/agents/{id}/knowledge), by method and path alone."""
    if method.upper() != "POST":
        return False
    try:
        return resolve(path.split("?", 1)[0]).url_name == UPLOAD_URL_NAME
    except Resolver404:
        return False
