"""/public/v1/webhooks and /public/v1/webhook-deliveries: the rules a caller meets through the REST API, and
the outbox rows a call's start and end write (delivery itself: test_events_e2e.py; after a restart: voiceagent/tests/test_restarts.py)."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from calls import maintenance, services
from calls.models import CallEvent, WebhookAttempt, WebhookDelivery, WebhookEndpoint
from kit.signing import signature
from testing.webhooks import LoopbackReceiver, Reply, allow_loopback_fixture  # noqa: F401 (a fixture)

HOOK = "https://hooks.example.com/voice"


def create(persona: Any, **fields: Any) -> Any:
    return persona.client.post("/public/v1/webhooks", {"url": HOOK, "events": ["call.ended"], **fields}, format="json")


def test_create_answers_the_secret_once_and_lists_without_it(owner):
    response = create(owner, events=["call.ended", "call.started"])
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["secret"].startswith("whsec_") and len(body["secret"]) > 30
    assert body["events"] == ["call.started", "call.ended"]  # the events' own order
    assert body["enabled"] is True and body["agentId"] is None and body["disabledReason"] is None
    assert set(body) >= {"id", "url", "events", "agentId", "enabled", "createdAt", "updatedAt", "disabledReason"}

    listed = owner.client.get("/public/v1/webhooks").json()
    assert [w["id"] for w in listed] == [body["id"]] and "secret" not in listed[0]
    fetched = owner.client.get(f"/public/v1/webhooks/{body['id']}").json()
    assert "secret" not in fetched and fetched["url"] == HOOK
    # Stored encrypted, like an agent's serverSecret.
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT secret FROM calls_webhookendpoint")
        [(stored,)] = cursor.fetchall()
    assert body["secret"] not in stored


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"url": "ftp://hooks.example.com/x"}, "url"),
        ({"url": "not a url"}, "url"),
        ({"url": 12}, "url"),
        ({"events": ["call.exploded"]}, "events"),
        ({"events": []}, "events"),
        ({"events": "call.ended"}, "events"),
        ({"events": ["call.ended", "call.ended"]}, "events"),
        ({"agentId": "nope"}, "agentId"),
        ({"enabled": "yes"}, "enabled"),
    ],
)
def test_bad_fields_are_a_400_naming_them(owner, fields, field):
    response = create(owner, **fields)
    assert response.status_code == 400, response.json()
    assert [key for key in response.json()["issues"] if key.split(".")[0] == field]
    assert not WebhookEndpoint.objects.exists()


def test_a_url_the_outbound_guard_refuses_is_a_400_with_its_reason(owner, refused_url):
    refused_url.reason_in(create(owner, url=refused_url.url), "url")


def test_agent_filter_must_be_an_agent_of_the_organization(owner, outsider, make_agent):
    theirs = make_agent(outsider.organization, name="Theirs")
    response = create(owner, agentId=str(theirs.pk))
    assert response.status_code == 404 and response.json()["error"] == "Agent not found (agentId)"
    assert create(owner, agentId=str(uuid.uuid4())).status_code == 404
    assert not WebhookEndpoint.objects.exists()
    mine = make_agent(owner.organization, name="Mine")
    response = create(owner, agentId=str(mine.pk))
    assert response.status_code == 201 and response.json()["agentId"] == str(mine.pk)


def test_update_rotate_and_delete(owner):
    created = create(owner).json()
    url = f"/public/v1/webhooks/{created['id']}"

    patched = owner.client.patch(url, {"events": ["call.analyzed"], "enabled": False}, format="json")
    assert patched.status_code == 200, patched.json()
    assert patched.json()["events"] == ["call.analyzed"] and patched.json()["enabled"] is False
    assert "secret" not in patched.json()
    assert owner.client.patch(url, {"events": ["nope"]}, format="json").status_code == 400

    rotated = owner.client.post(f"{url}/rotate-secret")
    assert rotated.status_code == 200
    assert rotated.json()["secret"] != created["secret"]
    expires = rotated.json()["previousSecretExpiresAt"]
    assert expires is not None
    endpoint = WebhookEndpoint.objects.get(pk=created["id"])
    assert endpoint.secret == rotated.json()["secret"] and endpoint.previous_secret == created["secret"]
    assert timedelta(hours=23) < endpoint.previous_secret_expires_at - timezone.now() <= timedelta(hours=24)

    deleted = owner.client.delete(url)
    assert deleted.status_code == 200 and deleted.json() == {"id": created["id"]}
    assert owner.client.get(url).status_code == 404


def test_a_test_event_is_sent_signed_and_answers_what_the_receiver_did(owner, outsider, allow_loopback):
    with LoopbackReceiver() as hook:
        created = create(owner, url=hook.url(), events=["call.ended", "call.analyzed"]).json()
        test_url = f"/public/v1/webhooks/{created['id']}/test"

        answer = owner.client.post(test_url)
        assert answer.status_code == 200, answer.json()
        [received] = hook.requests
        message = received.json()["message"]
        assert message["type"] == "webhook.test" and message["webhookId"] == created["id"]
        assert message["events"] == ["call.ended", "call.analyzed"]
        assert received.headers["x-service-signature"] == signature(created["secret"], received.body)
        assert answer.json()["eventId"] == message["id"] == received.headers["x-service-event-id"]
        assert answer.json()["delivered"] is True and answer.json()["statusCode"] == 200
        assert answer.json()["error"] is None and answer.json()["durationMs"] >= 0

        hook.reply(Reply(status=503, body="down"))
        failed = owner.client.post(test_url).json()
        assert failed["delivered"] is False and failed["statusCode"] == 503 and failed["error"] == "HTTP 503"
        assert len(hook.requests) == 2  # one attempt, no retry

        assert outsider.client.post(test_url).status_code == 404
        assert owner.client.post("/public/v1/webhooks/not-an-id/test").status_code == 400
        assert len(hook.requests) == 2
    assert not WebhookDelivery.objects.exists()  # nothing recorded


def test_another_organizations_webhook_is_not_found(owner, outsider):
    created = create(owner).json()
    url = f"/public/v1/webhooks/{created['id']}"
    assert outsider.client.get(url).status_code == 404
    assert outsider.client.patch(url, {"enabled": False}, format="json").status_code == 404
    assert outsider.client.delete(url).status_code == 404
    assert outsider.client.post(f"{url}/rotate-secret").status_code == 404
    assert outsider.client.get("/public/v1/webhooks").json() == []
    assert owner.client.get("/public/v1/webhooks/not-a-uuid").status_code == 400
    assert owner.client.get(f"/public/v1/webhooks/{uuid.uuid4()}").status_code == 404


def test_a_call_records_its_events_for_each_matching_target(owner, make_agent, django_capture_on_commit_callbacks):
    hooked = make_agent(
        owner.organization, name="Olive", status="active", agent_type="webhook", server_url="https://olive.example.com"
    )
    other = make_agent(owner.organization, name="Static", status="active", agent_type="static", server_url=None)
    every = create(owner, events=["call.started", "call.ended", "call.analyzed"]).json()
    ended_only_olive = create(owner, agentId=str(hooked.pk)).json()
    create(owner, events=["call.started"], enabled=False)

    call = services.call_start(agent=hooked, channel="web")
    with django_capture_on_commit_callbacks(execute=True):  # the analysis runs once the end is committed
        services.call_finish(call=call, status="completed")
    static_call = services.call_start(agent=other, channel="web")

    events = list(CallEvent.objects.filter(call=call).order_by("created_at"))
    assert [e.event_type for e in events] == ["call.started", "call.ended", "call.analyzed"]
    ended = json.loads(events[1].body)["message"]
    assert ended["type"] == "call.ended" and ended["id"] == str(events[1].id)
    # The call exactly as GET /public/v1/calls/{id} showed it then (its analysis to come), and once analysed.
    now = owner.client.get(f"/public/v1/calls/{call.pk}").json()
    assert ended["call"]["analysis"]["status"] == "pending"
    assert {**ended["call"], "analysis": None} == {**now, "analysis": None}
    analyzed = json.loads(events[2].body)["message"]["call"]
    assert analyzed == now and analyzed["analysis"]["status"] == "skipped"  # nothing was said

    targets = sorted((d.event_type, str(d.endpoint_id or ""), d.url) for d in WebhookDelivery.objects.filter(call=call))
    assert targets == sorted(
        [
            ("call.started", "", "https://olive.example.com"),
            ("call.ended", "", "https://olive.example.com"),
            ("call.analyzed", "", "https://olive.example.com"),
            ("call.started", every["id"], HOOK),
            ("call.ended", every["id"], HOOK),
            ("call.analyzed", every["id"], HOOK),
            ("call.ended", ended_only_olive["id"], HOOK),
        ]
    )
    # A static agent has no serverUrl; the filtered webhook is for Olive only.
    assert [(d.event_type, str(d.endpoint_id)) for d in WebhookDelivery.objects.filter(call=static_call)] == [
        ("call.started", every["id"])
    ]

    listed = owner.client.get(f"/public/v1/webhook-deliveries?callId={call.pk}").json()
    assert len(listed) == 7 and {d["status"] for d in listed} == {"pending"}
    assert {d["target"] for d in listed} == {"webhook", "serverUrl"}
    assert len(owner.client.get(f"/public/v1/webhook-deliveries?webhookId={every['id']}").json()) == 4
    assert len(owner.client.get("/public/v1/webhook-deliveries?limit=2&offset=7").json()) == 1
    assert owner.client.get("/public/v1/webhook-deliveries?status=failed").json() == []
    assert owner.client.get("/public/v1/webhook-deliveries?status=nope").status_code == 400
    assert owner.client.get("/public/v1/webhook-deliveries?callId=nope").status_code == 400


def test_redeliver_is_scoped_and_refused_for_a_disabled_webhook(owner, outsider, make_agent):
    agent = make_agent(owner.organization, name="Olive", status="active", agent_type="static", server_url=None)
    hook = create(owner, events=["call.started"]).json()
    services.call_start(agent=agent, channel="web")
    delivery = WebhookDelivery.objects.get()
    WebhookDelivery.objects.filter(pk=delivery.pk).update(status="failed", next_attempt_at=None, attempts=8)
    url = f"/public/v1/webhook-deliveries/{delivery.pk}/redeliver"

    assert outsider.client.post(url).status_code == 404
    assert outsider.client.get("/public/v1/webhook-deliveries").json() == []
    answered = owner.client.post(url)
    assert answered.status_code == 202, answered.json()
    assert answered.json()["status"] == "pending" and answered.json()["nextAttemptAt"] is not None
    assert WebhookDelivery.objects.get().max_attempts == 16

    owner.client.patch(f"/public/v1/webhooks/{hook['id']}", {"enabled": False}, format="json")
    refused = owner.client.post(url)
    assert refused.status_code == 409 and refused.json()["code"] == "WEBHOOK_DISABLED"
    assert owner.client.post("/public/v1/webhook-deliveries/nope/redeliver").status_code == 400


def test_a_webhook_that_failed_every_delivery_for_3_days_is_disabled_by_the_upkeep(owner, make_agent):
    agent = make_agent(owner.organization, name="Olive", status="active", agent_type="static", server_url=None)
    failing = create(owner, events=["call.started"]).json()
    recovering = create(owner, events=["call.started"]).json()
    services.call_start(agent=agent, channel="web")

    def attempt(webhook: dict[str, Any], days_ago: float, succeeded: bool, number: int) -> None:
        delivery = WebhookDelivery.objects.get(endpoint_id=webhook["id"])
        WebhookAttempt.objects.create(
            delivery=delivery,
            number=number,
            started_at=timezone.now() - timedelta(days=days_ago),
            succeeded=succeeded,
            status_code=200 if succeeded else 503,
            error="" if succeeded else "HTTP 503",
        )

    attempt(failing, 4, False, 1)
    attempt(failing, 1, False, 2)
    attempt(recovering, 4, False, 1)
    attempt(recovering, 2, True, 2)
    attempt(recovering, 1, False, 3)

    assert maintenance.run_maintenance()["disabledWebhooks"] == 1
    disabled = owner.client.get(f"/public/v1/webhooks/{failing['id']}").json()
    assert disabled["enabled"] is False
    assert "every delivery failed since" in disabled["disabledReason"] and "HTTP 503" in disabled["disabledReason"]
    assert owner.client.get(f"/public/v1/webhooks/{recovering['id']}").json()["enabled"] is True

    again = owner.client.patch(f"/public/v1/webhooks/{failing['id']}", {"enabled": True}, format="json").json()
    assert again["enabled"] is True and again["disabledReason"] is None


def test_a_call_nobody_receives_stores_no_event(owner, make_agent):
    agent = make_agent(owner.organization, name="Quiet", status="active", agent_type="static", server_url=None)
    services.call_finish(call=services.call_start(agent=agent, channel="web"), status="completed")
    assert not CallEvent.objects.exists() and not WebhookDelivery.objects.exists()


def test_the_upkeep_purges_old_events_no_longer_pending(owner, make_agent):
    agent = make_agent(owner.organization, name="Olive", status="active", agent_type="static", server_url=None)
    create(owner, events=["call.started", "call.ended"])
    call = services.call_start(agent=agent, channel="web")
    services.call_finish(call=call, status="completed")
    started, ended = CallEvent.objects.order_by("created_at")
    CallEvent.objects.update(created_at=timezone.now() - timedelta(days=31))
    WebhookDelivery.objects.filter(event=started).update(status="succeeded")  # ended is still pending

    assert maintenance.run_maintenance()["purgedEvents"] == 1
    assert list(CallEvent.objects.values_list("pk", flat=True)) == [ended.pk]
    assert WebhookDelivery.objects.count() == 1
