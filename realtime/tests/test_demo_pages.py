"""The browser demo at /demo/: the demo organization's agents, sessions opened by the page's own server
(no API key in the page), and nothing at all while DEMO_PAGES is off."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(owner: Any, settings: Any, realtime_settings: Any) -> Any:
    settings.DEMO_PAGES = True
    settings.DEMO_ORGANIZATION_ID = str(owner.organization.pk)
    return owner


def test_the_page_lists_the_demo_organizations_agents_only(demo, outsider, make_agent, client: Client) -> None:
    ava = make_agent(demo.organization, name="Ava", status="active")
    make_agent(demo.organization, name="Draft Dan", status="draft")
    make_agent(outsider.organization, name="Not Mine", status="active")
    page = client.get("/demo/").content.decode()
    assert "Ava" in page and "Draft Dan" in page and "Not Mine" not in page
    assert f"/demo/agents/{ava.pk}/session" in page
    assert "voice-client/v1/voice-client.js" in page
    assert demo.api_key not in page


def test_the_session_endpoint_answers_only_the_websocket_url(demo, make_agent, client: Client) -> None:
    ava = make_agent(demo.organization, name="Ava", status="active")
    response = client.post(f"/demo/agents/{ava.pk}/session")
    assert response.status_code == 200
    assert list(response.json()) == ["websocketUrl"]
    assert urlsplit(response.json()["websocketUrl"]).path == f"/ws/agents/{ava.pk}/realtime"


def test_it_refuses_drafts_and_other_organizations_agents(demo, outsider, make_agent, client: Client) -> None:
    draft = make_agent(demo.organization, name="Draft Dan", status="draft")
    response = client.post(f"/demo/agents/{draft.pk}/session")
    assert (response.status_code, response.json()["error"]) == (
        409,
        "Agent is draft; only an active agent can start realtime sessions",
    )
    foreign = make_agent(outsider.organization, name="Not Mine", status="active")
    assert client.post(f"/demo/agents/{foreign.pk}/session").status_code == 404


def test_the_session_endpoint_checks_csrf(demo, make_agent) -> None:
    ava = make_agent(demo.organization, name="Ava", status="active")
    client = Client(enforce_csrf_checks=True)
    assert client.post(f"/demo/agents/{ava.pk}/session").status_code == 403
    token = client.get("/demo/").cookies["csrftoken"].value
    assert client.post(f"/demo/agents/{ava.pk}/session", HTTP_X_CSRFTOKEN=token).status_code == 200


def test_without_demo_pages_there_is_no_demo(demo, make_agent, client: Client, settings: Any) -> None:
    ava = make_agent(demo.organization, name="Ava", status="active")
    settings.DEMO_PAGES = False
    assert client.get("/demo/").status_code == 404
    assert client.post(f"/demo/agents/{ava.pk}/session").status_code == 404


def test_the_demo_organization_defaults_to_the_one_bootstrapdemo_recorded(
    owner, settings: Any, tmp_path, client: Client, make_agent
) -> None:
    settings.DEMO_PAGES = True
    settings.DEMO_ORGANIZATION_ID = ""
    settings.VAR_DIR = tmp_path
    assert "No demo organization" in client.get("/demo/").content.decode()
    (tmp_path / "demo.json").write_text(json.dumps({"organizationId": str(owner.organization.pk), "apiKey": "x"}))
    make_agent(owner.organization, name="Ava", status="active")
    assert "Ava" in client.get("/demo/").content.decode()


def test_the_page_asks_for_the_modality_and_the_tool_events(demo, make_agent, client: Client, monkeypatch: Any) -> None:
    """The demo's endpoint hands the body's modality and events to realtime_session_create (standing in
    here with the parameters of part T's service); a body that is not a JSON object is a 400."""
    from realtime import demo as demo_module
    from realtime import services

    ava = make_agent(demo.organization, name="Ava", status="active")
    seen: list[dict[str, Any]] = []

    def service(*, organization: Any, agent_id: str, modality: str = "audio", events: Any = None) -> Any:
        seen.append({"modality": modality, "events": events})
        return services.realtime_session_create(organization=organization, agent_id=agent_id)

    monkeypatch.setattr(demo_module, "realtime_session_create", service)
    url = f"/demo/agents/{ava.pk}/session"
    response = client.post(url, {"modality": "text", "events": ["tool"]}, "application/json")
    assert response.status_code == 200 and list(response.json()) == ["websocketUrl"]
    assert seen == [{"modality": "text", "events": ["tool"]}]
    response = client.post(url, "[]", "application/json")
    assert (response.status_code, response.json()) == (400, {"error": "The session request must be a JSON object"})
    assert 'data-role="text"' in client.get("/demo/").content.decode()
