"""Dashboard: adding a webhook through the API's service (the API's checks, shown on the form's fields, never
a 500), its signing secret shown once, rotating the secret (the new one shown once, the old one's grace
stated), and a signed test event to a loopback receiver with the outcome on the webhook's page."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User

from calls.models import WebhookEndpoint
from kit.signing import signature
from testing.dashboard import errors
from testing.webhooks import LoopbackReceiver, Reply, allow_loopback_fixture

__all__ = ["allow_loopback_fixture"]

ADD = "/admin/calls/webhookendpoint/add/"


@pytest.fixture
def staff(client, db):
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


def add_form(organization, **changes):
    form = {
        "organization": str(organization.pk),
        "url": "https://hooks.example.com/voice-events",
        "events": ["call.ended", "call.analyzed"],
        "agent": "",
        "enabled": "on",
    }
    form.update(changes)
    return {name: value for name, value in form.items() if value is not None}


def shown_secret(page: str) -> str:
    match = re.search(r'id="webhook-secret"[^>]*value="(whsec_[^"]+)"', page)
    assert match, "no secret on the page"
    return match.group(1)


def page_of(endpoint: WebhookEndpoint) -> str:
    return f"/admin/calls/webhookendpoint/{endpoint.pk}/change/"


def test_the_list_has_an_add_button_and_the_add_page_its_fields(staff):
    listing = staff.get("/admin/calls/webhookendpoint/").content.decode()
    assert f'href="{ADD}"' in listing
    page = staff.get(ADD)
    assert page.status_code == 200
    html = page.content.decode()
    for name in ("organization", "url", "events", "agent", "enabled"):
        assert f'name="{name}"' in html, name
    assert 'name="secret"' not in html and "whsec_" not in html


def test_adding_a_webhook_shows_its_secret_once(staff, owner, make_agent):
    agent = make_agent(owner.organization, name="Olive")
    response = staff.post(ADD, add_form(owner.organization, agent=str(agent.pk)))
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    page = response.content.decode()
    secret = shown_secret(page)
    endpoint = WebhookEndpoint.objects.get()
    assert (endpoint.organization, endpoint.agent, endpoint.url) == (
        owner.organization,
        agent,
        "https://hooks.example.com/voice-events",
    )
    assert endpoint.events == ["call.ended", "call.analyzed"] and endpoint.enabled
    assert endpoint.secret == secret
    assert "shown only on this page" in page and page_of(endpoint) in page

    # Placed like an API-created one: the API lists it (without a secret).
    [listed] = owner.client.get("/public/v1/webhooks").json()
    assert listed["id"] == str(endpoint.pk) and listed["agentId"] == str(agent.pk) and "secret" not in listed

    # Never again: the webhook's page, the list, the admin's log.
    for url in (page_of(endpoint), "/admin/calls/webhookendpoint/", "/admin/"):
        again = staff.get(url)
        assert again.status_code == 200 and secret not in again.content.decode(), url
    assert all(secret not in entry.change_message for entry in LogEntry.objects.all())
    assert LogEntry.objects.filter(object_id=str(endpoint.pk)).exists()


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"url": "ftp://hooks.example.com/x"}, "url", "http"),
        ({"url": "http://127.0.0.1:9/hook"}, "url", "loopback"),
        ({"url": "http://169.254.169.254/latest"}, "url", ""),
        ({"events": None}, "events", ""),
    ],
)
def test_a_refused_value_is_shown_on_its_field_and_nothing_is_saved(staff, owner, changes, field, message):
    response = staff.post(ADD, add_form(owner.organization, **changes))
    assert response.status_code == 200
    page = response.content.decode()
    assert re.search(rf'class="form-row errors field-{field}"', page), errors(page)
    assert message in " ".join(errors(page)).lower()
    assert "whsec_" not in page
    assert not WebhookEndpoint.objects.exists()


def test_another_organizations_agent_is_refused_on_the_agent_field(staff, owner, outsider, make_agent):
    theirs = make_agent(outsider.organization, name="Theirs")
    page = staff.post(ADD, add_form(owner.organization, agent=str(theirs.pk))).content.decode()
    assert 'class="form-row errors field-agent"' in page
    assert "Agent not found (agentId)" in errors(page)
    assert not WebhookEndpoint.objects.exists()


def test_the_organizations_limit_is_shown_on_the_form(staff, owner):
    for i in range(20):
        assert (
            owner.client.post(
                "/public/v1/webhooks",
                {"url": f"https://hooks.example.com/{i}", "events": ["call.ended"]},
                format="json",
            ).status_code
            == 201
        )
    page = staff.post(ADD, add_form(owner.organization)).content.decode()
    assert "An organization has at most 20 webhooks." in errors(page)
    assert WebhookEndpoint.objects.count() == 20


def test_rotating_the_secret_shows_the_new_one_once_and_states_the_grace(staff, owner):
    first = shown_secret(staff.post(ADD, add_form(owner.organization)).content.decode())
    endpoint = WebhookEndpoint.objects.get()
    page = staff.get(page_of(endpoint)).content.decode()
    rotate = f"/admin/calls/webhookendpoint/{endpoint.pk}/rotate-secret/"
    assert f'action="{rotate}"' in page and "Rotate secret" in page

    assert staff.get(rotate).status_code == 405  # a GET never rotates
    response = staff.post(rotate)
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    rotated = response.content.decode()
    second = shown_secret(rotated)
    endpoint.refresh_from_db()
    assert second != first and endpoint.secret == second and endpoint.previous_secret == first
    assert "stays valid for 24 hours, until" in rotated
    assert endpoint.previous_secret_expires_at is not None
    assert first not in rotated

    again = staff.get(page_of(endpoint)).content.decode()
    assert second not in again and first not in again
    assert "Rotated the signing secret." in LogEntry.objects.get(change_message__startswith="Rotated").change_message


def test_a_teammate_without_change_permission_cannot_rotate_or_send(client, owner):
    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    from django.contrib.auth.models import Permission

    viewer.user_permissions.add(Permission.objects.get(codename="view_webhookendpoint"))
    created = owner.client.post(
        "/public/v1/webhooks", {"url": "https://hooks.example.com/x", "events": ["call.ended"]}, format="json"
    ).json()
    client.force_login(viewer)
    assert client.get(ADD).status_code == 403
    for action in ("rotate-secret", "send-test-event"):
        assert client.post(f"/admin/calls/webhookendpoint/{created['id']}/{action}/").status_code == 403
    assert WebhookEndpoint.objects.get().secret == created["secret"]


def test_a_test_event_reaches_the_receiver_signed_and_its_answer_is_shown(staff, owner, allow_loopback):
    with LoopbackReceiver() as hook:
        secret = shown_secret(staff.post(ADD, add_form(owner.organization, url=hook.url())).content.decode())
        endpoint = WebhookEndpoint.objects.get()
        send = f"/admin/calls/webhookendpoint/{endpoint.pk}/send-test-event/"
        assert f'action="{send}"' in staff.get(page_of(endpoint)).content.decode()
        assert staff.get(send).status_code == 405

        page = staff.post(send, follow=True).content.decode()
        [received] = hook.requests
        message = received.json()["message"]
        assert message["type"] == "webhook.test" and message["webhookId"] == str(endpoint.pk)
        assert message["events"] == ["call.ended", "call.analyzed"] and message["createdAt"]
        assert received.headers["x-service-signature"] == signature(secret, received.body)
        assert received.headers["x-service-event-id"] == message["id"]
        assert received.headers["x-service-attempt"] == "1"
        assert f"Test event {message['id']} delivered: the receiver answered HTTP 200" in page
        assert secret not in page

        hook.reply(Reply(status=500, body="down"))
        page = staff.post(send, follow=True).content.decode()
        assert len(hook.requests) == 2  # one attempt, no retry
        assert "not delivered" in page and "the receiver answered HTTP 500, not a 2xx" in page

        hook.reply(Reply(status=301, headers={"Location": "https://elsewhere.example.com/hook"}))
        page = staff.post(send, follow=True).content.decode()
        assert len(hook.requests) == 3
        assert "HTTP 301 redirect to https://elsewhere.example.com/hook not followed" in page

    allow_loopback.OUTBOUND_ALLOWED_NETWORKS = []  # the guard now refuses the saved loopback URL
    page = staff.post(send, follow=True).content.decode()
    assert "not delivered" in page and "loopback" in page.lower()
    assert not endpoint.deliveries.exists()  # a test event is answered, not recorded
