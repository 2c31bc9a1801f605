"""knowledge.search: hybrid ranking, per-agent scoping, and a cache that follows the database."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from django.conf import settings

import knowledge
from knowledge import services
from knowledge.embeddings import embed
from knowledge.models import AgentKnowledgeIndex, KnowledgeChunk, KnowledgeDocument
from knowledge.search import SearchHit, search
from knowledge.selectors import agent_knowledge_texts
from testing.pdfs import text_pdf

pytestmark = pytest.mark.django_db

ROUTER = """# Router manual

## Resetting the router

Hold the reset button on the back for ten seconds until the lights blink orange.

## Error codes

Error code X7-4471 means the fibre cable is unplugged; plug it back in firmly.

Error code X7-9902 means the firmware update failed; restart the update from the app.
"""
BILLING = """# Billing

Invoices are sent on the first day of each month by email.
You can pay by card or by bank transfer.
"""


def add(owner, agent, content: str, **fields) -> str:
    return str(
        services.document_create(organization=owner.organization, agent_id=str(agent.id), content=content, **fields).id
    )


def test_finds_the_chunk_that_answers_with_its_document_and_heading(owner, make_agent):
    agent = make_agent(owner.organization)
    router_id = add(owner, agent, ROUTER)
    add(owner, agent, BILLING)
    hits = search(agent, "how do I restart my router from scratch", k=3)
    assert 1 <= len(hits) <= 3
    assert isinstance(hits[0], SearchHit)
    assert "reset button" in hits[0].text
    assert hits[0].document_id == router_id
    assert hits[0].document_name == "Router manual"
    assert hits[0].heading_path == ["Router manual", "Resetting the router"]
    assert hits[0].page is None
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_exact_codes_are_found_by_the_keyword_side(owner, make_agent):
    agent = make_agent(owner.organization)
    add(owner, agent, ROUTER)
    add(owner, agent, BILLING)
    for code, expected in (("X7-9902", "firmware"), ("X7-4471", "fibre")):
        hit = search(agent, f"what does {code} mean", k=1)[0]
        assert code in hit.text and expected in hit.text


def test_pdf_hits_carry_their_page(owner, make_agent):
    agent = make_agent(owner.organization)
    pdf = text_pdf([["Kettle warranty: two years."], ["Descale the kettle monthly with white vinegar."]])
    from django.core.files.uploadedfile import SimpleUploadedFile

    services.document_create(
        organization=owner.organization, agent_id=str(agent.id), upload=SimpleUploadedFile("k.pdf", pdf)
    )
    hit = search(agent, "how often should I descale", k=1)[0]
    assert hit.page == 2 and "vinegar" in hit.text


def test_search_is_scoped_to_the_agent(owner, outsider, make_agent):
    mine, theirs = make_agent(owner.organization), make_agent(outsider.organization)
    add(owner, mine, ROUTER)
    add(outsider, theirs, BILLING)
    assert all(hit.document_name == "Router manual" for hit in search(mine, "how can I pay my invoice", k=5))
    assert all(hit.document_name == "Billing" for hit in search(theirs, "router error code", k=5))


def test_empty_cases(owner, make_agent):
    agent = make_agent(owner.organization)
    assert search(agent, "anything") == []
    add(owner, agent, ROUTER)
    assert search(agent, "   ") == []
    assert search(agent, "router", k=0) == []
    assert len(search(agent, "router", k=500)) == KnowledgeChunk.objects.filter(agent=agent).count()
    assert search(agent.id, "router", k=1)[0].document_name == "Router manual"


def test_added_and_deleted_documents_are_seen_by_the_next_search(owner, make_agent):
    agent = make_agent(owner.organization)
    add(owner, agent, BILLING)
    assert all("Router" not in hit.document_name for hit in search(agent, "router error X7-4471"))
    router_id = add(owner, agent, ROUTER)
    assert search(agent, "router error X7-4471", k=1)[0].document_id == router_id
    services.document_delete(organization=owner.organization, agent_id=str(agent.id), document_id=router_id)
    assert all(hit.document_id != router_id for hit in search(agent, "router error X7-4471"))


def test_a_change_made_by_another_process_is_seen(owner, make_agent):
    """Another process changes rows and the version in the database, never this process's memory."""
    agent = make_agent(owner.organization)
    add(owner, agent, ROUTER)
    before = search(agent, "fibre cable unplugged", k=1)[0]
    assert "X7-4471" in before.text
    # What another process's ingestion commits: new chunk text and vector, and a new index version.
    chunk = KnowledgeChunk.objects.get(pk=before.chunk_id)
    vector = embed(["Bananas ripen faster next to apples."])[0]
    KnowledgeChunk.objects.filter(pk=chunk.pk).update(
        text="Bananas ripen faster next to apples.", embedding=vector.astype("<f4").tobytes()
    )
    AgentKnowledgeIndex.objects.filter(agent=agent).update(version=uuid.uuid4())
    hit = search(agent, "how do bananas ripen", k=1)[0]
    assert hit.chunk_id == chunk.pk and hit.score > 0.5


def test_lazy_reexport_is_the_same_search(owner, make_agent):
    agent = make_agent(owner.organization)
    add(owner, agent, ROUTER)
    assert knowledge.search(agent, "reset button", 1) == search(agent, "reset button", 1)


def test_package_import_does_not_load_models():
    code = "import sys, knowledge; assert 'knowledge.models' not in sys.modules; assert callable(knowledge.__getattr__)"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=settings.BASE_DIR)


def test_agent_knowledge_texts_are_the_ready_chunks_of_the_agent(owner, make_agent):
    agent, other = make_agent(owner.organization), make_agent(owner.organization, name="Other")
    add(owner, agent, ROUTER)
    add(owner, other, BILLING)
    add(owner, agent, "# Only a heading")  # failed: no chunks
    texts = agent_knowledge_texts(agent_id=agent.id)
    assert texts == list(KnowledgeChunk.objects.filter(agent=agent).order_by("position").values_list("text", flat=True))
    assert any("X7-4471" in t for t in texts) and not any("Invoices" in t for t in texts)
    assert KnowledgeDocument.objects.filter(agent=agent, status="failed").count() == 1
