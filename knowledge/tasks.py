"""Knowledge ingestion as a Celery task (with a broker: REDIS_URL), and the in-process background
pool that runs the same task when there is none (the embedded default), so that the upload request
answers at once with the document `processing`; where it runs is BACKGROUND_WORK's (kit/background.py).

The pool is small (KNOWLEDGE_INGEST_WORKERS threads, 1 by default: embedding is CPU bound and shares the
process with live calls); documents wait in its queue as ids only, their text is in the database. A
document queued when the process dies stays `processing` until the upkeep sweep marks it `failed`
(calls/maintenance.py, KNOWLEDGE_PROCESSING_TIMEOUT_SECONDS). Its threads finish the ingestion they run
when the process exits (not the queued ones).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from typing import Any

from celery import shared_task
from django.conf import settings

from kit import background, liveness, memory
from knowledge import admission, ingestion
from knowledge.models import KnowledgeDocument

logger = logging.getLogger(__name__)

TASK = "knowledge.ingest_document"


class _IngestPool(background.Pool):
    """The pool whose queue holds document ids: a queued document holds its liveness and one of the
    process's slots from the moment it is queued (knowledge/admission.py) until its ingestion ends."""

    def submit(self, function: Callable[..., Any], *args: Any, key: Hashable | None = None) -> bool:
        document_id = args[0]
        ingestion.document_hold_queued(document_id=document_id)
        admission.slots.ingest_queued(document_id)
        try:
            return super().submit(function, *args, key=key)
        except RuntimeError:  # the pool is shut down (the process is stopping)
            admission.slots.ingest_done(document_id)
            raise


_pool = _IngestPool("ingest", lambda: int(settings.KNOWLEDGE_INGEST_WORKERS), daemon=False)


@shared_task(name=TASK, acks_late=True)
def ingest_document(document_id: str) -> None:
    """Chunk, embed and store one uploaded document (it is `processing` until this finishes)."""
    ingestion.document_ingest(document_id=document_id)


def ingest_queue(document_id: str) -> str:
    """Queue one document's ingestion where BACKGROUND_WORK says (after the document's commit; `inline`:
    now, in this thread and transaction). Where it went; raises when the broker cannot be reached."""
    return background.submit(
        TASK,
        _run,
        document_id,
        pool=_pool,
        feature="knowledge",
        inline=lambda document_id: ingestion.document_ingest(document_id=document_id),
    )


def _run(document_id: str) -> None:
    try:
        # Through Celery's eager path: the same task, signals and log lines as with a worker.
        ingest_document.apply(args=[document_id], throw=True)
    except Exception:
        logger.exception("background ingestion of knowledge document %s failed", document_id)
    finally:
        admission.slots.ingest_done(document_id)
        liveness.release(KnowledgeDocument, document_id)
        memory.trim()  # a large document's text and chunks are freed: give the memory back
