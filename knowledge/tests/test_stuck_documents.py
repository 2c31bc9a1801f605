"""The upkeep sweep of documents left `processing` by a process that died (calls/maintenance.py), as the
API shows them; the real-process version (SIGKILL, restart) is voiceagent/tests/test_restarts.py."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from calls import tasks
from knowledge import ingestion, services
from knowledge.models import KnowledgeDocument
from testing.factories import KnowledgeDocumentFactory

pytestmark = pytest.mark.django_db


def stranded(agent, *, minutes_ago: float, name: str) -> KnowledgeDocument:
    document = KnowledgeDocumentFactory(
        agent=agent, name=name, size_bytes=20, status="processing", pages=["# Parking\n\nVisitors park in bay 12."]
    )
    KnowledgeDocument.objects.filter(pk=document.pk).update(updated_at=timezone.now() - timedelta(minutes=minutes_ago))
    return document


def listed(persona, agent) -> dict[str, dict]:
    response = persona.client.get(f"/public/v1/agents/{agent.id}/knowledge")
    assert response.status_code == 200
    return {item["name"]: item for item in response.json()}


def test_the_sweep_fails_documents_processing_past_the_bound_with_a_reason(owner, make_agent, settings, capsys):
    settings.KNOWLEDGE_PROCESSING_TIMEOUT_SECONDS = 600
    agent = make_agent(owner.organization)
    stranded(agent, minutes_ago=11, name="died")
    young = stranded(agent, minutes_ago=5, name="still ingesting")

    call_command("calls_maintenance")
    assert json.loads(capsys.readouterr().out)["failedDocuments"] == 1
    items = listed(owner, agent)
    assert (items["died"]["status"], items["died"]["chunkCount"]) == ("failed", 0)
    assert items["died"]["error"] == services.STUCK_ERROR
    assert (items["still ingesting"]["status"], items["still ingesting"]["error"]) == ("processing", None)

    # An ingestion that resumes later does not bring a failed document back; a live one still finishes.
    ingestion.document_ingest(document_id=str(KnowledgeDocument.objects.get(name="died").pk))
    ingestion.document_ingest(document_id=str(young.pk))
    items = listed(owner, agent)
    assert items["died"]["status"] == "failed" and items["still ingesting"]["status"] == "ready"


def test_ingestion_restarts_the_clock_and_celery_beat_runs_the_same_sweep(owner, make_agent, settings):
    settings.KNOWLEDGE_PROCESSING_TIMEOUT_SECONDS = 600
    agent = make_agent(owner.organization)
    queued_long_ago = stranded(agent, minutes_ago=30, name="queued")
    # Ingestion claims the document (its clock starts again) before the sweep: it is not failed under it.
    KnowledgeDocument.objects.filter(pk=queued_long_ago.pk).update(updated_at=timezone.now())
    stranded(agent, minutes_ago=30, name="died")
    assert settings.CELERY_BEAT_SCHEDULE["calls-upkeep"]["task"] == tasks.run_upkeep.name
    done = tasks.run_upkeep.delay().get()
    assert done["failedDocuments"] == 1
    assert {name: item["status"] for name, item in listed(owner, agent).items()} == {
        "queued": "processing",
        "died": "failed",
    }
    assert tasks.run_upkeep.delay().get()["failedDocuments"] == 0  # failing is done once
