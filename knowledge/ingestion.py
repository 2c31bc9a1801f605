"""Ingestion of a knowledge document: chunk and embed its text, then store the chunks and mark it
`ready` (or `failed`) in one transaction; and the index version that tells every process's search
cache that an agent's chunks changed.

It sits below knowledge/services.py (which queues it after the upload commits) and knowledge/tasks.py
(the Celery task and the in-process worker that run it), so that neither of those imports the other
back.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from kit import liveness
from knowledge import admission
from knowledge.chunking import chunk_pages, embedding_text
from knowledge.embeddings import DIMENSIONS, embed, to_bytes
from knowledge.models import AgentKnowledgeIndex, DocumentStatus, DocumentType, KnowledgeChunk, KnowledgeDocument

logger = logging.getLogger(__name__)


def document_fail(*, document_id: Any, message: str) -> None:
    """Mark a document that is still `processing` as `failed` with the message shown to its owner."""
    _work_done(document_id)
    KnowledgeDocument.objects.filter(pk=document_id, status=DocumentStatus.PROCESSING).update(
        status=DocumentStatus.FAILED, error=message
    )


def index_changed(*, agent_id: Any) -> None:
    """Call inside the transaction that changes the agent's chunks: searches everywhere reload."""
    AgentKnowledgeIndex.objects.update_or_create(agent_id=agent_id, defaults={"version": uuid.uuid4()})


def document_ingest(*, document_id: str) -> None:
    """Chunk and embed a `processing` document, then store its chunks and mark it `ready` in one
    transaction (or `failed` with an error). Safe to run twice; a document deleted meanwhile is skipped."""
    # Claim the document: `updated_at` marks when ingestion last started, which the sweep of documents
    # stuck in `processing` (document_fail_stuck) measures from.
    if not KnowledgeDocument.objects.filter(pk=document_id, status=DocumentStatus.PROCESSING).update(
        updated_at=timezone.now(), heartbeat_at=liveness.first_beat()
    ):
        return
    liveness.hold(KnowledgeDocument, document_id)
    try:
        _ingest(document_id)
    finally:
        liveness.release(KnowledgeDocument, document_id)


def document_hold_queued(*, document_id: str) -> None:
    """A document queued on this process's in-memory ingestion worker: lost with the process, so
    this process keeps its heartbeat (and the sweep fails it soon after a crash)."""
    KnowledgeDocument.objects.filter(pk=document_id, status=DocumentStatus.PROCESSING).update(
        heartbeat_at=liveness.first_beat()
    )
    liveness.hold(KnowledgeDocument, document_id)


# Chunks embedded between two checks that the document is still wanted: deleting a document stops
# its ingestion within one batch.
INGEST_BATCH_CHUNKS = 64


def too_many_chunks(count: int) -> str:
    limit = settings.KNOWLEDGE_MAX_CHUNKS_PER_DOCUMENT
    return (
        f"The document is too long to index: it makes {count} chunks, more than the limit of {limit} per "
        "document (KNOWLEDGE_MAX_CHUNKS_PER_DOCUMENT); split it into smaller documents."
    )


def _work_done(document_id: Any) -> None:
    """The document's chunking and embedding are over: its slot of this process's bound is free before
    its final status is written, so that an upload sent as soon as the document shows `ready` or `failed`
    finds the slot free (knowledge/admission.py; the worker frees it again, harmlessly, when it returns)."""
    admission.slots.ingest_done(document_id)


def _still_wanted(document_id: Any) -> bool:
    """The document still exists and is still `processing` (not deleted, nor failed by the sweep)."""
    return KnowledgeDocument.objects.filter(pk=document_id, status=DocumentStatus.PROCESSING).exists()


def _ingest(document_id: str) -> None:
    document = KnowledgeDocument.objects.filter(pk=document_id, status=DocumentStatus.PROCESSING).first()
    if document is None:
        return
    try:
        chunks = chunk_pages(
            document.pages, markdown=document.type == DocumentType.MARKDOWN, paged=document.type == DocumentType.PDF
        )
        if not chunks:
            document_fail(document_id=document.pk, message="No text could be indexed in this document.")
            return
        if len(chunks) > settings.KNOWLEDGE_MAX_CHUNKS_PER_DOCUMENT:
            document_fail(document_id=document.pk, message=too_many_chunks(len(chunks)))
            return
        texts = [embedding_text(c.text, c.heading_path) for c in chunks]
        # Longest first, as embed() orders one call's texts: batches of similar lengths pad little.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        vectors = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for start in range(0, len(order), INGEST_BATCH_CHUNKS):
            if start and not _still_wanted(document.pk):
                logger.info("ingestion of knowledge document %s stopped: deleted or no longer processing", document.pk)
                return
            batch = order[start : start + INGEST_BATCH_CHUNKS]
            vectors[batch] = embed([texts[i] for i in batch])
    except Exception:
        logger.exception("ingestion of knowledge document %s failed", document.pk)
        document_fail(
            document_id=document.pk, message="Indexing failed because of an internal error; upload the document again."
        )
        return

    _work_done(document.pk)
    with transaction.atomic():
        locked = (
            KnowledgeDocument.objects.select_for_update()
            .filter(pk=document.pk, status=DocumentStatus.PROCESSING)
            .first()
        )
        if locked is None:
            return
        KnowledgeChunk.objects.filter(document=locked).delete()
        KnowledgeChunk.objects.bulk_create(
            [
                KnowledgeChunk(
                    document=locked,
                    agent_id=locked.agent_id,
                    position=position,
                    text=chunk.text,
                    heading_path=chunk.heading_path,
                    page=chunk.page,
                    token_count=chunk.token_count,
                    embedding=to_bytes(vector),
                )
                for position, (chunk, vector) in enumerate(zip(chunks, vectors, strict=True))
            ],
            batch_size=500,
        )
        locked.status = DocumentStatus.READY
        locked.error = None
        locked.chunk_count = len(chunks)
        locked.save(update_fields=["status", "error", "chunk_count", "updated_at"])
        index_changed(agent_id=locked.agent_id)
