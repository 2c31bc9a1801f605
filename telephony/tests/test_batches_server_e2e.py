"""The embedded default's scheduler through real Daphne processes on the test database: a batch created
over HTTP is placed by the server's own scheduler thread within its concurrency, goes on as calls end, and
a server killed and started again places no recipient twice. The Celery path: the beat task."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
from django.conf import settings

from calls import services as call_services
from calls.models import OPEN_STATUSES, Call
from telephony.models import CallBatch, OutboundCall
from telephony.services.numbers import phone_number_claim
from telephony.tasks import run_batch_tick
from testing.daphne import start_test_server, stop_test_server
from testing.twilio_webhooks import make_account
from testing.waiting import polled_sync

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SCHEDULER = {"BATCH_SCHEDULER": "inprocess", "BATCH_TICK_SECONDS": "0.2"}


def post(url: str, key: str, body: Any) -> Any:
    request = urllib.request.Request(
        url,
        method="POST",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def open_calls(batch_id: Any) -> list[Call]:
    return list(Call.objects.filter(outbound__recipient__batch_id=batch_id, status__in=OPEN_STATUSES))


def placed(batch_id: Any) -> int:
    return Call.objects.filter(outbound__recipient__batch_id=batch_id).count()


def complete(call: Call) -> None:
    Call.objects.filter(pk=call.pk).update(status="active")  # answered (the stream attached)
    call_services.call_finish(call=Call.objects.get(pk=call.pk), status="completed")


def test_the_servers_scheduler_places_the_batch_and_a_restart_places_nothing_twice(
    owner, outsider, make_agent, tmp_path_factory, outbound_ready
):
    agent = make_agent(owner.organization, name="Ava", status="active")
    number = phone_number_claim(organization=owner.organization, number="+14155550100")
    # Another organization's batch (its own account, number and limits) is the scheduler's clock: its
    # second call is placed by a later tick than its first, so ticks have passed over the owner's batch.
    other_agent = make_agent(outsider.organization, name="Olive", status="active")
    make_account(outsider.organization, account_sid="AC" + "7" * 32)
    other_number = phone_number_claim(organization=outsider.organization, number="+14155550101")
    server = start_test_server(tmp_path_factory, "batches", SCHEDULER, public=True)
    try:
        batch = post(
            f"{server.http_url}/public/v1/call-batches",
            owner.api_key,
            {
                "name": "E2E",
                "agentId": str(agent.id),
                "phoneNumberId": str(number.id),
                "recipients": [{"to": f"+1415555{1000 + i}"} for i in range(4)],
                "concurrency": 2,
            },
        )
        polled_sync(lambda: len(open_calls(batch["id"])) == 2, timeout=20, what="the first two calls")
        other = post(
            f"{server.http_url}/public/v1/call-batches",
            outsider.api_key,
            {
                "name": "Ticks",
                "agentId": str(other_agent.id),
                "phoneNumberId": str(other_number.id),
                "recipients": [{"to": f"+1415555{2000 + i}"} for i in range(2)],
                "concurrency": 1,
            },
        )
        polled_sync(lambda: len(open_calls(other["id"])) == 1, timeout=20, what="the other batch's first call")
        complete(open_calls(other["id"])[0])
        polled_sync(lambda: len(open_calls(other["id"])) == 1, timeout=20, what="the other batch's second call")
        complete(open_calls(other["id"])[0])
        assert len(open_calls(batch["id"])) == 2  # the ticks that placed the other batch's calls: still two
        complete(open_calls(batch["id"])[0])  # ends here; the server's next tick fills the slot
        polled_sync(lambda: placed(batch["id"]) == 3, timeout=20, what="the third call")
    finally:
        assert server.process is not None
        server.process.kill()  # the scheduler dies mid-batch
        stop_test_server(server)
    for call in open_calls(batch["id"]):
        complete(call)
    again = start_test_server(tmp_path_factory, "batches-restarted", SCHEDULER, public=True)
    try:
        polled_sync(lambda: placed(batch["id"]) == 4, timeout=20, what="the last call, after the restart")
        complete(open_calls(batch["id"])[0])
        polled_sync(lambda: CallBatch.objects.get(pk=batch["id"]).status == "completed", timeout=20, what="completion")
    finally:
        stop_test_server(again)
    links = OutboundCall.objects.filter(recipient__batch_id=batch["id"])
    assert sorted(link.recipient.position for link in links) == [0, 1, 2, 3]


def test_celery_beat_runs_the_scheduler(owner, make_agent, outbound_ready):
    assert settings.CELERY_BEAT_SCHEDULE["telephony-batch-tick"]["task"] == "telephony.batch_tick"
    agent = make_agent(owner.organization, name="Ava", status="active")
    number = phone_number_claim(organization=owner.organization, number="+14155550100")
    response = owner.client.post(
        "/public/v1/call-batches",
        {
            "name": "Beat",
            "agentId": str(agent.id),
            "phoneNumberId": str(number.id),
            "recipients": [{"to": "+14155551000"}],
        },
        format="json",
    )
    assert response.status_code == 201
    run_batch_tick.delay()  # eager in tests (a real worker runs it with REDIS_URL)
    assert Call.objects.filter(to_number="+14155551000", status="queued").exists()
