"""GET /public/v1/calls and /public/v1/calls/{id}."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from calls import services
from calls.models import Call


def _calls(agent, count: int) -> list[Call]:
    now = timezone.now()
    calls = []
    for index in range(count):
        call = services.call_start(agent=agent, channel="web")
        Call.objects.filter(pk=call.pk).update(started_at=now - timedelta(minutes=count - index))
        calls.append(call)
    return calls  # oldest first


def test_calls_are_listed_newest_first_with_the_summary_fields(owner, agent):
    calls = _calls(agent, 3)
    services.call_finish(call=calls[0], status="completed")

    response = owner.client.get("/public/v1/calls")

    assert response.status_code == 200
    body = response.json()
    assert [c["id"] for c in body] == [str(c.id) for c in reversed(calls)]
    assert set(body[0]) >= {
        "id",
        "agentName",
        "fromNumber",
        "toNumber",
        "status",
        "durationSeconds",
        "startedAt",
        "toolInvocations",
        "billableMinutes",
        "includedMinutes",
        "overageMinutes",
        "usageClassification",
    }
    assert body[-1]["status"] == "completed" and body[0]["status"] == "active"
    assert "messages" not in body[0]


def test_limit_defaults_to_25_and_accepts_1_to_100(owner, agent):
    _calls(agent, 101)
    assert len(owner.client.get("/public/v1/calls").json()) == 25
    assert len(owner.client.get("/public/v1/calls?limit=1").json()) == 1
    assert len(owner.client.get("/public/v1/calls?limit=100").json()) == 100


def test_calls_can_be_filtered_by_agent(owner, agent, make_agent):
    other_agent = make_agent(owner.organization, name="Sales")
    mine = _calls(agent, 2)
    _calls(other_agent, 2)

    body = owner.client.get(f"/public/v1/calls?agentId={agent.id}&limit=10").json()

    assert {c["id"] for c in body} == {str(c.id) for c in mine}


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=ten", "limit"),
        ("limit=", "limit"),
        ("limit=2.5", "limit"),
        ("limit=-1", "limit"),
        ("agentId=not-a-uuid", "agentId"),
        ("agentId=123", "agentId"),
    ],
)
def test_invalid_query_parameters_are_a_400_listing_the_issue(owner, agent, query, field):
    response = owner.client.get(f"/public/v1/calls?{query}")

    assert response.status_code == 400
    body = response.json()
    assert field in body["issues"]
    assert body["error"]


def test_all_invalid_parameters_are_listed_at_once(owner):
    body = owner.client.get("/public/v1/calls?limit=0&agentId=x").json()
    assert set(body["issues"]) == {"limit", "agentId"}


def test_unknown_query_parameters_are_ignored(owner, agent):
    _calls(agent, 2)
    response = owner.client.get("/public/v1/calls?foo=bar&limit=1")
    assert response.status_code == 200
    assert len(response.json()) == 1


def test_more_query_parameters_than_django_reads_is_a_400(owner):
    query = "&".join(f"p{n}=1" for n in range(1200))
    response = owner.client.get(f"/public/v1/calls?{query}")
    assert response.status_code == 400
    assert set(response.json()) == {"error"}


def test_another_organizations_calls_are_invisible(owner, outsider, agent):
    (call,) = _calls(agent, 1)

    assert outsider.client.get("/public/v1/calls").json() == []
    assert outsider.client.get(f"/public/v1/calls?agentId={agent.id}").json() == []
    response = outsider.client.get(f"/public/v1/calls/{call.id}")
    assert response.status_code == 404
    assert response.json() == {"error": "Call not found"}


def test_a_teammate_key_sees_the_organizations_calls(teammate, agent):
    (call,) = _calls(agent, 1)
    assert teammate.client.get(f"/public/v1/calls/{call.id}").status_code == 200


def test_call_detail_ids(owner):
    assert owner.client.get(f"/public/v1/calls/{uuid.uuid4()}").status_code == 404
    response = owner.client.get("/public/v1/calls/not-a-uuid")
    assert response.status_code == 400
    assert "call" in response.json()["issues"]


def test_calls_need_an_api_key(anonymous):
    assert anonymous.get("/public/v1/calls").status_code == 401
