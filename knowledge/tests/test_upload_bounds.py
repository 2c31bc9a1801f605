"""Knowledge uploads bounded (docs/operations/limits.md): an organization's documents being processed are
bounded; a document over the chunk cap fails with a clear error; deleting a document stops its
ingestion. That concurrent large uploads beyond the process's bound are refused before their body is
read, with the server's memory flat, is the server's own HTTP handling (voiceagent/server.py: bodies kept
on disk, upload slots): voiceagent/tests/test_limits.py, on its real servers."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from celery.signals import task_postrun

from knowledge import ingestion
from knowledge.models import DocumentStatus, KnowledgeChunk, KnowledgeDocument
from testing.factories import KnowledgeDocumentFactory

# Distinct paragraphs, each long enough to be a chunk of its own.
PARAGRAPHS = [
    f"Room {n} faces the {('garden', 'harbour', 'square')[n % 3]} and has {n % 4 + 1} beds; its minibar is "
    f"refilled at {n % 12 + 1} o'clock and its safe code is reset after every guest who stays there."
    for n in range(150)
]


def url(agent: Any, document_id: str | None = None) -> str:
    base = f"/public/v1/agents/{agent.pk}/knowledge"
    return f"{base}/{document_id}" if document_id else base


def assert_busy(response: Any, *, retry_after: int) -> dict[str, Any]:
    assert response.status_code == 429
    assert response.headers["Retry-After"] == str(retry_after)
    body = response.json()
    assert body["code"] == "UPLOADS_BUSY" and body["retryAfter"] == retry_after
    return body


# --- through Django's test client ---------------------------------------------------------------------
@pytest.mark.django_db
def test_an_organization_over_its_bound_of_documents_processing_gets_a_429(
    owner, outsider, make_agent, settings
) -> None:
    settings.KNOWLEDGE_MAX_PROCESSING_PER_ORGANIZATION = 1
    agent = make_agent(owner.organization)
    # A document uploaded earlier and still being indexed (by this or another process).
    waiting = KnowledgeDocumentFactory.create(agent=agent, status=DocumentStatus.PROCESSING)

    refused = owner.client.post(url(agent), {"content": PARAGRAPHS[0]}, format="json")
    body = assert_busy(refused, retry_after=15)
    assert body["limit"] == 1 and "being processed" in body["error"]
    assert KnowledgeDocument.objects.filter(organization=owner.organization).count() == 1

    # Another organization is not held back by it.
    other = make_agent(outsider.organization)
    assert outsider.client.post(url(other), {"content": PARAGRAPHS[1]}, format="json").status_code == 200

    # Once the earlier document is indexed, the organization uploads again.
    KnowledgeDocument.objects.filter(pk=waiting.pk).update(status=DocumentStatus.READY)
    assert owner.client.post(url(agent), {"content": PARAGRAPHS[2]}, format="json").status_code == 200


@pytest.mark.django_db
def test_a_document_over_the_chunk_cap_fails_with_a_clear_error(owner, make_agent, settings) -> None:
    settings.KNOWLEDGE_MAX_CHUNKS_PER_DOCUMENT = 5
    agent = make_agent(owner.organization)

    too_long = owner.client.post(url(agent), {"content": "\n\n".join(PARAGRAPHS[:8])}, format="json")
    assert too_long.status_code == 200
    within = owner.client.post(url(agent), {"content": "\n\n".join(PARAGRAPHS[:5])}, format="json")
    assert within.status_code == 200

    items = {item["id"]: item for item in owner.client.get(url(agent)).json()}
    failed = items[too_long.json()["id"]]
    assert failed["status"] == "failed" and failed["chunkCount"] == 0
    assert failed["error"] == (
        "The document is too long to index: it makes 8 chunks, more than the limit of 5 per document "
        "(KNOWLEDGE_MAX_CHUNKS_PER_DOCUMENT); split it into smaller documents."
    )
    assert not KnowledgeChunk.objects.filter(document_id=too_long.json()["id"]).exists()
    ready = items[within.json()["id"]]
    assert ready["status"] == "ready" and ready["chunkCount"] == 5


@pytest.mark.django_db(transaction=True)
def test_deleting_a_document_stops_its_ingestion(owner, make_agent, settings, monkeypatch) -> None:
    settings.KNOWLEDGE_INGEST_INLINE = False  # on the process's background worker, as in production
    agent = make_agent(owner.organization)
    embedded: list[list[str]] = []
    started, go, ended = threading.Event(), threading.Event(), threading.Event()
    real_embed = ingestion.embed

    def embed(texts: list[str]) -> Any:
        embedded.append(list(texts))
        if len(embedded) == 1:
            started.set()
            go.wait(timeout=60)  # the first batch is under way while the test deletes the document
        return real_embed(texts)

    monkeypatch.setattr(ingestion, "embed", embed)
    uploaded = owner.client.post(url(agent), {"content": "\n\n".join(PARAGRAPHS)}, format="json")
    assert uploaded.status_code == 200
    document_id = uploaded.json()["id"]

    def finished(sender: Any = None, task: Any = None, args: Any = None, **kwargs: Any) -> None:
        if task is not None and task.name == "knowledge.ingest_document" and args and args[0] == document_id:
            ended.set()

    task_postrun.connect(finished, weak=False)
    try:
        assert started.wait(timeout=60), "the ingestion did not start"
        # Deletion is not blocked by the running ingestion.
        assert owner.client.delete(url(agent, document_id)).status_code == 200
        assert owner.client.get(url(agent)).json() == []
        go.set()
        assert ended.wait(timeout=60), "the ingestion did not end"
    finally:
        go.set()
        task_postrun.disconnect(finished)

    # Only the batch under way when the document was deleted was embedded, not the whole document;
    # nothing was written.
    assert len(embedded) == 1, "a batch was embedded after the document was deleted"
    assert len(embedded[0]) < len(PARAGRAPHS)
    assert not KnowledgeChunk.objects.filter(document_id=document_id).exists()
    assert not KnowledgeDocument.objects.filter(pk=document_id).exists()
