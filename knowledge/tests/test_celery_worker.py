"""Ingestion through a real Celery worker on the broker the settings name (Redis when REDIS_URL is set,
Celery's in-memory transport otherwise): the upload answers while the document is `processing`, and the
worker makes it `ready`."""

from __future__ import annotations

import threading

import pytest
from celery.contrib.testing.worker import start_worker
from celery.signals import task_postrun
from django.conf import settings

from voiceagent.celery import app

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def broker_mode(settings):
    settings.BACKGROUND_WORK = "celery"  # queued on the broker on commit, as in production with REDIS_URL
    app.conf.task_always_eager = False
    yield
    app.conf.task_always_eager = True


def test_a_worker_ingests_an_uploaded_document(owner, make_agent, broker_mode):
    with app.connection_for_write() as connection:
        assert connection.transport.driver_type == ("redis" if settings.REDIS_URL else "memory")

    agent = make_agent(owner.organization)
    url = f"/public/v1/agents/{agent.id}/knowledge"
    response = owner.client.post(
        url, {"content": "# Parking\n\nVisitors park in bay 12 behind the office."}, format="json"
    )
    assert response.status_code == 200
    doc_id = response.json()["id"]
    # Queued on the broker, not run in-process: still processing before any worker exists.
    (item,) = owner.client.get(url).json()
    assert item["status"] == "processing" and item["chunkCount"] == 0

    done = threading.Event()

    def finished(sender=None, task_id=None, task=None, args=None, **kwargs):
        if task is not None and task.name == "knowledge.ingest_document" and args and args[0] == doc_id:
            done.set()

    task_postrun.connect(finished, weak=False)
    try:
        with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
            assert done.wait(timeout=120), "the worker did not run the ingestion task"
    finally:
        task_postrun.disconnect(finished)

    (item,) = owner.client.get(url).json()
    assert item["status"] == "ready" and item["chunkCount"] == 1 and item["error"] is None
