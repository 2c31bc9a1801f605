"""Typed sessions through the public API (docs/guides/typed-sessions.md): `modality` and `events` on
POST /public/v1/agents/{id}/realtime-sessions, kept by the server with the token (like the per-call
variables) and given to the socket that spends it; bad values are a 400 naming the problem, with nothing
kept and no call slot taken. A call's `modality` is in the call list and detail."""

from __future__ import annotations

from typing import Any

import pytest

from accounts.models import CallReservation
from calls import services as calls
from realtime import tokens
from realtime.models import SessionVariables
from realtime.services import realtime_session_open

pytestmark = pytest.mark.django_db


def url(agent_id: Any) -> str:
    return f"/public/v1/agents/{agent_id}/realtime-sessions"


def test_modality_and_events_are_kept_with_the_token_and_given_to_the_socket(owner, active_agent, realtime_settings):
    response = owner.client.post(url(active_agent.pk), {"modality": "text", "events": ["tool"]}, format="json")
    assert response.status_code == 200, response.content
    token = response.json()["token"]
    claims = tokens.verify_token(token, agent_id=str(active_agent.pk))
    kept = SessionVariables.objects.get(token_id=claims.token_id)
    assert (kept.modality, kept.events) == ("text", ["tool"])
    opened = realtime_session_open(token=token, agent_id=str(active_agent.pk))
    assert (opened.modality, opened.events, opened.variables) == ("text", ("tool",), {})
    assert not SessionVariables.objects.exists()


@pytest.mark.parametrize("body", [None, {}, {"modality": "audio"}, {"modality": None, "events": []}])
def test_audio_without_events_is_the_default(owner, active_agent, realtime_settings, body):
    response = owner.client.post(url(active_agent.pk), body, format="json")
    assert response.status_code == 200, response.content
    assert not SessionVariables.objects.exists()
    opened = realtime_session_open(token=response.json()["token"], agent_id=str(active_agent.pk))
    assert (opened.modality, opened.events) == ("audio", ())


def test_an_audio_session_may_ask_for_tool_events(owner, active_agent, realtime_settings):
    response = owner.client.post(url(active_agent.pk), {"events": ["tool", "tool"]}, format="json")
    assert response.status_code == 200, response.content
    opened = realtime_session_open(token=response.json()["token"], agent_id=str(active_agent.pk))
    assert (opened.modality, opened.events) == ("audio", ("tool",))


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"modality": "video"}, "modality", "must be one of audio, text"),
        ({"modality": 1}, "modality", "must be one of audio, text"),
        ({"modality": "TEXT"}, "modality", "must be one of audio, text"),
        ({"events": ["audio"]}, "events", "unknown event kind 'audio' (known: tool)"),
        ({"events": "tool"}, "events", "must be a list of strings"),
        ({"events": [1]}, "events", "must be a list of strings"),
        ({"events": {"tool": True}}, "events", "must be a list of strings"),
    ],
)
def test_bad_modality_or_events_are_a_400_naming_the_problem(
    owner, active_agent, realtime_settings, body, field, words
):
    response = owner.client.post(url(active_agent.pk), body, format="json")
    assert response.status_code == 400, response.content
    error = response.json()
    assert words in " ".join(error["issues"][field]), error
    assert field in error["error"]
    assert not SessionVariables.objects.exists() and not CallReservation.objects.exists()


def test_the_call_list_and_detail_carry_the_modality(owner, make_agent):
    agent = make_agent(owner.organization, status="active")
    spoken = calls.call_start(agent=agent, channel="web")
    typed = calls.call_start(agent=agent, channel="web", modality="text")
    listed = owner.client.get("/public/v1/calls").json()
    assert {item["id"]: item["modality"] for item in listed} == {str(spoken.pk): "audio", str(typed.pk): "text"}
    assert owner.client.get(f"/public/v1/calls/{typed.pk}").json()["modality"] == "text"
    with pytest.raises(ValueError, match="modality must be one of audio, text"):
        calls.call_start(agent=agent, channel="web", modality="video")
