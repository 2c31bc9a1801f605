"""Per-call variables through the public API (docs/guides/variables.md): `variables` and `metadata` on
POST /public/v1/agents/{id}/realtime-sessions (kept by the server under the token's id, never in the token
or its URL; every bad value a 400 naming what is wrong, with nothing kept and no call slot taken), and
`direction`, `variables` and `metadata` in the call list, the call detail and the call events."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User

from accounts.models import CallReservation
from calls import services as calls
from calls.models import CallEvent
from realtime import tokens
from realtime.models import SessionVariables
from realtime.services import realtime_session_open

pytestmark = pytest.mark.django_db

VARIABLES = {"firstName": "Ada", "orderId": "A-17"}
METADATA = {"crmId": 42, "tags": ["vip"], "note": None}


def url(agent_id: Any) -> str:
    return f"/public/v1/agents/{agent_id}/realtime-sessions"


def test_variables_and_metadata_are_kept_under_the_token_id_not_in_the_token(owner, active_agent, realtime_settings):
    response = owner.client.post(url(active_agent.pk), {"variables": VARIABLES, "metadata": METADATA}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    for value in ("Ada", "A-17", "crmId", "vip"):
        assert value not in body["token"] and value not in body["websocketUrl"]
    claims = tokens.verify_token(body["token"], agent_id=str(active_agent.pk))
    kept = SessionVariables.objects.get(token_id=claims.token_id)
    assert (kept.variables, kept.metadata) == (VARIABLES, METADATA)

    # The socket that spends the token takes them (once: the token is single-use, the row is gone).
    opened = realtime_session_open(token=body["token"], agent_id=str(active_agent.pk))
    assert (opened.agent.pk, opened.variables, opened.metadata) == (active_agent.pk, VARIABLES, METADATA)
    assert not SessionVariables.objects.exists()


@pytest.mark.parametrize("body", [None, {}, {"variables": {}}, {"variables": None, "metadata": None}])
def test_without_variables_nothing_is_kept(owner, active_agent, realtime_settings, body):
    response = owner.client.post(url(active_agent.pk), body, format="json")
    assert response.status_code == 200, response.content
    assert not SessionVariables.objects.exists()
    opened = realtime_session_open(token=response.json()["token"], agent_id=str(active_agent.pk))
    assert (opened.variables, opened.metadata) == ({}, None)


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"variables": {"firstName": 5}}, "variables", "The value of 'firstName' must be a string."),
        ({"variables": {"firstName": None}}, "variables", "must be a string"),
        ({"variables": {f"v{n}": "x" for n in range(51)}}, "variables", "At most 50 variables are allowed, not 51."),
        ({"variables": {"note": "x" * 1001}}, "variables", "longer than 1000 characters"),
        ({"variables": ["firstName"]}, "variables", "Must be an object of string values."),
        ({"variables": "firstName=Ada"}, "variables", "Must be an object of string values."),
        ({"variables": {"first name": "Ada"}}, "variables", "is not a valid variable name"),
        ({"metadata": {"blob": "x" * (16 * 1024)}}, "metadata", "Must be at most 16384 bytes as JSON"),
    ],
)
def test_bad_variables_or_metadata_are_a_400_naming_the_problem(
    owner, active_agent, realtime_settings, body, field, words
):
    response = owner.client.post(url(active_agent.pk), body, format="json")
    assert response.status_code == 400, response.content
    error = response.json()
    assert words in " ".join(error["issues"][field]), error
    assert field in error["error"]
    assert not SessionVariables.objects.exists() and not CallReservation.objects.exists()


def test_the_limits_themselves_are_accepted(owner, active_agent, realtime_settings):
    variables = {f"v{n}": "x" * 1000 for n in range(50)}
    metadata = {"blob": "x" * (16 * 1024 - 20)}  # {"blob":"..."} is 16,384 bytes at most
    response = owner.client.post(url(active_agent.pk), {"variables": variables, "metadata": metadata}, format="json")
    assert response.status_code == 200, response.content
    assert SessionVariables.objects.get().variables == variables


def test_a_body_that_is_not_an_object_is_a_400(owner, active_agent, realtime_settings):
    response = owner.client.post(url(active_agent.pk), [VARIABLES], format="json")
    assert response.status_code == 400
    assert "JSON object" in response.json()["error"]


def test_the_call_list_detail_and_events_carry_direction_variables_and_metadata(owner, make_agent):
    # A webhook agent with a serverUrl receives the call's events: their body is the call detail.
    agent = make_agent(
        owner.organization, name="Ava", status="active", agent_type="webhook", server_url="https://hooks.example.com/x"
    )
    call = calls.call_start(agent=agent, channel="web", variables=VARIABLES, metadata=METADATA)
    listed = owner.client.get("/public/v1/calls").json()
    assert [(c["direction"], c["variables"], c["metadata"]) for c in listed] == [("inbound", VARIABLES, METADATA)]
    detail = owner.client.get(f"/public/v1/calls/{call.pk}").json()
    assert (detail["direction"], detail["variables"], detail["metadata"]) == ("inbound", VARIABLES, METADATA)
    started = json.loads(CallEvent.objects.get(call=call, event_type="call.started").body)["message"]["call"]
    assert (started["direction"], started["variables"], started["metadata"]) == ("inbound", VARIABLES, METADATA)

    plain = calls.call_start(agent=agent, channel="web")
    detail = owner.client.get(f"/public/v1/calls/{plain.pk}").json()
    assert (detail["direction"], detail["variables"], detail["metadata"]) == ("inbound", {}, None)


def test_the_dashboard_call_page_shows_them_to_staff_who_may_read_transcripts(client, owner, make_agent):
    agent = make_agent(owner.organization, name="Ava", status="active")
    call = calls.call_start(agent=agent, channel="web", variables=VARIABLES, metadata=METADATA)
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    page = client.get(f"/admin/calls/call/{call.pk}/change/").content.decode()
    assert "Per-call variables" in page and "A-17" in page and "crmId" in page

    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_call"))  # not the transcripts
    client.force_login(viewer)
    response = client.get(f"/admin/calls/call/{call.pk}/change/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "A-17" not in page and "crmId" not in page
