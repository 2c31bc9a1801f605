from celery import shared_task

from knowledge import services


@shared_task(name="knowledge.ingest_document", acks_late=True)
def ingest_document(document_id: str) -> None:
    """Chunk, embed and store one uploaded document (it is `processing` until this finishes)."""
    services.document_ingest(document_id=document_id)
