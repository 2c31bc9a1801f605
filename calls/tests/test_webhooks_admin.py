"""Dashboard: a call's event deliveries on the call page, a webhook's deliveries on its page (its secret
never shown), and the redeliver and cancel actions."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User

from calls import services
from calls.models import WebhookDelivery, WebhookEndpoint
from calls.webhooks import events
from testing.webhooks import LoopbackReceiver


@pytest.fixture
def staff(client):
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


@pytest.fixture
def delivered(owner, make_agent):
    agent = make_agent(owner.organization, name="Olive", status="active", agent_type="static", server_url=None)
    created = owner.client.post(
        "/public/v1/webhooks", {"url": "https://hooks.example.com/x", "events": ["call.started"]}, format="json"
    ).json()
    call = services.call_start(agent=agent, channel="web")
    WebhookDelivery.objects.update(status="failed", attempts=8, last_status_code=503, last_error="HTTP 503")
    return call, created


def test_the_call_page_lists_its_deliveries(staff, delivered):
    call, _ = delivered
    page = staff.get(f"/admin/calls/call/{call.pk}/change/").content.decode()
    assert "event deliveries" in page.lower()
    assert "https://hooks.example.com/x" in page and "HTTP 503" in page


def test_the_webhook_page_lists_its_deliveries_and_never_its_secret(staff, delivered):
    _, created = delivered
    endpoint = WebhookEndpoint.objects.get()
    page = staff.get(f"/admin/calls/webhookendpoint/{endpoint.pk}/change/").content.decode()
    assert "call.started" in page and "HTTP 503" in page and "All deliveries of this webhook" in page
    assert created["secret"] not in page
    listing = staff.get("/admin/calls/webhookendpoint/").content.decode()
    assert "hooks.example.com" in listing and created["secret"] not in listing


def test_the_redeliver_action_queues_the_delivery_again(staff, delivered):
    delivery = WebhookDelivery.objects.get()
    response = staff.post(
        "/admin/calls/webhookdelivery/",
        {"action": "redeliver", "_selected_action": [str(delivery.pk)]},
        follow=True,
    )
    assert "1 delivery queued again." in response.content.decode()
    delivery.refresh_from_db()
    assert delivery.status == "pending" and delivery.max_attempts == 16
    page = staff.get(f"/admin/calls/webhookdelivery/{delivery.pk}/change/").content.decode()
    assert "attempts" in page.lower()


def test_the_links_to_a_calls_and_a_webhooks_deliveries_list_them(staff, delivered, owner, make_agent):
    call, _ = delivered
    endpoint = WebhookEndpoint.objects.get()
    other = make_agent(owner.organization, name="Other", status="active", agent_type="static", server_url=None)
    services.call_start(agent=other, channel="web")  # a second delivery, of another call
    assert WebhookDelivery.objects.count() == 2

    call_page = staff.get(f"/admin/calls/call/{call.pk}/change/").content.decode()
    [call_link] = set(re.findall(r'href="(/admin/calls/webhookdelivery/\?call__id__exact=[^"]+)"', call_page))
    listed = staff.get(call_link.replace("&amp;", "&"))
    assert listed.status_code == 200 and "1 webhook delivery" in listed.content.decode()

    endpoint_page = staff.get(f"/admin/calls/webhookendpoint/{endpoint.pk}/change/").content.decode()
    [endpoint_link] = set(
        re.findall(r'href="(/admin/calls/webhookdelivery/\?endpoint__id__exact=[^"]+)"', endpoint_page)
    )
    listed = staff.get(endpoint_link)
    assert listed.status_code == 200 and "2 webhook deliveries" in listed.content.decode()


def test_the_cancel_action_means_the_delivery_is_never_sent_and_the_calls_next_event_goes(
    staff, owner, make_agent, settings
):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    agent = make_agent(owner.organization, name="Olive", status="active", agent_type="static", server_url=None)
    with LoopbackReceiver() as hook:
        created = owner.client.post(
            "/public/v1/webhooks", {"url": hook.url(), "events": ["call.started", "call.ended"]}, format="json"
        )
        assert created.status_code == 201
        call = services.call_start(agent=agent, channel="web")
        started = WebhookDelivery.objects.get()  # pending: no sender runs in the test process

        response = staff.post(
            "/admin/calls/webhookdelivery/", {"action": "cancel", "_selected_action": [str(started.pk)]}, follow=True
        )
        assert "1 delivery cancelled." in response.content.decode()
        listed = owner.client.get("/public/v1/webhook-deliveries", {"status": "cancelled"}).json()
        assert [(d["id"], d["attempts"]) for d in listed] == [(str(started.pk), 0)]
        assert listed[0]["lastError"].startswith("Cancelled by root on ")

        services.call_finish(call=call, status="completed")
        events.deliver_due()  # what every sender does: the cancelled one is not due, the next event is
        assert [r.json()["message"]["type"] for r in hook.requests] == ["call.ended"]

    again = staff.post(
        "/admin/calls/webhookdelivery/", {"action": "cancel", "_selected_action": [str(started.pk)]}, follow=True
    )
    assert "1 skipped: no longer pending." in again.content.decode()
