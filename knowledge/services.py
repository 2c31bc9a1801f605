"""Knowledge documents: upload (validate, extract, suggest name and description, queue ingestion),
the sweep of documents stuck in `processing`, and deletion.

Ingestion itself (chunk, embed, store) is knowledge/ingestion.py, below both this module and the tasks
that run it (knowledge/tasks.py): this module imports the tasks to queue them, and the tasks import
only the ingestion, so the arrows point one way."""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from pathlib import PurePath
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from kombu.exceptions import OperationalError

from accounts.models import Organization
from agents.selectors import agent_get
from kit import background
from kit.db import row_get
from kit.errors import ApiError
from knowledge import admission, ingestion
from knowledge.extraction import extract_upload, looks_binary, normalize
from knowledge.models import DocumentStatus, DocumentType, KnowledgeDocument
from knowledge.selectors import document_processing_count
from knowledge.suggest import suggest_description, suggest_name
from knowledge.tasks import ingest_queue

logger = logging.getLogger(__name__)

OMITTED: Any = object()  # `description` not sent at all (null means "no description")


def too_large() -> ApiError:
    limit = settings.KNOWLEDGE_MAX_UPLOAD_BYTES
    return ApiError(
        f"The document is larger than the maximum upload size of {limit} bytes ({limit / 1048576:g} MB).",
        status_code=413,
        extra={"maxBytes": limit},
    )


def _content_pages(content: str) -> list[str]:
    try:
        size = len(content.encode("utf-8"))
    except UnicodeEncodeError:
        raise ApiError.field("content", "The text is not valid Unicode (lone surrogate escape).") from None
    if size > settings.KNOWLEDGE_MAX_UPLOAD_BYTES:
        raise too_large()
    if looks_binary(content):
        raise ApiError.field("content", "The text contains control characters (binary data).")
    return [normalize(content)]


def document_create(
    *,
    organization: Organization,
    agent_id: str,
    content: str | None = None,
    upload: UploadedFile | None = None,
    name: str | None = None,
    description: str | None = OMITTED,
) -> KnowledgeDocument:
    """Store a document as `processing` and queue its ingestion. JSON `content` is Markdown."""
    agent = agent_get(organization=organization, agent_id=agent_id)
    if content is not None and upload is not None:
        raise ApiError.invalid("Send either content (JSON) or a file (multipart), not both.")
    if content is None and upload is None:
        raise ApiError.invalid(
            "A knowledge document needs content (JSON) or a file (multipart).",
            {"content": ["Required when no file is sent."], "file": ["Required when no content is sent."]},
        )
    fallback_name = "Untitled document"
    if upload is not None:
        if upload.size is not None and upload.size > settings.KNOWLEDGE_MAX_UPLOAD_BYTES:
            raise too_large()
        data = upload.read(settings.KNOWLEDGE_MAX_UPLOAD_BYTES + 1)
        if len(data) > settings.KNOWLEDGE_MAX_UPLOAD_BYTES:
            raise too_large()
        extracted = extract_upload(filename=upload.name or "", data=data)
        doc_type, pages, size = extracted.type, extracted.pages, len(data)
        fallback_name = PurePath(upload.name or "").stem[:200] or fallback_name
    else:
        pages = _content_pages(content or "")
        doc_type, size = DocumentType.MARKDOWN, len((content or "").encode("utf-8"))
    if not any(page.strip() for page in pages):
        raise ApiError.field("file" if upload is not None else "content", "The document is empty.")

    text = "\n\n".join(page for page in pages if page.strip())
    markdown = doc_type == DocumentType.MARKDOWN
    name = name or suggest_name(text, markdown=markdown, fallback=fallback_name)
    if description is OMITTED:
        description = suggest_description(text)

    with transaction.atomic():
        # The organization's bound on documents being processed, exact across processes: racing uploads
        # count and insert one after the other under the organization's row lock.
        Organization.objects.select_for_update().filter(pk=organization.pk).first()
        if (
            document_processing_count(organization_id=organization.pk)
            >= settings.KNOWLEDGE_MAX_PROCESSING_PER_ORGANIZATION
        ):
            raise admission.busy("organization")
        agent = agent_get(organization=organization, agent_id=str(agent.pk), for_update=True)
        document = KnowledgeDocument.objects.create(
            organization=organization,
            agent=agent,
            name=name,
            description=description,
            type=doc_type,
            size_bytes=size,
            status=DocumentStatus.PROCESSING,
            pages=pages,
        )
    _queue_ingestion(document)
    return document


def _queue_ingestion(document: KnowledgeDocument) -> None:
    document_id = str(document.pk)
    if background.mode("knowledge") == "inline":
        # Unit tests: in this thread and transaction, so the test's own transaction sees the result.
        ingest_queue(document_id)
        return

    def queue() -> None:
        # A Celery worker with a broker, else a background thread of this process, never this request.
        try:
            ingest_queue(document_id)
        except OperationalError:
            logger.exception("could not queue ingestion of knowledge document %s", document_id)
            ingestion.document_fail(
                document_id=document_id, message="The ingestion queue is unavailable; upload the document again later."
            )
            raise ApiError("The ingestion queue is unavailable; try again later.", status_code=503) from None

    # After the commit, so that a worker always finds the row (at once when no transaction is open).
    transaction.on_commit(queue)


STUCK_ERROR = (
    "Indexing did not finish: the server processing the document stopped (restart or crash) or took longer "
    "than KNOWLEDGE_PROCESSING_TIMEOUT_SECONDS; upload the document again."
)


def document_fail_stuck(*, older_than: timedelta | None = None) -> int:
    """Mark `failed` (with STUCK_ERROR) the documents still `processing` whose process died: its
    heartbeat (kit/liveness.py) stopped more than LIVENESS_EXPIRY_SECONDS ago, or, for documents
    no process holds (queued for a Celery worker), ingestion started or the upload happened longer ago
    than KNOWLEDGE_PROCESSING_TIMEOUT_SECONDS. One conditional UPDATE, so two sweeping processes cannot
    race; an ingestion that finishes later finds the document no longer `processing` and stores
    nothing. Returns the count."""
    now = timezone.now()
    older_than = older_than or timedelta(seconds=settings.KNOWLEDGE_PROCESSING_TIMEOUT_SECONDS)
    dead = Q(heartbeat_at__lt=now - timedelta(seconds=settings.LIVENESS_EXPIRY_SECONDS))
    failed = KnowledgeDocument.objects.filter(
        dead | Q(updated_at__lt=now - older_than), status=DocumentStatus.PROCESSING
    ).update(status=DocumentStatus.FAILED, error=STUCK_ERROR, updated_at=now)
    if failed:
        logger.warning("marked %d knowledge document(s) stuck in processing as failed", failed)
    return failed


def document_delete(*, organization: Organization, agent_id: str, document_id: str) -> uuid.UUID:
    """Delete the agent's document and its chunks; another organization's or agent's document is a 404."""
    agent = agent_get(organization=organization, agent_id=agent_id)
    with transaction.atomic():
        documents = KnowledgeDocument.objects.select_for_update().filter(agent=agent)
        document = row_get(documents, document_id, what="document", missing="Knowledge document not found")
        pk = document.pk
        document_remove(document=document)
    return pk


def document_remove(*, document: KnowledgeDocument) -> None:
    """Delete a document with its chunks and tell every process's search cache (API and dashboard)."""
    with transaction.atomic():
        agent_id = document.agent_id
        document.delete()
        ingestion.index_changed(agent_id=agent_id)
