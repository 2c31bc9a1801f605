"""Knowledge ingestion as a Celery task (with a broker: REDIS_URL), and the in-process background
worker that runs the same task when there is no broker (the embedded default), so that the upload
request answers at once with the document `processing`.

The worker is a small thread pool (KNOWLEDGE_INGEST_WORKERS threads, 1 by default: embedding is CPU
bound and shares the process with live calls); documents wait in its queue as ids only, their text is
in the database. A document queued when the process dies stays `processing` until the upkeep sweep
marks it `failed` (calls/maintenance.py, KNOWLEDGE_PROCESSING_TIMEOUT_SECONDS).
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from celery import shared_task
from django.conf import settings
from django.db import close_old_connections, connections

from kit import liveness, memory
from knowledge import admission, ingestion
from knowledge.models import KnowledgeDocument

logger = logging.getLogger(__name__)

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


@shared_task(name="knowledge.ingest_document", acks_late=True)
def ingest_document(document_id: str) -> None:
    """Chunk, embed and store one uploaded document (it is `processing` until this finishes)."""
    ingestion.document_ingest(document_id=document_id)


def ingest_in_background(document_id: str) -> None:
    """Queue the ingestion on this process's background worker (call after the document's commit)."""
    global _pool
    ingestion.document_hold_queued(document_id=document_id)
    # The document holds one of the process's slots until its ingestion ends (knowledge/admission.py).
    admission.slots.ingest_queued(document_id)
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=settings.KNOWLEDGE_INGEST_WORKERS, thread_name_prefix="ingest")
    try:
        _pool.submit(_run, document_id)
    except RuntimeError:  # the pool is shut down (the process is stopping)
        admission.slots.ingest_done(document_id)
        raise


def _run(document_id: str) -> None:
    try:
        close_old_connections()
        # Through Celery's eager path: the same task, signals and log lines as with a worker.
        ingest_document.apply(args=[document_id], throw=True)
    except Exception:
        logger.exception("background ingestion of knowledge document %s failed", document_id)
    finally:
        admission.slots.ingest_done(document_id)
        liveness.release(KnowledgeDocument, document_id)
        connections.close_all()
        memory.trim()  # a large document's text and chunks are freed: give the memory back  # this thread's connection only
