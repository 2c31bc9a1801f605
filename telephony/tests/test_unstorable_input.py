"""Text that cannot be stored (a lone UTF-16 surrogate, `\\ud800`, which JSON's escapes allow; NUL, which
PostgreSQL refuses) is refused at the edge, in every kind of request body and in the query string: a 400
that names the field, nothing stored, nothing placed at the carrier, and the organization's lists still
answer 200 (a stored surrogate made every later GET of the list a 500)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from agents.models import AgentStatus
from calls.models import Call
from realtime.models import AgentTest
from telephony.models import CallBatch
from telephony.outbound.dispatcher import outbound_dispatch
from telephony.services.numbers import phone_number_claim
from testing.twilio_rest import call_created
from testing.webhooks import LoopbackReceiver, Reply

SURROGATE = "\ud800"
NUL = "\x00"
LISTS = (
    "/public/v1/calls",
    "/public/v1/agents",
    "/public/v1/call-batches",
    "/public/v1/webhooks",
    "/public/v1/webhook-deliveries",
)

pytestmark = pytest.mark.usefixtures("outbound_ready", "realtime_settings")


@pytest.fixture
def twilio_api(settings: Any) -> Iterator[LoopbackReceiver]:
    """Twilio's REST API on loopback: a call placed there is a request it records."""
    with LoopbackReceiver(default=Reply(status=500, json={"message": "unscripted"})) as api:
        settings.TWILIO_API_BASE_URL = api.base
        settings.OUTBOUND_PLACE_THREADS = 1
        yield api


@pytest.fixture
def ava(owner: Any, make_agent: Any) -> Any:
    agent = make_agent(
        owner.organization, name="Ava", status=AgentStatus.ACTIVE, server_url="https://hooks.example.com/agent"
    )
    agent.number = phone_number_claim(organization=owner.organization, number="+14155550123")
    return agent


def post_json(persona: Any, path: str, body: Any, method: str = "post") -> Any:
    """The body as a client would send it: JSON text, non-ASCII as \\u escapes (a lone surrogate too)."""
    return getattr(persona.client, method)(path, json.dumps(body), content_type="application/json")


def refused(response: Any, field: str, what: str) -> None:
    """A 400 in the API's error shape naming `field` (for a key: the object that holds it)."""
    assert response.status_code == 400, response.content
    body = response.json()
    [reason] = body["issues"][field]
    assert list(body["issues"]) == [field] and f"ust not contain {what}" in reason
    assert body["error"] == f"Invalid {field}: {reason}"


def lists_answer(persona: Any) -> None:
    for path in LISTS:
        assert persona.client.get(path).status_code == 200, path


def origin(ava: Any) -> dict[str, str]:
    """The agent and the number a call or a batch is placed with."""
    return {"agentId": str(ava.pk), "phoneNumberId": str(ava.number.pk)}


# Each kind of body: (the request, given the owner and its agent) -> the field it names.
BODIES: dict[str, Callable[[Any, Any, str], tuple[Any, str]]] = {
    "call variables": lambda owner, ava, bad: (
        post_json(owner, "/public/v1/calls", {**origin(ava), "to": "+14155550142", "variables": {"name": f"Ada{bad}"}}),
        "variables.name",
    ),
    "call metadata key": lambda owner, ava, bad: (
        post_json(
            owner, "/public/v1/calls", {**origin(ava), "to": "+14155550142", "metadata": {"crm": {f"id{bad}": 7}}}
        ),
        "metadata.crm",
    ),
    "agent create": lambda owner, ava, bad: (
        post_json(
            owner,
            "/public/v1/agents",
            {
                "name": "Bo",
                "analysisPlan": {
                    "structuredData": {"enabled": True, "schema": {"type": "object", "description": f"x{bad}"}}
                },
            },
        ),
        "analysisPlan.structuredData.schema.description",
    ),
    "agent update": lambda owner, ava, bad: (
        post_json(
            owner,
            f"/public/v1/agents/{ava.pk}",
            {"expectedUpdatedAt": ava.updated_at.isoformat(), "redactPii": {"enabled": True, f"x{bad}": 1}},
            method="patch",
        ),
        "redactPii",
    ),
    "test turns": lambda owner, ava, bad: (
        post_json(
            owner,
            f"/public/v1/agents/{ava.pk}/tests",
            {"name": "Greets", "turns": [{"user": "Hello"}, {"user": f"Bye{bad}"}], "expect": {}},
        ),
        "turns.1.user",
    ),
    "realtime session metadata": lambda owner, ava, bad: (
        post_json(owner, f"/public/v1/agents/{ava.pk}/realtime-sessions", {"metadata": {"crm": [1, f"a{bad}"]}}),
        "metadata.crm.1",
    ),
    "batch variables": lambda owner, ava, bad: (
        post_json(
            owner,
            "/public/v1/call-batches",
            {
                "name": "Reminders",
                **origin(ava),
                "recipients": [{"to": "+14155551000"}, {"to": "+14155551001", "variables": {"day": f"Mon{bad}"}}],
            },
        ),
        "recipients.1.variables.day",
    ),
    "batch window in a CSV upload": lambda owner, ava, bad: (
        owner.client.post(
            "/public/v1/call-batches",
            {
                "name": "From CSV",
                "agentId": str(ava.pk),
                "phoneNumberId": str(ava.number.pk),
                "window": json.dumps({"start": "09:00", "end": "18:00", "timeZone": f"UTC{bad}"}),
                "file": SimpleUploadedFile("list.csv", b"to,day\n+14155551000,Mon\n", content_type="text/csv"),
            },
            format="multipart",
        ),
        "window.timeZone",
    ),
    "webhook": lambda owner, ava, bad: (
        post_json(
            owner,
            "/public/v1/webhooks",
            {"url": "https://hooks.example.com/events", "events": ["call.ended"], "description": {f"a{bad}": 1}},
        ),
        "description",
    ),
    "tool": lambda owner, ava, bad: (
        post_json(
            owner,
            f"/public/v1/agents/{ava.pk}/tools",
            {
                "name": "lookup_order",
                "parameterSchema": {"type": "object", "properties": {"id": {"type": "string", "description": bad}}},
            },
        ),
        "parameterSchema.properties.id.description",
    ),
}


@pytest.mark.parametrize("kind", list(BODIES))
@pytest.mark.parametrize(("bad", "what"), [(SURROGATE, "a lone UTF-16 surrogate"), (NUL, "the NUL character")])
def test_a_body_with_text_that_cannot_be_stored_is_a_400_naming_the_field(
    owner: Any, ava: Any, twilio_api: LoopbackReceiver, kind: str, bad: str, what: str
) -> None:
    twilio_api.reply(call_created())
    response, field = BODIES[kind](owner, ava, bad)

    refused(response, field, what)
    assert not Call.objects.exists() and not CallBatch.objects.exists() and not AgentTest.objects.exists()
    outbound_dispatch()
    assert not twilio_api.requests  # nothing was placed at the carrier
    lists_answer(owner)


def test_a_csv_cell_with_nul_is_a_400_naming_its_row_and_column(owner: Any, ava: Any) -> None:
    response = owner.client.post(
        "/public/v1/call-batches",
        {
            "name": "From CSV",
            "agentId": str(ava.pk),
            "phoneNumberId": str(ava.number.pk),
            "file": SimpleUploadedFile("list.csv", b"to,day\n+14155551000,Mon\n+14155551001,Tue\x00\n"),
        },
        format="multipart",
    )

    refused(response, "recipients.1.variables.day", "the NUL character")  # rows counted from 0 after the header
    assert not CallBatch.objects.exists()
    lists_answer(owner)


def test_nul_in_the_query_string_is_a_400_naming_the_parameter(owner: Any) -> None:
    refused(owner.client.get("/public/v1/calls?limit=5&q=a%00b"), "q", "the NUL character")
    lists_answer(owner)


@pytest.fixture
def staff(client: Any, db: Any) -> Any:
    from django.contrib.auth.models import User

    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


@pytest.mark.parametrize("page", ["/admin/calls/call/", "/admin/agents/agent/", "/admin/telephony/callbatch/"])
def test_the_dashboards_search_with_nul_is_a_400(staff: Any, ava: Any, page: str) -> None:
    """PostgreSQL refuses NUL in any query: the search `?q=%00` was a 500 there."""
    response = staff.get(f"{page}?q=Ava%00")

    assert response.status_code == 400
    assert response.content.decode() == "Invalid q: Must not contain the NUL character (\\u0000)."
    assert staff.get(f"{page}?q=Ava").status_code == 200


def test_a_tool_schema_typed_in_the_dashboard_with_a_lone_surrogate_is_refused_on_the_form(
    staff: Any, ava: Any
) -> None:
    from agents.models import AgentTool

    schema = '{"type": "object", "properties": {"id": {"type": "string", "description": "\\ud800"}}}'
    response = staff.post(
        "/admin/agents/agenttool/add/",
        {
            "agent": str(ava.pk),
            "name": "order_status",
            "description": "Look up an order.",
            "parameter_schema": schema,
            "response_schema": "",
            "timeout_ms": "5000",
            "on_error": "return_error",
            "enabled": "on",
            "new_tool_headers": "",
        },
    )

    assert response.status_code == 200  # the form again, with its error
    assert "properties.id.description: Must not contain a lone UTF-16 surrogate" in response.content.decode()
    assert not AgentTool.objects.exists()


def test_a_session_whose_store_fails_holds_no_live_call_slot(owner: Any, ava: Any, monkeypatch: Any) -> None:
    """Side effects only with the stored request: a realtime session whose metadata could not be stored
    (the database failed) leaves the organization's one live-call slot free for the next session."""
    from django.db import OperationalError

    from realtime.models import SessionVariables

    owner.organization.plan.max_concurrent_calls = 1
    owner.organization.plan.save()
    path = f"/public/v1/agents/{ava.pk}/realtime-sessions"

    def broken(**fields: Any) -> Any:
        raise OperationalError("could not extend file: No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(SessionVariables.objects, "create", broken)
        assert post_json(owner, path, {"metadata": {"crm": 7}}).status_code == 503

    assert post_json(owner, path, {"metadata": {"crm": 7}}).status_code == 200


def test_an_integer_beyond_64_bits_is_a_400_naming_it_and_one_stored_before_still_reads(owner: Any, ava: Any) -> None:
    """JSON allows integers of any size; the API writes 64-bit ones. A tool whose schema held 2**70 was
    stored, and every later read of the agent's tools was a 500: it is refused at the edge, naming the
    field, and a row stored before (written here without the API) is read back as written."""
    from agents.models import AgentTool

    schema = {"type": "object", "properties": {"count": {"type": "integer", "maximum": 2**70}}}
    tools = f"/public/v1/agents/{ava.pk}/tools"
    response = post_json(owner, tools, {"name": "count_things", "parameterSchema": schema})

    assert response.status_code == 400, response.content
    body = response.json()
    assert list(body["issues"]) == ["parameterSchema.properties.count.maximum"]
    assert body["issues"]["parameterSchema.properties.count.maximum"] == [
        "Integers must lie between -9223372036854775808 and 18446744073709551615."
    ]
    assert not AgentTool.objects.exists()
    for value in (-(2**63), 2**64 - 1):  # the edges are welcome
        edge = {"type": "object", "properties": {"count": {"type": "integer", "maximum": value}}}
        ok = post_json(owner, tools, {"name": f"edge_{value > 0:d}", "parameterSchema": edge})
        assert ok.status_code == 201, ok.content

    AgentTool.objects.filter(name="edge_1").update(parameter_schema=schema)  # stored before the rule
    listed = owner.client.get(tools)
    assert listed.status_code == 200
    stored = next(tool for tool in listed.json() if tool["name"] == "edge_1")
    assert stored["parameterSchema"]["properties"]["count"]["maximum"] == 2**70
