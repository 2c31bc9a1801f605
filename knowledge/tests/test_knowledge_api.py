"""The knowledge endpoints as an integration sees them: upload, list, delete, every error."""

from __future__ import annotations

import re
import uuid

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext

from knowledge.models import AgentKnowledgeIndex, KnowledgeChunk, KnowledgeDocument
from testing import documents
from testing.pdfs import image_only_pdf, text_pdf

pytestmark = pytest.mark.django_db

GUIDE = """# Returns policy

Customers can return any unused item within 30 days of delivery for a full refund.
Refunds are paid to the original payment method within five business days.

## Damaged items

If an item arrives damaged, send a photo to support and we ship a replacement at no cost.
"""


def url(agent, document_id=None) -> str:
    base = f"/public/v1/agents/{getattr(agent, 'id', agent)}/knowledge"
    return f"{base}/{document_id}" if document_id else base


def upload(persona, agent, filename: str, data: bytes, **fields):
    return persona.client.post(url(agent), {"file": SimpleUploadedFile(filename, data), **fields}, format="multipart")


def only_item(persona, agent) -> dict:
    response = persona.client.get(url(agent))
    assert response.status_code == 200
    (item,) = response.json()
    return item


def test_json_upload_suggests_name_and_description_and_becomes_ready(owner, make_agent):
    agent = make_agent(owner.organization)
    response = owner.client.post(url(agent), {"content": GUIDE}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"id", "name", "description"}
    assert body["name"] == "Returns policy"
    # One sentence of the document, at most about 200 characters.
    assert body["description"] in GUIDE.replace("\n", " ")
    assert 0 < len(body["description"]) <= 200

    item = only_item(owner, agent)
    assert item["id"] == body["id"]
    assert item["type"] == "markdown"
    assert item["status"] == "ready"
    assert item["error"] is None
    assert item["sizeBytes"] == len(GUIDE.encode("utf-8"))
    assert item["chunkCount"] == KnowledgeChunk.objects.filter(document_id=body["id"]).count() >= 2
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", item["createdAt"])
    paths = list(KnowledgeChunk.objects.filter(document_id=body["id"]).values_list("heading_path", flat=True))
    assert ["Returns policy", "Damaged items"] in paths


def test_given_name_and_description_are_kept_and_null_description_stays_null(owner, make_agent):
    agent = make_agent(owner.organization)
    first = owner.client.post(
        url(agent), {"content": GUIDE, "name": "Policy", "description": "Our rules."}, format="json"
    )
    assert first.json()["name"] == "Policy" and first.json()["description"] == "Our rules."
    second = owner.client.post(url(agent), {"content": GUIDE, "description": None}, format="json")
    assert second.status_code == 200 and second.json()["description"] is None
    stored = KnowledgeDocument.objects.get(pk=second.json()["id"])
    assert stored.description is None and stored.name == "Returns policy"


def test_text_file_name_comes_from_first_meaningful_line(owner, make_agent):
    agent = make_agent(owner.organization)
    text = (
        "\n\n---\nOpening hours of the Madrid store\nWe open at nine in the morning every weekday. We close at eight.\n"
    )
    response = upload(owner, agent, "hours.txt", text.encode())
    assert response.status_code == 200
    assert response.json()["name"] == "Opening hours of the Madrid store"
    item = only_item(owner, agent)
    assert item["type"] == "text" and item["status"] == "ready" and item["sizeBytes"] == len(text.encode())


def test_markdown_file_upload_with_name(owner, make_agent):
    agent = make_agent(owner.organization)
    response = upload(owner, agent, "guide.md", GUIDE.encode(), name="Guide")
    assert response.status_code == 200 and response.json()["name"] == "Guide"
    assert only_item(owner, agent)["type"] == "markdown"


def test_pdf_upload_keeps_page_numbers_on_chunks(owner, make_agent):
    agent = make_agent(owner.organization)
    pdf = text_pdf(
        [
            ["Warranty terms for the Falcon kettle.", "The kettle carries a two year warranty."],
            ["Descaling instructions.", "Descale the kettle every month with white vinegar."],
        ]
    )
    response = upload(owner, agent, "Falcon.PDF", pdf)
    assert response.status_code == 200
    assert response.json()["name"] == "Warranty terms for the Falcon kettle"
    item = only_item(owner, agent)
    assert item["type"] == "pdf" and item["status"] == "ready" and item["sizeBytes"] == len(pdf)
    chunks = KnowledgeChunk.objects.filter(document_id=item["id"]).order_by("position")
    assert [c.page for c in chunks] == [1, 2]
    assert "white vinegar" in chunks[1].text


# The three short documents of knowledge/tests/fixtures: (file, chunks' heading paths, their pages, text
# that only the chunk at the same position holds).
SHORT_UPLOADS = [
    (
        "hotel-faq.txt",
        [[documents.HOTEL_TITLE]] * 5,
        [None] * 5,
        ["underground garage", "breakfast from 7", "heated indoor pool", "Check-out is at 11 am", "Dogs and cats"],
    ),
    (
        "menu.md",
        [[documents.MENU_TITLE]]
        + [[documents.MENU_TITLE, course] for course in ("Starters", "Pasta", "Pizza")]
        + [[documents.MENU_TITLE, course] for course in ("Pizza", "Desserts", "Drinks")],
        [None] * 7,
        ["made fresh", "Bruschetta", "Pumpkin ravioli", "wood-fired oven", "Diavola", "Tiramisu", "Espresso"],
    ),
    (
        "policy.pdf",
        [[documents.POLICY_TITLE, heading] for heading in documents.POLICY_HEADINGS],
        [1, 1, 1, 2, 2, 2],
        ["48 hours", "deposit of 30", "non-smoking", "10 pm to 7 am", "cost of repair", "Children under six"],
    ),
]


@pytest.mark.parametrize(("filename", "paths", "pages", "facts"), SHORT_UPLOADS, ids=[u[0] for u in SHORT_UPLOADS])
def test_a_short_upload_is_cut_at_its_headings_and_paragraphs(owner, make_agent, filename, paths, pages, facts):
    agent = make_agent(owner.organization)
    data = dict(documents.uploads())[filename]
    response = upload(owner, agent, filename, data)
    assert response.status_code == 200, response.content
    item = only_item(owner, agent)
    assert (item["status"], item["chunkCount"]) == ("ready", len(paths))

    chunks = list(KnowledgeChunk.objects.filter(document_id=item["id"]).order_by("position"))
    assert [c.heading_path for c in chunks] == paths
    assert [c.page for c in chunks] == pages
    # One fact per chunk, and no title or heading line in a chunk's text (they are its heading path).
    for position, chunk in enumerate(chunks):
        assert [fact for fact in facts if fact in chunk.text] == [facts[position]], chunk.text
        lines = chunk.text.split("\n")
        assert not any(line.strip("# ") in documents.titles_and_headings() for line in lines), chunk.text


@pytest.mark.parametrize(
    ("body", "fmt"),
    [({}, "json"), ({"name": "x"}, "json"), ({"name": "only a name"}, "multipart")],
)
def test_neither_content_nor_file_is_400(owner, make_agent, body, fmt):
    agent = make_agent(owner.organization)
    response = owner.client.post(url(agent), body, format=fmt)
    assert response.status_code == 400
    assert "content" in response.json()["error"]
    assert not KnowledgeDocument.objects.exists()


@pytest.mark.parametrize(
    ("filename", "data", "message"),
    [
        ("notes.docx", b"PK\x03\x04 something", "Unsupported file type"),
        ("picture.png", b"\x89PNG\r\n\x1a\n", "Unsupported file type"),
        ("binary.txt", b"ELF\x00\x01\x02\x00\x00 binary", "binary data"),
        ("latin1.txt", "Caf\xe9 cr\xe8me".encode("latin-1"), "not valid UTF-8"),
        ("scan.pdf", image_only_pdf(), "No text could be extracted"),
        ("broken.pdf", text_pdf([["Some text here."]])[:60], "could not be read"),
        ("fake.pdf", b"just some text, not a pdf", "not a PDF"),
        ("empty.txt", b"", "empty"),
        ("blank.md", b"  \n\n\t\n", "empty"),
    ],
)
def test_files_without_extractable_text_are_400(owner, make_agent, filename, data, message):
    agent = make_agent(owner.organization)
    response = upload(owner, agent, filename, data)
    assert response.status_code == 400, response.content
    assert message in response.json()["error"]
    assert "file" in response.json()["issues"]
    assert not KnowledgeDocument.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {"content": ""},
        {"content": "   \n\n  "},
        {"content": 123},
        {"content": ["a"]},
        {"content": "text", "name": 5},
        {"content": "text", "name": ""},
        {"content": "text", "description": 7},
        {"content": "nul \u0000 inside"},
        {"content": "text", "file": "not-a-file"},
    ],
)
def test_invalid_json_bodies_are_400(owner, make_agent, body):
    agent = make_agent(owner.organization)
    response = owner.client.post(url(agent), body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]
    assert not KnowledgeDocument.objects.exists()


def test_lone_surrogate_in_json_content_is_400(owner, make_agent):
    agent = make_agent(owner.organization)
    response = owner.client.post(url(agent), b'{"content": "bad \\ud800 text"}', content_type="application/json")
    assert response.status_code == 400
    assert "content" in response.json()["issues"]


def test_malformed_json_is_400(owner, make_agent):
    agent = make_agent(owner.organization)
    response = owner.client.post(url(agent), b'{"content": ', content_type="application/json")
    assert response.status_code == 400


def test_content_and_file_together_or_content_in_multipart_are_400(owner, make_agent):
    agent = make_agent(owner.organization)
    response = upload(owner, agent, "a.txt", b"Some text here.", content="more text")
    assert response.status_code == 400
    assert not KnowledgeDocument.objects.exists()


def test_a_multipart_form_with_more_fields_than_django_reads_is_a_400(owner, make_agent):
    agent = make_agent(owner.organization)
    fields = {f"extra{n}": "x" for n in range(1200)}
    response = owner.client.post(url(agent), {"file": SimpleUploadedFile("a.txt", b"Some text."), **fields})
    assert response.status_code == 400
    assert "Too many fields" in response.json()["error"]
    assert not KnowledgeDocument.objects.exists()


def test_a_form_urlencoded_upload_is_415(owner, make_agent):
    agent = make_agent(owner.organization)
    response = owner.client.post(url(agent), "content=Hello", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415
    assert "application/json or multipart/form-data" in response.json()["error"]


def test_over_the_maximum_size_is_413(owner, make_agent, settings):
    settings.KNOWLEDGE_MAX_UPLOAD_BYTES = 1000
    agent = make_agent(owner.organization)
    content = "Word " * 201  # 1005 bytes
    response = owner.client.post(url(agent), {"content": content}, format="json")
    assert response.status_code == 413
    assert response.json()["maxBytes"] == 1000
    response = upload(owner, agent, "big.txt", content.encode())
    assert response.status_code == 413
    # Exactly at the limit is accepted.
    assert owner.client.post(url(agent), {"content": "Word " * 200}, format="json").status_code == 200
    assert KnowledgeDocument.objects.count() == 1


def test_a_request_body_far_over_the_limit_is_refused_before_reading(owner, make_agent, settings):
    settings.KNOWLEDGE_MAX_UPLOAD_BYTES = 1000
    agent = make_agent(owner.organization)
    body = b'{"content": "' + b"a" * (1024 * 1024 + 2000) + b'"}'
    response = owner.client.post(url(agent), body, content_type="application/json")
    assert response.status_code == 413
    # A multipart form field larger than Django's in-memory limit is a 413 too, not a 500.
    response = owner.client.post(url(agent), {"name": "n" * 3_000_000}, format="multipart")
    assert response.status_code == 413


def test_default_limit_is_20_mb_and_large_json_bodies_never_500(owner, make_agent):
    agent = make_agent(owner.organization)
    # 3 MB is above Django's DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB): read normally (here: an empty document).
    response = owner.client.post(url(agent), {"content": " " * 3_000_000}, format="json")
    assert response.status_code == 400 and "empty" in response.json()["error"]
    response = owner.client.post(url(agent), {"content": "a" * (20 * 1024 * 1024 + 1)}, format="json")
    assert response.status_code == 413
    assert response.json()["maxBytes"] == 20 * 1024 * 1024


def test_heading_only_document_fails_with_an_error(owner, make_agent):
    agent = make_agent(owner.organization)
    response = owner.client.post(url(agent), {"content": "# Title\n\n## Section"}, format="json")
    assert response.status_code == 200
    item = only_item(owner, agent)
    assert item["status"] == "failed"
    assert item["chunkCount"] == 0
    assert "No text" in item["error"]


def test_other_organization_and_bad_ids(owner, outsider, make_agent):
    agent = make_agent(owner.organization)
    doc_id = owner.client.post(url(agent), {"content": GUIDE}, format="json").json()["id"]
    assert outsider.client.get(url(agent)).status_code == 404
    assert outsider.client.post(url(agent), {"content": GUIDE}, format="json").status_code == 404
    assert outsider.client.delete(url(agent, doc_id)).status_code == 404
    # The outsider's own agent cannot reach the owner's document either.
    their_agent = make_agent(outsider.organization)
    assert outsider.client.delete(url(their_agent, doc_id)).status_code == 404
    assert KnowledgeDocument.objects.filter(pk=doc_id).exists()

    assert owner.client.get(url("not-a-uuid")).status_code == 400
    assert owner.client.post(url("not-a-uuid"), {"content": GUIDE}, format="json").status_code == 400
    response = owner.client.delete(url(agent, "nope"))
    assert response.status_code == 400 and "document" in response.json()["issues"]
    assert owner.client.delete(url(agent, uuid.uuid4())).status_code == 404
    assert owner.client.get(url(uuid.uuid4())).status_code == 404


def test_document_of_another_agent_of_the_same_organization_is_404(owner, make_agent):
    first, second = make_agent(owner.organization), make_agent(owner.organization, name="Sales")
    doc_id = owner.client.post(url(first), {"content": GUIDE}, format="json").json()["id"]
    assert owner.client.delete(url(second, doc_id)).status_code == 404
    assert owner.client.get(url(second)).json() == []


def test_delete_removes_document_and_chunks(owner, teammate, make_agent):
    agent = make_agent(owner.organization)
    keep = owner.client.post(url(agent), {"content": "Keep this document about invoices."}, format="json").json()
    doc_id = owner.client.post(url(agent), {"content": GUIDE}, format="json").json()["id"]
    version = AgentKnowledgeIndex.objects.get(agent=agent).version
    assert KnowledgeChunk.objects.filter(document_id=doc_id).exists()

    response = teammate.client.delete(url(agent, doc_id))
    assert response.status_code == 200 and response.json() == {"id": doc_id}
    assert not KnowledgeDocument.objects.filter(pk=doc_id).exists()
    assert not KnowledgeChunk.objects.filter(document_id=doc_id).exists()
    assert AgentKnowledgeIndex.objects.get(agent=agent).version != version
    assert [item["id"] for item in owner.client.get(url(agent)).json()] == [keep["id"]]
    assert owner.client.delete(url(agent, doc_id)).status_code == 404


def test_list_is_oldest_first_with_every_field(owner, make_agent):
    agent = make_agent(owner.organization)
    ids = [
        owner.client.post(url(agent), {"content": f"Document number {n} explains topic {n}."}, format="json").json()[
            "id"
        ]
        for n in range(3)
    ]
    items = owner.client.get(url(agent)).json()
    assert [item["id"] for item in items] == ids
    assert set(items[0]) == {
        "id",
        "name",
        "description",
        "type",
        "sizeBytes",
        "status",
        "error",
        "chunkCount",
        "createdAt",
    }


def test_agent_list_counts_documents_without_a_query_per_agent(owner, make_agent):
    agents = [make_agent(owner.organization, name=f"A{i}") for i in range(3)]
    for index, agent in enumerate(agents):
        for n in range(index):
            owner.client.post(url(agent), {"content": f"Doc {n}: shipping to Spain takes {n} days."}, format="json")
    owner.client.post(url(agents[0]), {"content": "# Only headings"}, format="json")  # failed, still counted

    with CaptureQueriesContext(connection) as three:
        response = owner.client.get("/public/v1/agents")
    counts = {item["id"]: item["knowledgeDocumentCount"] for item in response.json()}
    assert counts == {str(agents[0].id): 1, str(agents[1].id): 1, str(agents[2].id): 2}

    for i in range(3, 6):
        make_agent(owner.organization, name=f"A{i}")
    with CaptureQueriesContext(connection) as six:
        assert len(owner.client.get("/public/v1/agents").json()) == 6
    assert len(six) == len(three)


def test_unauthenticated_is_401(anonymous, owner, make_agent):
    agent = make_agent(owner.organization)
    assert anonymous.get(url(agent)).status_code == 401
    assert anonymous.post(url(agent), {"content": GUIDE}, format="json").status_code == 401
