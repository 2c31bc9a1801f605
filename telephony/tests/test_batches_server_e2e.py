"""The batch scheduler's Celery path: beat runs `telephony.batch_tick`, which places a batch created over
the public API. The scheduler of a serving process (BACKGROUND_WORK=inprocess: its own loop placing a batch
within its concurrency, and a server killed mid-batch and started again placing no recipient twice) needs
real server processes: voiceagent/tests/test_restarts.py; the scheduler's rules, on a hand-set clock:
test_batches_scheduler.py."""

from __future__ import annotations

import pytest
from django.conf import settings

from calls.models import Call
from telephony.services.numbers import phone_number_claim
from telephony.tasks import run_batch_tick

pytestmark = [pytest.mark.django_db(transaction=True)]


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
