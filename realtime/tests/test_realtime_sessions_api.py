"""POST /public/v1/agents/{id}/realtime-sessions."""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.utils import timezone

from realtime import tokens
from testing.fixtures import WS_BASE

pytestmark = pytest.mark.django_db


def url(agent_id: Any) -> str:
    return f"/public/v1/agents/{agent_id}/realtime-sessions"


def test_it_issues_a_token_with_the_socket_address_and_audio_protocol(owner, active_agent, realtime_settings):
    before = timezone.now()
    response = owner.client.post(url(active_agent.pk))
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"token", "expiresAt", "websocketUrl", "protocol"}
    assert body["protocol"] == {
        "inputAudio": {"encoding": "pcm16", "sampleRate": 16000},
        "outputAudio": {"encoding": "pcm16", "sampleRate": 24000},
    }
    parts = urlsplit(body["websocketUrl"])
    assert f"{parts.scheme}://{parts.netloc}" == WS_BASE
    assert parts.path == f"/ws/agents/{active_agent.pk}/realtime"
    assert parse_qs(parts.query)["token"] == [body["token"]]
    expires = datetime.fromisoformat(body["expiresAt"].replace("Z", "+00:00"))
    assert before + timedelta(seconds=58) <= expires <= timezone.now() + timedelta(seconds=61)
    claims = tokens.verify_token(body["token"], agent_id=str(active_agent.pk))
    assert claims.organization_id == owner.organization.pk


def test_the_token_does_not_carry_the_api_key(owner, active_agent, realtime_settings):
    body = owner.client.post(url(active_agent.pk)).json()
    assert owner.api_key not in body["token"] and owner.api_key not in body["websocketUrl"]


@pytest.mark.parametrize("status", ["draft", "inactive"])
def test_it_refuses_an_agent_that_is_not_active(owner, make_agent, realtime_settings, status):
    agent = make_agent(owner.organization, status=status)
    response = owner.client.post(url(agent.pk))
    assert response.status_code == 409
    assert "active" in response.json()["error"]


@pytest.mark.parametrize("missing", ["REALTIME_WS_URL", "REALTIME_TOKEN_SECRET"])
def test_it_answers_500_with_a_clear_error_when_not_configured(owner, active_agent, realtime_settings, missing):
    setattr(realtime_settings, missing, "")
    response = owner.client.post(url(active_agent.pk))
    assert response.status_code == 500
    assert missing in response.json()["error"]


def test_a_configuration_500_is_logged_as_one_warning_line_not_as_a_crash(
    owner, active_agent, realtime_settings, caplog
):
    realtime_settings.REALTIME_WS_URL = ""
    with caplog.at_level(logging.INFO):
        response = owner.client.post(url(active_agent.pk))
    assert response.status_code == 500
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and r.name == "kit.errors"]
    assert len(warnings) == 1
    assert "REALTIME_WS_URL" in warnings[0].getMessage() and "\n" not in warnings[0].getMessage()
    assert warnings[0].exc_info is None
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_ws_url_that_is_not_a_websocket_address_is_a_configuration_error(owner, active_agent, realtime_settings):
    realtime_settings.REALTIME_WS_URL = "http://example.test"
    response = owner.client.post(url(active_agent.pk))
    assert response.status_code == 500
    assert "REALTIME_WS_URL" in response.json()["error"]


def test_ids_and_organizations(owner, outsider, active_agent, anonymous, realtime_settings):
    assert owner.client.post(url("not-a-uuid")).status_code == 400
    assert owner.client.post(url(uuid.uuid4())).status_code == 404
    assert outsider.client.post(url(active_agent.pk)).status_code == 404
    assert anonymous.post(url(active_agent.pk)).status_code == 401


def test_other_methods_are_not_allowed(owner, active_agent, realtime_settings):
    assert owner.client.get(url(active_agent.pk)).status_code == 405


@pytest.mark.parametrize("body", ["null", "[]", '[{"modality": "text"}]', '"text"', "42", "true"])
def test_a_body_that_is_not_a_json_object_is_a_400(owner, active_agent, realtime_settings, body):
    response = owner.client.post(url(active_agent.pk), body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert response.json() == {"error": "The request body must be a JSON object."}


@pytest.mark.parametrize("body", [None, "", "{}"])
def test_an_absent_or_empty_object_body_issues_a_token(owner, active_agent, realtime_settings, body):
    if body is None:
        response = owner.client.post(url(active_agent.pk))
    else:
        response = owner.client.post(url(active_agent.pk), body, content_type="application/json")
    assert response.status_code == 200, response.content
    assert set(response.json()) == {"token", "expiresAt", "websocketUrl", "protocol"}
