"""Widget keys (`/public/v1/agents/{id}/widget-keys`) and widget sessions (`POST /public/v1/widget/sessions`),
through the URLs: the keys' rules and organization scope, the session's Origin check, unknown keys, the rate
limits per key and per client address (429 with Retry-After), CORS, and the organization's live-call cap and
budgets, which a widget session meets like any realtime session (docs/widget.md)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Plan
from calls.models import Budget
from realtime import tokens
from realtime.models import SessionVariables, WidgetKey
from testing.factories import CallFactory
from testing.fixtures import WS_BASE

pytestmark = pytest.mark.django_db

SHOP = "https://shop.example.com"
SESSIONS = "/public/v1/widget/sessions"


def keys_url(agent_id: Any, key_id: Any = None) -> str:
    return f"/public/v1/agents/{agent_id}/widget-keys" + (f"/{key_id}" if key_id else "")


def create(persona: Any, agent: Any, origins: Any) -> Any:
    return persona.client.post(keys_url(agent.pk), {"allowedOrigins": origins}, format="json")


def created(persona: Any, agent: Any, origins: Any = (SHOP,)) -> dict[str, Any]:
    response = create(persona, agent, list(origins))
    assert response.status_code == 201, response.json()
    return response.json()


def fresh_address() -> str:
    """A client address of this test alone: the rate-limit buckets outlive a test (in Redis, a run)."""
    return f"2001:db8::{uuid.uuid4().hex[:4]}:{uuid.uuid4().hex[:4]}"


def open_session(body: Any, *, origin: str | None = SHOP, address: str | None = None, **headers: Any) -> Any:
    if origin is not None:
        headers["HTTP_ORIGIN"] = origin
    return APIClient().post(SESSIONS, body, format="json", REMOTE_ADDR=address or fresh_address(), **headers)


@pytest.fixture
def unlimited(settings: Any) -> Any:
    """No widget rate limit unless a test sets one (the tests' sessions all come from the test client)."""
    settings.WIDGET_KEY_SESSIONS_PER_MINUTE = 0
    settings.WIDGET_ADDRESS_SESSIONS_PER_MINUTE = 0
    return settings


# --- keys -----------------------------------------------------------------------------------------------


def test_keys_are_created_listed_read_and_deleted(owner, active_agent):
    before = timezone.now()
    key = created(
        owner, active_agent, [" https://Shop.Example.com:443", "http://localhost:3000", "http://192.168.1.20:8080"]
    )
    assert set(key) == {"id", "key", "allowedOrigins", "createdAt"}
    assert key["key"].startswith("pk_") and len(key["key"]) == 35
    # Stored as a browser sends its Origin header: lower case, without the scheme's default port.
    assert key["allowedOrigins"] == ["https://shop.example.com", "http://localhost:3000", "http://192.168.1.20:8080"]
    assert timezone.datetime.fromisoformat(key["createdAt"].replace("Z", "+00:00")) >= before
    second = created(owner, active_agent, ["https://www.example.com"])
    assert second["key"] != key["key"]

    listed = owner.client.get(keys_url(active_agent.pk))
    assert listed.status_code == 200 and listed.json() == [key, second]
    assert owner.client.get(keys_url(active_agent.pk, key["id"])).json() == key

    deleted = owner.client.delete(keys_url(active_agent.pk, key["id"]))
    assert deleted.status_code == 200 and deleted.json() == {"id": key["id"]}
    assert owner.client.get(keys_url(active_agent.pk)).json() == [second]
    assert owner.client.get(keys_url(active_agent.pk, key["id"])).status_code == 404
    assert owner.client.delete(keys_url(active_agent.pk, key["id"])).status_code == 404


def test_the_keys_need_the_api_key(anonymous, active_agent):
    assert anonymous.get(keys_url(active_agent.pk)).status_code == 401
    assert anonymous.post(keys_url(active_agent.pk), {"allowedOrigins": [SHOP]}, format="json").status_code == 401


@pytest.mark.parametrize(
    ("origins", "field", "words"),
    [
        (None, "allowedOrigins", "Required"),
        ("https://shop.example.com", "allowedOrigins", "list"),
        ([], "allowedOrigins", "At least one"),
        ([f"https://{n}.example.com" for n in range(21)], "allowedOrigins", "At most 20"),
        ([SHOP, "https://shop.example.com/checkout"], "allowedOrigins.1", "no path"),
        ([SHOP, "https://shop.example.com/"], "allowedOrigins.1", "no path"),
        (["shop.example.com"], "allowedOrigins.0", "https://"),
        (["ftp://shop.example.com"], "allowedOrigins.0", "https://"),
        (["https://*.example.com"], "allowedOrigins.0", "Wildcards"),
        (["*"], "allowedOrigins.0", "Wildcards"),
        (["https://user:secret@shop.example.com"], "allowedOrigins.0", "user name"),
        (["https://shop.example.com:99999"], "allowedOrigins.0", "port"),
        (["https://shop.example.com?x=1"], "allowedOrigins.0", "no path, query"),
        (["https://shop example.com"], "allowedOrigins.0", "host"),
        ([SHOP, 42], "allowedOrigins.1", "string"),
        (["https://[::1]:8443"], "allowedOrigins.0", "host"),
        (["https://shop.example.com:0443"], "allowedOrigins.0", "port"),
        (["https://bücher.example"], "allowedOrigins.0", "punycode"),
        (["HTTPS://shop.example.com"], "allowedOrigins.0", "lower case"),
        ([""], "allowedOrigins.0", "empty"),
    ],
)
def test_bad_origins_are_a_400_naming_the_item(owner, active_agent, origins, field, words):
    body = {} if origins is None else {"allowedOrigins": origins}
    response = owner.client.post(keys_url(active_agent.pk), body, format="json")
    assert response.status_code == 400, response.json()
    issues = response.json()["issues"]
    assert list(issues) == [field], issues
    assert words in issues[field][0], issues
    assert field in response.json()["error"]
    assert not WidgetKey.objects.exists()


def test_an_origin_given_twice_is_kept_once(owner, active_agent):
    key = created(owner, active_agent, [SHOP, "https://SHOP.example.com:443", "https://xn--bcher-kva.example", SHOP])
    assert key["allowedOrigins"] == [SHOP, "https://xn--bcher-kva.example"]


def test_every_bad_origin_is_named(owner, active_agent):
    body = {"allowedOrigins": ["https://a.example.com/x", SHOP, "nope"]}
    response = owner.client.post(keys_url(active_agent.pk), body, format="json")
    assert response.status_code == 400
    assert set(response.json()["issues"]) == {"allowedOrigins.0", "allowedOrigins.2"}


def test_a_body_that_is_not_an_object_is_a_400(owner, active_agent):
    response = owner.client.post(keys_url(active_agent.pk), [SHOP], format="json")
    assert response.status_code == 400


def test_an_agent_has_at_most_10_keys(owner, active_agent, make_agent):
    for _ in range(10):
        created(owner, active_agent)
    refused = create(owner, active_agent, [SHOP])
    assert refused.status_code == 409 and refused.json()["code"] == "TOO_MANY_WIDGET_KEYS"
    assert WidgetKey.objects.filter(agent=active_agent).count() == 10
    created(owner, make_agent(owner.organization, name="Max"))  # per agent


def test_another_organizations_agent_and_keys_are_not_found(owner, outsider, active_agent, make_agent):
    key = created(owner, active_agent)
    theirs = make_agent(outsider.organization, name="Theirs", status="active")
    their_key = created(outsider, theirs)
    assert outsider.client.get(keys_url(active_agent.pk)).status_code == 404
    assert create(outsider, active_agent, [SHOP]).status_code == 404
    assert outsider.client.get(keys_url(active_agent.pk, key["id"])).status_code == 404
    assert outsider.client.delete(keys_url(active_agent.pk, key["id"])).status_code == 404
    # Another organization's key under one's own agent, or one's key under another agent: not found either.
    assert owner.client.get(keys_url(active_agent.pk, their_key["id"])).status_code == 404
    assert outsider.client.delete(keys_url(theirs.pk, key["id"])).status_code == 404
    sibling = make_agent(owner.organization, name="Sibling")
    assert owner.client.delete(keys_url(sibling.pk, key["id"])).status_code == 404
    assert WidgetKey.objects.count() == 2
    assert owner.client.get(keys_url(active_agent.pk, "not-a-uuid")).status_code == 400
    assert owner.client.get(keys_url(uuid.uuid4())).status_code == 404


def test_deleting_the_agent_deletes_its_keys(owner, make_agent):
    agent = make_agent(owner.organization, name="Short-lived")
    key = created(owner, agent)
    assert owner.client.delete(f"/public/v1/agents/{agent.pk}").status_code in (200, 204)
    assert not WidgetKey.objects.filter(pk=key["id"]).exists()


# --- sessions -------------------------------------------------------------------------------------------


def test_a_page_of_a_listed_origin_gets_a_session_for_the_keys_agent(owner, active_agent, realtime_settings, unlimited):
    key = created(owner, active_agent, ["http://localhost:3000", SHOP])
    response = open_session({"key": key["key"]})
    assert response.status_code == 200, response.json()
    body = response.json()
    assert {"token", "expiresAt", "websocketUrl", "protocol"} <= set(body)
    parts = urlsplit(body["websocketUrl"])
    assert f"{parts.scheme}://{parts.netloc}" == WS_BASE and parts.path == f"/ws/agents/{active_agent.pk}/realtime"
    assert parse_qs(parts.query)["token"] == [body["token"]]
    claims = tokens.verify_token(body["token"], agent_id=str(active_agent.pk))
    assert claims.organization_id == owner.organization.pk
    # The call will say which key and page opened it; a page cannot give variables of its own.
    kept = SessionVariables.objects.get(token_id=claims.token_id)
    assert kept.metadata == {"widget": {"keyId": key["id"], "origin": SHOP}} and kept.variables == {}
    # The API key is nowhere in it.
    assert owner.api_key not in response.content.decode()


def test_a_typed_session_can_be_asked_for(owner, active_agent, realtime_settings, unlimited):
    key = created(owner, active_agent)
    body = open_session({"key": key["key"], "modality": "text"}).json()
    claims = tokens.verify_token(body["token"], agent_id=str(active_agent.pk))
    assert SessionVariables.objects.get(token_id=claims.token_id).modality == "text"
    refused = open_session({"key": key["key"], "modality": "video"})
    assert refused.status_code == 400 and "modality" in refused.json()["issues"]


def test_a_session_over_webrtc_is_answered_with_its_offer_url(owner, active_agent, realtime_settings, unlimited):
    key = created(owner, active_agent)
    response = open_session({"key": key["key"], "transport": "webrtc"})
    assert response.status_code == 200, response.json()
    body = response.json()
    assert "websocketUrl" in body  # the fallback
    assert body["webrtc"]["offerUrl"].endswith(
        f"/realtime/webrtc/agents/{active_agent.pk}/session?token=" + (body["websocketUrl"].split("token=", 1)[1])
    )
    assert isinstance(body["webrtc"]["iceServers"], list)
    assert "webrtc" not in open_session({"key": key["key"], "transport": "websocket"}).json()
    refused = open_session({"key": key["key"], "transport": "carrier-pigeon"})
    assert refused.status_code == 400 and "transport" in refused.json()["issues"]


@pytest.mark.parametrize("field", ["variables", "metadata", "events"])
def test_a_page_may_not_give_variables_metadata_or_events(owner, active_agent, realtime_settings, unlimited, field):
    key = created(owner, active_agent)
    value = {"variables": {"name": "Eve"}, "metadata": {"a": 1}, "events": ["tool"]}[field]
    response = open_session({"key": key["key"], field: value})
    assert response.status_code == 400 and list(response.json()["issues"]) == [field]
    assert "backend" in response.json()["error"]


def test_an_unknown_or_deleted_key_is_a_401(owner, active_agent, realtime_settings, unlimited):
    for unknown in ("pk_" + "x" * 32, "va_not-a-widget-key", "pk_"):
        response = open_session({"key": unknown})
        assert response.status_code == 401 and response.json()["code"] == "INVALID_WIDGET_KEY"
    key = created(owner, active_agent)
    assert open_session({"key": key["key"]}).status_code == 200
    owner.client.delete(keys_url(active_agent.pk, key["id"]))
    gone = open_session({"key": key["key"]})
    assert gone.status_code == 401 and "deleted" in gone.json()["error"]


@pytest.mark.parametrize("body", [{}, {"key": 42}, {"key": None}, []])
def test_a_body_without_a_key_is_a_400(unlimited, body):
    response = open_session(body)
    assert response.status_code == 400, response.json()


def test_a_page_of_another_origin_or_none_is_refused_with_403(owner, active_agent, realtime_settings, unlimited):
    key = created(owner, active_agent, [SHOP, "http://localhost:3000"])
    for origin in (
        "https://evil.example.com",
        "http://shop.example.com",
        "https://shop.example.com:8443",
        "http://localhost:3001",
        "null",
    ):
        response = open_session({"key": key["key"]}, origin=origin)
        assert response.status_code == 403, origin
        body = response.json()
        assert body["code"] == "ORIGIN_NOT_ALLOWED"
        assert "may not be used from" in body["error"] and SHOP in body["error"]
    missing = open_session({"key": key["key"]}, origin=None)
    assert missing.status_code == 403 and missing.json()["code"] == "ORIGIN_NOT_ALLOWED"
    assert "no Origin header" in missing.json()["error"]
    assert not SessionVariables.objects.exists()


def test_an_inactive_agent_is_a_409(owner, make_agent, realtime_settings, unlimited):
    agent = make_agent(owner.organization, name="Paused", status="inactive")
    key = created(owner, agent)
    response = open_session({"key": key["key"]})
    assert response.status_code == 409 and "active" in response.json()["error"]


# --- rate limits ------------------------------------------------------------------------------------------


def test_sessions_per_client_address_are_limited_with_retry_after(owner, active_agent, realtime_settings, settings):
    settings.WIDGET_KEY_SESSIONS_PER_MINUTE = 0
    settings.WIDGET_ADDRESS_SESSIONS_PER_MINUTE = 2
    settings.WIDGET_ADDRESS_SESSIONS_BURST = 2
    key = created(owner, active_agent)
    address = fresh_address()
    assert [open_session({"key": key["key"]}, address=address).status_code for _ in range(2)] == [200, 200]
    refused = open_session({"key": key["key"]}, address=address)
    assert refused.status_code == 429
    body = refused.json()
    assert body["code"] == "RATE_LIMITED" and body["limitedBy"] == "widget_address"
    assert body["limit"] == pytest.approx(2 / 60, abs=1e-6) and body["burst"] == 2
    assert 1 <= int(refused["Retry-After"]) <= 30 and body["retryAfter"] == int(refused["Retry-After"])
    assert "from this address" in body["error"]
    # Counted before anything else: a flood of unknown keys from the address is refused too.
    assert open_session({"key": "pk_unknown"}, address=address).status_code == 429
    # Another address is not held back.
    assert open_session({"key": key["key"]}).status_code == 200


def test_sessions_per_key_are_limited_with_retry_after(owner, active_agent, make_agent, realtime_settings, settings):
    settings.WIDGET_ADDRESS_SESSIONS_PER_MINUTE = 0
    settings.WIDGET_KEY_SESSIONS_PER_MINUTE = 6
    settings.WIDGET_KEY_SESSIONS_BURST = 3
    key = created(owner, active_agent)
    assert [open_session({"key": key["key"]}).status_code for _ in range(3)] == [200, 200, 200]
    refused = open_session({"key": key["key"]})
    assert refused.status_code == 429
    assert refused.json()["code"] == "RATE_LIMITED" and refused.json()["limitedBy"] == "widget_key"
    assert 1 <= int(refused["Retry-After"]) <= 10
    # Requests from origins the key does not list spend none of its sessions (403 first).
    assert open_session({"key": key["key"]}, origin="https://evil.example.com").status_code == 403
    # Another key (of another agent) has its own.
    other = created(owner, make_agent(owner.organization, name="Max", status="active"))
    assert open_session({"key": other["key"]}).status_code == 200


def test_api_rate_limits_off_turns_the_widget_limits_off(owner, active_agent, realtime_settings, settings):
    settings.API_RATE_LIMITS = False
    settings.WIDGET_ADDRESS_SESSIONS_PER_MINUTE = 1
    settings.WIDGET_ADDRESS_SESSIONS_BURST = 1
    key = created(owner, active_agent)
    address = fresh_address()
    assert {open_session({"key": key["key"]}, address=address).status_code for _ in range(3)} == {200}


# --- the organization's limits ----------------------------------------------------------------------------


def test_widget_sessions_count_in_the_live_call_cap(owner, active_agent, realtime_settings, unlimited):
    Plan.objects.filter(pk=owner.organization.plan_id).update(max_concurrent_calls=2)
    key = created(owner, active_agent)
    assert owner.client.post(f"/public/v1/agents/{active_agent.pk}/realtime-sessions").status_code == 200
    assert open_session({"key": key["key"]}).status_code == 200
    refused = open_session({"key": key["key"]})
    assert refused.status_code == 429
    assert refused.json()["code"] == "CONCURRENT_CALL_LIMIT_EXCEEDED" and refused.json()["maxConcurrentCalls"] == 2
    assert refused["Retry-After"]
    # And the other way round: the widget's sessions hold slots the API's sessions need.
    assert owner.client.post(f"/public/v1/agents/{active_agent.pk}/realtime-sessions").status_code == 429


def test_a_spent_block_budget_refuses_a_widget_session_with_402(owner, active_agent, realtime_settings, unlimited):
    key = created(owner, active_agent)
    started = timezone.now()
    CallFactory(
        agent=active_agent,
        status="completed",
        started_at=started,
        ended_at=started + timedelta(seconds=30),
        duration_seconds=30,
        cost_total=Decimal("10"),
        cost_currency="USD",
    )
    budget = owner.client.post(
        "/public/v1/budgets",
        {
            "name": "Ava daily",
            "scope": {"agentId": str(active_agent.pk)},
            "period": "day",
            "limit": 10,
            "action": "block",
        },
        format="json",
    ).json()
    refused = open_session({"key": key["key"]})
    assert refused.status_code == 402
    assert refused.json()["code"] == "BUDGET_EXCEEDED" and refused.json()["budgetId"] == budget["id"]
    assert refused["Access-Control-Allow-Origin"] == SHOP  # the page can read why
    Budget.objects.filter(pk=budget["id"]).update(limit=Decimal(100))
    assert open_session({"key": key["key"]}).status_code == 200


# --- CORS -------------------------------------------------------------------------------------------------


def preflight(origin: str) -> Any:
    return APIClient().options(
        SESSIONS,
        HTTP_ORIGIN=origin,
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="content-type",
    )


def test_the_preflight_is_answered_for_listed_origins_only(owner, active_agent):
    created(owner, active_agent, [SHOP])
    allowed = preflight(SHOP)
    assert allowed.status_code == 204
    assert allowed["Access-Control-Allow-Origin"] == SHOP
    assert "POST" in allowed["Access-Control-Allow-Methods"]
    assert allowed["Access-Control-Allow-Headers"].lower() == "content-type"
    assert int(allowed["Access-Control-Max-Age"]) > 0
    assert "Origin" in allowed["Vary"]
    for origin in ("https://evil.example.com", "null"):
        refused = preflight(origin)
        assert refused.status_code == 403 and "Access-Control-Allow-Origin" not in refused
        assert refused.json()["code"] == "ORIGIN_NOT_ALLOWED"


def test_answers_carry_the_allow_origin_header_for_listed_origins_only(
    owner, active_agent, realtime_settings, unlimited
):
    key = created(owner, active_agent, [SHOP])
    created(owner, active_agent, ["https://other.example.com"])
    granted = open_session({"key": key["key"]})
    assert granted.status_code == 200
    assert granted["Access-Control-Allow-Origin"] == SHOP and "Origin" in granted["Vary"]
    assert "Retry-After" in granted["Access-Control-Expose-Headers"]
    # Refused for its origin: nothing for the page to read, even when another key lists that origin.
    for origin in ("https://evil.example.com", "https://other.example.com"):
        refused = open_session({"key": key["key"]}, origin=origin)
        assert refused.status_code == 403 and "Access-Control-Allow-Origin" not in refused
    # An unknown key from a listed origin: readable (the page shows why); from another origin: not.
    unknown = open_session({"key": "pk_unknown"})
    assert unknown.status_code == 401 and unknown["Access-Control-Allow-Origin"] == SHOP
    assert "Access-Control-Allow-Origin" not in open_session({"key": "pk_unknown"}, origin="https://evil.example.com")


def test_a_text_plain_body_needs_no_preflight_and_is_taken_as_json(owner, active_agent, realtime_settings, unlimited):
    key = created(owner, active_agent, [SHOP])
    response = APIClient().post(
        SESSIONS,
        data=f'{{"key": "{key["key"]}"}}',
        content_type="text/plain;charset=UTF-8",
        HTTP_ORIGIN=SHOP,
        REMOTE_ADDR=fresh_address(),
    )
    assert response.status_code == 200, response.json()
    assert response["Access-Control-Allow-Origin"] == SHOP
    bad = APIClient().post(SESSIONS, data="not json", content_type="text/plain", HTTP_ORIGIN=SHOP)
    assert bad.status_code == 400


# --- the dashboard ----------------------------------------------------------------------------------------


def agent_page(agent: Any) -> str:
    return f"/admin/agents/agent/{agent.pk}/change/"


def test_the_agent_page_shows_each_keys_snippet_and_origins(admin_client, owner, active_agent, make_agent):
    key = created(owner, active_agent, [SHOP, "http://localhost:3000"])
    created(owner, make_agent(owner.organization, name="Other"), ["https://other.example.com"])
    page = admin_client.get(agent_page(active_agent)).content.decode()
    assert 'id="agent-widget-keys"' in page and "1 key)" in page
    snippet = f'&lt;script src="http://testserver/static/widget/v1/widget.js" data-key="{key["key"]}" async&gt;&lt;/script&gt;'
    assert snippet in page
    assert f"<code>{SHOP}</code>" in page and "<code>http://localhost:3000</code>" in page
    assert "other.example.com" not in page  # another agent's key
    assert "va_" not in page


def test_staff_add_and_delete_keys_from_the_agent_page(admin_client, owner, active_agent):
    added = admin_client.post(
        f"/admin/agents/agent/{active_agent.pk}/widget-keys/add",
        {"allowed_origins": "https://Shop.Example.com\r\nhttp://localhost:3000"},
        follow=True,
    )
    assert added.status_code == 200
    [key] = WidgetKey.objects.filter(agent=active_agent)
    assert [row.origin for row in key.origins.all()] == [SHOP, "http://localhost:3000"]
    assert f"Widget key {key.key} added" in added.content.decode()

    refused = admin_client.post(
        f"/admin/agents/agent/{active_agent.pk}/widget-keys/add",
        {"allowed_origins": "https://a.example.com/path"},
        follow=True,
    )
    page = refused.content.decode()
    assert "No widget key added" in page and "allowedOrigins.0" in page and "no path" in page
    assert WidgetKey.objects.filter(agent=active_agent).count() == 1

    deleted = admin_client.post(f"/admin/agents/agent/{active_agent.pk}/widget-keys/{key.pk}/delete", follow=True)
    assert deleted.status_code == 200 and "Widget key deleted" in deleted.content.decode()
    assert not WidgetKey.objects.exists()
    assert admin_client.get(f"/admin/agents/agent/{active_agent.pk}/widget-keys/add").status_code == 405


def test_only_staff_who_may_change_the_agent_add_or_delete_keys(client, owner, active_agent):
    from django.contrib.auth.models import Permission, User

    key = created(owner, active_agent)
    add = f"/admin/agents/agent/{active_agent.pk}/widget-keys/add"
    delete = f"/admin/agents/agent/{active_agent.pk}/widget-keys/{key['id']}/delete"
    assert client.post(add, {"allowed_origins": SHOP}).status_code == 302  # to the login page
    clerk = User.objects.create_user("clerk", password="pw-clerk-1", is_staff=True)
    clerk.user_permissions.add(Permission.objects.get(codename="view_agent"))
    client.force_login(clerk)
    page = client.get(agent_page(active_agent)).content.decode()
    assert key["key"] in page and "Add a widget key" not in page and "Delete widget key" not in page
    assert client.post(add, {"allowed_origins": SHOP}).status_code == 403
    assert client.post(delete).status_code == 403
    assert WidgetKey.objects.count() == 1
