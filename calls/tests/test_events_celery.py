"""Call events through a real Celery worker (BACKGROUND_WORK=celery) on the broker the settings name (Redis
when REDIS_URL is set, Celery's in-memory transport otherwise): a task per new delivery, and beat's
`calls.deliver_due_events` for the retry."""

from __future__ import annotations

import threading

import pytest
from celery.contrib.testing.worker import start_worker
from celery.signals import task_postrun
from django.utils import timezone

from calls import services
from calls.models import WebhookDelivery
from testing.waiting import polled_sync
from testing.webhooks import LoopbackReceiver, Reply
from voiceagent.celery import app

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def broker_mode(settings):
    settings.BACKGROUND_WORK = "celery"  # the whole process's background work on the broker, events included
    # No heartbeat loop of this process for the call it starts (the suite's way: heartbeat_at stays empty);
    # the upkeep sweep and the other loops of shared work never run in this process with celery.
    settings.LIVENESS_HEARTBEAT_SECONDS = 0
    settings.EVENTS_RETRY_BASE_SECONDS = 0.2
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    app.conf.task_always_eager = False
    yield
    app.conf.task_always_eager = True


def test_a_worker_delivers_the_event_and_the_beat_task_its_retry(owner, make_agent, broker_mode):
    agent = make_agent(owner.organization, name="Desk", status="active", agent_type="static", server_url=None)
    ran: list[str] = []
    done = threading.Event()

    ours: list[str] = []

    def finished(sender=None, task=None, args=None, **kwargs):
        # This test's tasks: the broker may still hold deliveries other runs queued with no worker to run them.
        if task is None or not task.name.startswith("calls.deliver"):
            return
        if task.name == "calls.deliver_event" and [str(arg) for arg in args or ()] != ours:
            return
        ran.append(task.name)
        done.set()

    with LoopbackReceiver().reply(Reply(status=503)) as hook:
        response = owner.client.post(
            "/public/v1/webhooks", {"url": hook.url(), "events": ["call.started"]}, format="json"
        )
        assert response.status_code == 201
        services.call_start(agent=agent, channel="web")  # queued on the broker when the transaction commits
        assert WebhookDelivery.objects.get().attempts == 0
        ours.append(str(WebhookDelivery.objects.get().pk))

        task_postrun.connect(finished, weak=False)
        try:
            with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
                assert done.wait(timeout=60), "the worker did not run calls.deliver_event"
                assert ran == ["calls.deliver_event"] and len(hook.requests) == 1
                polled_sync(  # the retry is due (its time has come)
                    lambda: WebhookDelivery.objects.get().next_attempt_at <= timezone.now(), what="the retry's due time"
                )
                done.clear()
                app.send_task("calls.deliver_due_events")  # what Celery beat runs every 10 s
                assert done.wait(timeout=60), "the worker did not run calls.deliver_due_events"
        finally:
            task_postrun.disconnect(finished)

    assert [r.headers["x-service-attempt"] for r in hook.requests] == ["1", "2"]
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == "succeeded" and delivery.attempts == 2
