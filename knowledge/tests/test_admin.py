"""The dashboard lists documents by agent and organization, searchable and filterable; uploads go through
the knowledge services (agents/tests/test_dashboard_knowledge.py)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from knowledge import services
from knowledge.models import KnowledgeChunk, KnowledgeDocument
from knowledge.search import search

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client):
    User.objects.create_superuser("staff", "staff@example.com", "pw-staff-123")
    client.login(username="staff", password="pw-staff-123")
    return client


def test_documents_and_chunks_are_listed_searchable_and_read_only(staff, owner, outsider, make_agent):
    agent = make_agent(owner.organization, name="Helpdesk")
    services.document_create(
        organization=owner.organization, agent_id=str(agent.id), content="# Parking guide\n\nVisitors park in bay 12."
    )
    services.document_create(
        organization=outsider.organization,
        agent_id=str(make_agent(outsider.organization).id),
        content="# Holiday calendar\n\nThe office closes on 1 May.",
    )

    page = staff.get("/admin/knowledge/knowledgedocument/").content.decode()
    assert "Parking guide" in page and "Holiday calendar" in page and "Helpdesk" in page
    page = staff.get("/admin/knowledge/knowledgedocument/", {"q": "Helpdesk"}).content.decode()
    assert "Parking guide" in page and "Holiday calendar" not in page
    page = staff.get(
        "/admin/knowledge/knowledgedocument/", {"organization__id__exact": str(outsider.organization.id)}
    ).content.decode()
    assert "Holiday calendar" in page and "Parking guide" not in page
    page = staff.get("/admin/knowledge/knowledgedocument/", {"status__exact": "ready"}).content.decode()
    assert "Parking guide" in page

    page = staff.get("/admin/knowledge/knowledgechunk/", {"q": "bay 12"}).content.decode()
    assert "Parking guide" in page and "Holiday calendar" not in page
    assert staff.get("/admin/knowledge/agentknowledgeindex/").status_code == 200
    assert staff.get("/admin/knowledge/knowledgedocument/add/").status_code == 200  # the upload form (agents/tests)


def test_deleting_a_document_in_the_dashboard_removes_its_chunks_from_search(staff, owner, make_agent):
    agent = make_agent(owner.organization)
    document = services.document_create(
        organization=owner.organization, agent_id=str(agent.id), content="# Parking\n\nVisitors park in bay 12."
    )
    assert search(agent, "where do visitors park", k=1)
    response = staff.post(f"/admin/knowledge/knowledgedocument/{document.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not KnowledgeDocument.objects.filter(pk=document.pk).exists()
    assert not KnowledgeChunk.objects.filter(agent=agent).exists()
    assert search(agent, "where do visitors park", k=1) == []
