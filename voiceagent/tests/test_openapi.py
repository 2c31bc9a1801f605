"""The published OpenAPI schema lists every endpoint of the contract with its shapes."""

import pytest

SPEC_ENDPOINTS = [
    ("get", "/public/v1/agents"),
    ("post", "/public/v1/agents"),
    ("put", "/public/v1/agents/{agent_id}"),
    ("patch", "/public/v1/agents/{agent_id}"),
    ("get", "/public/v1/agents/{agent_id}/tools"),
    ("post", "/public/v1/agents/{agent_id}/tools"),
    ("put", "/public/v1/agents/{agent_id}/tools/{tool_id}"),
    ("delete", "/public/v1/agents/{agent_id}/tools/{tool_id}"),
    ("get", "/public/v1/agents/{agent_id}/mcp-tools"),
    ("put", "/public/v1/agents/{agent_id}/mcp-tools"),
    ("get", "/public/v1/mcp/servers"),
    ("get", "/public/v1/agents/{agent_id}/knowledge"),
    ("post", "/public/v1/agents/{agent_id}/knowledge"),
    ("delete", "/public/v1/agents/{agent_id}/knowledge/{document_id}"),
    ("post", "/public/v1/agents/{agent_id}/realtime-sessions"),
    ("get", "/public/v1/calls"),
    ("get", "/public/v1/calls/{call_id}"),
    ("get", "/public/v1/agents/{agent_id}/logs"),
    ("get", "/public/v1/phone-numbers"),
    ("get", "/public/v1/agents/{agent_id}/phone-numbers"),
    ("post", "/public/v1/agents/{agent_id}/phone-numbers"),
    ("delete", "/public/v1/agents/{agent_id}/phone-numbers/{phone_number_id}"),
]
WITH_BODY = {"post", "put", "patch"}


@pytest.fixture(scope="module")
def schema(django_db_blocker):
    from django.test import Client

    with django_db_blocker.unblock():
        response = Client().get("/public/v1/openapi.json")
    assert response.status_code == 200
    return response.json()


def normalized(path: str) -> str:
    import re

    return re.sub(r"\{[^}]+\}", "{}", path)


@pytest.mark.parametrize(("method", "path"), SPEC_ENDPOINTS)
def test_every_contract_endpoint_is_documented_with_its_shapes(schema, method, path):
    paths = {normalized(p): ops for p, ops in schema["paths"].items()}
    assert normalized(path) in paths, f"{path} missing from the OpenAPI schema"
    operation = paths[normalized(path)].get(method)
    assert operation, f"{method.upper()} {path} missing"
    success = [code for code in operation["responses"] if code.startswith("2")]
    assert success, "a success response is documented"
    assert any("content" in operation["responses"][code] for code in success), "the response shape is documented"
    if method in WITH_BODY and not path.endswith("realtime-sessions"):
        assert "requestBody" in operation, "the request shape is documented"


def test_the_docs_page_is_served_without_a_cdn(client, db):
    response = client.get("/docs/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "openapi.json" in page
    assert "cdn.jsdelivr" not in page and "unpkg.com" not in page
