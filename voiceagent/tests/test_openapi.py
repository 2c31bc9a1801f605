"""The published OpenAPI schema lists every endpoint of the contract with its shapes, and describes the API
exactly enough for generated clients and fuzzers (voiceagent/tests/test_schemathesis.py puts it to the test)."""

import json
import re
from io import StringIO

import pytest
from django.core.management import call_command

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
EXTRA_ENDPOINTS = [("get", "/public/v1/agents/{agent_id}"), ("delete", "/public/v1/agents/{agent_id}")]
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


@pytest.mark.parametrize(("method", "path"), SPEC_ENDPOINTS + EXTRA_ENDPOINTS)
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
    assert "cdn.jsdelivr" not in page and "unpkg.com" not in page
    # Swagger UI's start-up script is its own file (no inline script under the page's CSP).
    script = client.get("/docs/?script=")
    assert script.status_code == 200 and "openapi.json" in script.content.decode()


def operations(schema):
    for path, ops in schema["paths"].items():
        for method, operation in ops.items():
            yield method, path, operation


def resolve(schema, node):
    while "$ref" in node or "allOf" in node:
        if "allOf" in node:
            node = node["allOf"][0]
        else:
            node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def test_schema_generation_has_no_warnings_and_the_schema_is_valid_openapi(tmp_path):
    out = StringIO()
    target = tmp_path / "openapi.json"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(target), stdout=out, stderr=out)
    assert target.read_text().startswith("{") or target.read_text().startswith("openapi")


def test_no_generation_marker_is_left_in_the_published_schema(schema):
    text = json.dumps(schema)
    assert "x-string-pattern" not in text and "x-length-in-pattern" not in text
    assert "x-forbidden-properties" not in text and "x-request-max-items" not in text


def test_every_operation_has_a_user_facing_summary_description_and_tag(schema):
    assert [tag["name"] for tag in schema["tags"]]
    for method, path, operation in operations(schema):
        where = f"{method.upper()} {path}"
        assert operation.get("summary"), where
        assert len(operation.get("description", "")) > 20, where
        assert "Base of every" not in operation["description"] and "view" not in operation["description"], where
        assert operation.get("tags") and set(operation["tags"]) <= {t["name"] for t in schema["tags"]}, where


def test_every_error_status_carries_the_error_shape(schema):
    error = schema["components"]["schemas"]["Error"]
    assert error["required"] == ["error"]
    for method, path, operation in operations(schema):
        responses = operation["responses"]
        # Every operation needs the API key, except a recording's signed URL (the signature is the credential).
        assert "401" in responses or (path == "/public/v1/recordings/{call_id}" and "403" in responses), path
        for status, response in responses.items():
            if status[0] in "45":
                assert response["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
        if "requestBody" in operation:
            assert {"400", "413", "415"} <= set(responses), f"{method} {path}"
        if "{" in path:
            assert {"400", "404"} <= set(responses), f"{method} {path}"
    realtime = schema["paths"]["/public/v1/agents/{agent_id}/realtime-sessions"]["post"]["responses"]
    assert {"409", "500"} <= set(realtime)


def test_bodies_are_json_only_except_the_knowledge_and_call_batch_uploads(schema):
    for method, path, operation in operations(schema):
        if "requestBody" not in operation:
            continue
        types = set(operation["requestBody"]["content"])
        if path.endswith(("/knowledge", "/call-batches")):  # a document file; a CSV of recipients
            assert types == {"application/json", "multipart/form-data"}
        else:
            assert types == {"application/json"}, f"{method} {path}"


def test_path_ids_are_uuids_and_query_bounds_are_declared(schema):
    for method, path, operation in operations(schema):
        for parameter in operation.get("parameters", []):
            if parameter["in"] == "path":
                assert parameter["schema"] == {"type": "string", "format": "uuid"}, f"{method} {path}"
    logs = {p["name"]: p["schema"] for p in schema["paths"]["/public/v1/agents/{agent_id}/logs"]["get"]["parameters"]}
    assert (logs["limit"]["minimum"], logs["limit"]["maximum"], logs["limit"]["default"]) == (1, 100, 25)
    assert logs["offset"]["minimum"] == 0
    assert logs["severity"]["enum"] == ["debug", "info", "warn", "error"]
    assert re.search(logs["sessionId"]["pattern"], "abc123") and not re.search(logs["sessionId"]["pattern"], "abc")
    calls = {p["name"]: p["schema"] for p in schema["paths"]["/public/v1/calls"]["get"]["parameters"]}
    assert (calls["limit"]["minimum"], calls["limit"]["maximum"]) == (1, 100)
    assert calls["agentId"]["format"] == "uuid"


def test_required_fields_are_required(schema):
    components = schema["components"]["schemas"]
    assert components["AgentWriteRequest"]["required"] == ["name"]
    assert components["PatchedAgentPatchRequest"]["required"] == ["expectedUpdatedAt"]
    assert components["ToolWriteRequest"]["required"] == ["name"]
    assert components["DocumentContentRequest"]["required"] == ["content"]
    assert components["DocumentFileRequest"]["required"] == ["file"]
    assert components["AssignRequestRequest"]["required"] == ["phoneNumberId"]


def test_the_realtime_session_describes_both_audio_directions(schema):
    session = schema["paths"]["/public/v1/agents/{agent_id}/realtime-sessions"]["post"]["responses"]["200"]
    body = resolve(schema, session["content"]["application/json"]["schema"])
    protocol = resolve(schema, body["properties"]["protocol"])
    assert sorted(protocol["required"]) == ["inputAudio", "outputAudio"]
    rates = {}
    for direction in ("inputAudio", "outputAudio"):
        audio = resolve(schema, protocol["properties"][direction])
        assert resolve(schema, audio["properties"]["encoding"])["enum"] == ["pcm16"]
        rates[direction] = resolve(schema, audio["properties"]["sampleRate"])["enum"]
    assert rates == {"inputAudio": [16000], "outputAudio": [24000]}


def test_agent_write_and_update_answers_are_documented(schema):
    agent = schema["paths"]["/public/v1/agents/{agent_id}"]
    for method in ("put", "patch"):
        body = resolve(schema, agent[method]["responses"]["200"]["content"]["application/json"]["schema"])
        assert sorted(body["properties"]) == ["id", "updatedAt"]
    item = agent["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    listed = schema["paths"]["/public/v1/agents"]["get"]["responses"]["200"]["content"]["application/json"]
    assert listed["schema"]["items"] == item
