"""Staff add knowledge to an agent in the dashboard: a file upload goes through the knowledge services (the
API's checks and limits; refusals on the form, nothing stored), the document's page shows its status,
description and chunks, and deleting it takes its chunks out of search."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from knowledge.models import KnowledgeChunk, KnowledgeDocument
from knowledge.search import search
from testing.dashboard import errors

pytestmark = pytest.mark.django_db

ADD = "/admin/knowledge/knowledgedocument/add/"
HOURS = (
    "# Opening hours\n\nThe Acme restaurant opens at noon and closes at eleven in the evening, every day "
    "except Monday.\n\n## Parking\n\nVisitors park in bay 12, behind the kitchen.\n"
)


def upload(agent: Any, filename: str = "hours.md", content: bytes = HOURS.encode(), **fields: str) -> dict[str, Any]:
    return {
        "agent": str(agent.pk),
        "file": SimpleUploadedFile(filename, content),
        "name": "",
        "description": "",
        **fields,
    }


def test_an_uploaded_file_is_indexed_and_its_page_shows_description_and_chunks(
    staff_client: Client, owner: Any, make_agent: Any
) -> None:
    agent = make_agent(owner.organization, name="Ava")
    assert f'value="{agent.pk}" selected' in staff_client.get(f"{ADD}?agent={agent.pk}").content.decode()

    response = staff_client.post(ADD, upload(agent))

    document = KnowledgeDocument.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/admin/knowledge/knowledgedocument/{document.pk}/change/"
    assert (document.agent, document.organization, document.type) == (agent, owner.organization, "markdown")
    assert document.name == "Opening hours" and document.description  # suggested from the text
    assert document.status == "ready" and document.chunk_count == KnowledgeChunk.objects.count() > 0
    assert search(agent, "where do visitors park", k=1)

    page = staff_client.get(response["Location"]).content.decode()
    assert document.description in page
    assert "Visitors park in bay 12, behind the kitchen." in page  # a chunk
    assert '<div class="readonly">Ready</div>' in page  # its status
    listed = owner.client.get(f"/public/v1/agents/{agent.pk}/knowledge").json()
    assert [item["name"] for item in listed] == ["Opening hours"]


def test_a_name_and_description_typed_in_are_kept(staff_client: Client, owner: Any, make_agent: Any) -> None:
    agent = make_agent(owner.organization)

    staff_client.post(ADD, upload(agent, filename="hours.txt", name="Hours", description="When we are open."))

    document = KnowledgeDocument.objects.get()
    assert (document.name, document.description, document.type) == ("Hours", "When we are open.", "text")


@pytest.mark.parametrize(
    ("filename", "content", "message"),
    [
        ("menu.csv", b"dish,price\nsoup,4", "Unsupported file type: upload a .txt, .md or .pdf file."),
        ("empty.md", b"  \n\n ", "The document is empty."),
        ("binary.txt", b"\xff\xfe\x00\x01 not text", "UTF-8"),
    ],
)
def test_a_refused_file_is_shown_on_the_form_and_nothing_is_stored(
    staff_client: Client, owner: Any, make_agent: Any, filename: str, content: bytes, message: str
) -> None:
    agent = make_agent(owner.organization)

    response = staff_client.post(ADD, upload(agent, filename=filename, content=content))

    assert response.status_code == 200
    page = response.content.decode()
    assert any(message in error for error in errors(page)), errors(page)
    assert "errors field-file" in page
    assert KnowledgeDocument.objects.count() == 0


def test_a_file_over_the_upload_limit_is_refused(
    staff_client: Client, owner: Any, make_agent: Any, settings: Any
) -> None:
    settings.KNOWLEDGE_MAX_UPLOAD_BYTES = 64
    agent = make_agent(owner.organization)

    response = staff_client.post(ADD, upload(agent))

    assert response.status_code == 200
    assert any("larger than the maximum upload size of 64 bytes" in e for e in errors(response.content.decode()))
    assert KnowledgeDocument.objects.count() == 0


def test_deleting_an_uploaded_document_takes_it_out_of_search(
    staff_client: Client, owner: Any, make_agent: Any
) -> None:
    agent = make_agent(owner.organization)
    staff_client.post(ADD, upload(agent))
    document = KnowledgeDocument.objects.get()

    response = staff_client.post(f"/admin/knowledge/knowledgedocument/{document.pk}/delete/", {"post": "yes"})

    assert response.status_code == 302
    assert KnowledgeDocument.objects.count() == 0 and KnowledgeChunk.objects.count() == 0
    assert search(agent, "where do visitors park", k=1) == []
