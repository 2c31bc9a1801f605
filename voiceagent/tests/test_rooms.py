"""The rooms check (voiceagent/rooms.py, run by `make lint`): every /public/v1 view in the package of the
resource its URL names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.management import call_command
from django.http import HttpRequest, HttpResponse
from django.urls import include, path

from voiceagent.rooms import check_rooms, resource_of, rooms_problems


def _view_in(module: str) -> Callable[..., HttpResponse]:
    def view(request: HttpRequest, **kwargs: Any) -> HttpResponse:
        return HttpResponse()

    view.__module__ = module
    return view


def _public(*routes: tuple[str, str]) -> list[Any]:
    return [path("public/v1/", include([path(route, _view_in(module)) for route, module in routes]))]


def test_the_projects_routes_all_live_in_their_rooms() -> None:
    assert rooms_problems() == []
    assert check_rooms() == []
    call_command("check", tags=["rooms"], fail_level="WARNING")


def test_the_agent_resource_served_from_telephony_is_an_error() -> None:
    problems = rooms_problems(_public(("agents", "telephony.agent_apis"), ("agents/<str:agent_id>", "api.agents.apis")))
    assert len(problems) == 1
    assert "/public/v1/agents is the agents resource's, served from telephony.agent_apis" in problems[0]
    assert "api.agents" in problems[0]


def test_a_nested_collection_is_its_own_resource_and_an_action_its_parents() -> None:
    assert resource_of("agents/<str:agent_id>/knowledge/<str:document_id>") == "agents/knowledge"
    assert resource_of("calls/<str:call_id>/hang-up") == "calls"
    assert resource_of("call-batches/<str:batch_id>/calls") == "call-batches"
    assert resource_of("calls/<str:call_id>/tests") == "calls/tests"
    ok = _public(
        ("agents/<str:agent_id>/knowledge", "knowledge.apis"),
        ("calls/<str:call_id>/hang-up", "calls.apis"),
        ("call-batches/<str:batch_id>/calls", "telephony.campaigns.apis"),
        ("webhooks", "calls.webhooks.apis"),
    )
    assert rooms_problems(ok) == []
    wrong = _public(("agents/<str:agent_id>/knowledge", "agents.apis"), ("calls/<str:call_id>/hang-up", "telephony.x"))
    assert [problem.split(" is the ")[0] for problem in rooms_problems(wrong)] == [
        "/public/v1/agents/<str:agent_id>/knowledge",
        "/public/v1/calls/<str:call_id>/hang-up",
    ]


def test_a_package_that_only_starts_like_the_room_is_not_it() -> None:
    assert rooms_problems(_public(("calls", "calls_extra.apis")))
    assert rooms_problems(_public(("calls", "calls"))) == []


def test_a_route_served_twice_and_a_resource_without_a_room_are_errors() -> None:
    twice = rooms_problems(_public(("calls", "calls.apis"), ("calls", "telephony.outbound.apis")))
    assert len(twice) == 1 and "served twice" in twice[0] and "never reached" in twice[0]
    same_shape = rooms_problems(_public(("calls/<str:call_id>", "calls.apis"), ("calls/<str:id>", "calls.other")))
    assert len(same_shape) == 1 and "served twice" in same_shape[0]
    unknown = rooms_problems(_public(("widgets", "calls.apis")))
    assert len(unknown) == 1 and "'widgets'" in unknown[0] and "ROOMS" in unknown[0]


def test_routes_outside_the_public_api_are_not_rooms() -> None:
    assert rooms_problems([path("telephony/twilio/voice", _view_in("telephony.webhooks"))]) == []
