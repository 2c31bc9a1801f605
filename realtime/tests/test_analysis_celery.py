"""A call's analysis through a real Celery worker on the broker the settings name (Redis when REDIS_URL
is set, Celery's in-memory transport otherwise): the call ends with its analysis pending on the broker,
and the worker runs and stores it."""

from __future__ import annotations

import threading
import time

import pytest
from celery.contrib.testing.worker import start_worker
from celery.signals import task_postrun
from django.conf import settings

from calls.services import call_finish, call_message_add, call_start
from voiceagent.celery import app

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def broker_mode(settings):
    # Queued on commit and sent to the broker, as in production with REDIS_URL (the test process runs
    # tasks eagerly by default): the whole process's background work, the analysis included.
    settings.BACKGROUND_WORK = "celery"
    # No heartbeat loop of this process for the call it starts (the suite's way: heartbeat_at stays empty);
    # the upkeep sweep and the other loops of shared work never run in this process with celery.
    settings.LIVENESS_HEARTBEAT_SECONDS = 0
    app.conf.task_always_eager = False
    yield
    app.conf.task_always_eager = True


def test_a_worker_runs_the_analysis_of_an_ended_call(owner, make_agent, broker_mode):
    with app.connection_for_write() as connection:
        assert connection.transport.driver_type == ("redis" if settings.REDIS_URL else "memory")
    done = threading.Event()

    call = call_start(agent=make_agent(owner.organization), channel="web")

    def finished(sender=None, task_id=None, task=None, args=None, **kwargs):
        # This call's task: the broker may still hold tasks that other runs queued with no worker to run them.
        if task is not None and task.name == "realtime.analyze_call" and str(call.pk) in map(str, args or ()):
            done.set()

    call_message_add(call=call, role="user", content="I would like to book a table for four people.")
    started = time.monotonic()
    call_finish(call=call, status="completed")
    assert time.monotonic() - started < 1.0
    url = f"/public/v1/calls/{call.pk}"
    assert owner.client.get(url).json()["analysis"]["status"] == "pending"  # on the broker: no worker yet

    task_postrun.connect(finished, weak=False)
    try:
        with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
            assert done.wait(timeout=120), "the worker did not run the analysis task"
    finally:
        task_postrun.disconnect(finished)

    analysis = owner.client.get(url).json()["analysis"]
    assert analysis["status"] == "completed"
    assert analysis["summary"] == "Caller: I would like to book a table for four people."
