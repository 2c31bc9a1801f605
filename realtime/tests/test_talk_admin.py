"""The agent page's "Talk to this agent" panel: staff open a voice session with their login (POST with
CSRF), never with an API key; the service's refusals come back as its messages."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from realtime import tokens

pytestmark = pytest.mark.django_db


def session_url(agent: Any) -> str:
    return f"/admin/agents/agent/{agent.pk}/talk/session"


@pytest.fixture
def ava(owner: Any, make_agent: Any, settings: Any) -> Any:
    settings.REALTIME_WS_URL = "ws://voice.example.test:8443"
    settings.REALTIME_TOKEN_SECRET = "test-realtime-secret-0123456789abcdef"
    return make_agent(owner.organization, name="Ava", status="active")


def test_the_agent_page_shows_the_panel_with_its_endpoint_and_the_call_link(admin_client: Client, ava: Any) -> None:
    page = admin_client.get(f"/admin/agents/agent/{ava.pk}/change/").content.decode()
    assert "Talk to this agent" in page
    assert session_url(ava) in page
    assert "/admin/calls/call/00000000-0000-0000-0000-000000000000/change/" in page
    assert "realtime/talk-panel.js" in page
    assert "va_" not in page  # no API key anywhere in the page


def test_staff_get_a_websocket_url_for_the_agent(admin_client: Client, ava: Any) -> None:
    response = admin_client.post(session_url(ava))
    assert response.status_code == 200
    body = response.json()
    assert list(body) == ["websocketUrl"]
    url = urlsplit(body["websocketUrl"])
    assert url.path == f"/ws/agents/{ava.pk}/realtime"
    claims = tokens.verify_token(parse_qs(url.query)["token"][0], agent_id=str(ava.pk))
    assert str(claims.organization_id) == str(ava.organization_id)


def test_the_session_endpoint_checks_csrf(admin_user: User, ava: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    assert client.post(session_url(ava)).status_code == 403
    page = client.get(f"/admin/agents/agent/{ava.pk}/change/")
    token = page.cookies["csrftoken"].value
    assert client.post(session_url(ava), HTTP_X_CSRFTOKEN=token).status_code == 200


def test_only_staff_who_may_view_agents_get_a_session(client: Client, ava: Any) -> None:
    assert client.post(session_url(ava)).status_code == 302  # to the login page
    clerk = User.objects.create_user("clerk", password="pw-clerk-1", is_staff=True)
    client.force_login(clerk)
    assert client.post(session_url(ava)).status_code == 403
    clerk.user_permissions.add(Permission.objects.get(codename="view_agent"))
    assert client.post(session_url(ava)).status_code == 200
    assert client.get(session_url(ava)).status_code == 405


def test_refusals_carry_the_services_message(admin_client: Client, ava: Any, settings: Any, caplog: Any) -> None:
    ava.status = "inactive"
    ava.save(update_fields=["status"])
    response = admin_client.post(session_url(ava))
    assert response.status_code == 409
    assert response.json() == {"error": "Agent is inactive; only an active agent can start realtime sessions"}
    settings.REALTIME_WS_URL = ""
    response = admin_client.post(session_url(ava))
    assert response.status_code == 500
    assert "REALTIME_WS_URL is not set" in response.json()["error"]
    # A configuration the operator must fix: one warning line naming it, no error with a traceback.
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    assert [r.getMessage() for r in caplog.records if r.name == "realtime.demo"] == [
        f"POST {session_url(ava)} answered 500 (server side): {response.json()['error']}"
    ]
    assert admin_client.post("/admin/agents/agent/8b7c2f0e-0000-4000-8000-000000000000/talk/session").status_code == 404


@pytest.fixture
def service_calls(monkeypatch: Any) -> list[dict[str, Any]]:
    """What the panel's endpoint asks realtime_session_create for, beyond the organization and agent: the
    service stands in with the modality and events of the public API's session request (part T's)."""
    from realtime import demo, services, talk_admin

    seen: list[dict[str, Any]] = []
    real = services.realtime_session_create

    def service(*, organization: Any, agent_id: str, modality: str = "audio", events: Any = None) -> Any:
        seen.append({"modality": modality, "events": events})
        return real(organization=organization, agent_id=agent_id)

    monkeypatch.setattr(demo, "realtime_session_create", service)
    monkeypatch.setattr(talk_admin, "realtime_session_create", service)
    return seen


def test_the_panel_asks_for_the_modality_and_the_tool_events(
    admin_client: Client, ava: Any, service_calls: list[dict[str, Any]]
) -> None:
    typed = admin_client.post(session_url(ava), {"modality": "text", "events": ["tool"]}, "application/json")
    assert typed.status_code == 200 and list(typed.json()) == ["websocketUrl"]
    spoken = admin_client.post(session_url(ava), {"modality": "audio", "events": ["tool"]}, "application/json")
    assert spoken.status_code == 200
    assert admin_client.post(session_url(ava)).status_code == 200  # no JSON body: the defaults
    assert service_calls == [
        {"modality": "text", "events": ["tool"]},
        {"modality": "audio", "events": ["tool"]},
        {"modality": "audio", "events": None},
    ]


def test_a_session_request_that_is_not_a_json_object_is_refused(admin_client: Client, ava: Any) -> None:
    for body in ("[1, 2]", "{not json", '"text"'):
        response = admin_client.post(session_url(ava), body, "application/json")
        assert (response.status_code, response.json()) == (400, {"error": "The session request must be a JSON object"})


def test_the_panel_has_a_text_box_and_a_typed_only_switch(admin_client: Client, ava: Any) -> None:
    page = admin_client.get(f"/admin/agents/agent/{ava.pk}/change/").content.decode()
    assert 'data-role="typed-only"' in page and 'data-role="text"' in page and 'data-role="send"' in page
    # Inside the agent's change form: no form of its own, and no named field that the form would submit.
    panel = page[page.index('id="talk-panel"') : page.index("</section>", page.index('id="talk-panel"'))]
    assert "<form" not in panel and "name=" not in panel.replace('name="csrfmiddlewaretoken"', "")
