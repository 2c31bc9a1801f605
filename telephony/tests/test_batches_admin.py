"""Dashboard: campaigns (call batches) with progress and outcomes, a campaign's page with its recipients and calls, and
the pause/resume/cancel actions (the API's services)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from telephony.campaigns.services import batch_tick
from telephony.models import CallBatch
from telephony.services.numbers import phone_number_claim


@pytest.fixture
def staff(client):
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


@pytest.fixture
def batch(owner, make_agent, outbound_ready):
    agent = make_agent(owner.organization, name="Ava", status="active")
    number = phone_number_claim(organization=owner.organization, number="+14155550100")
    response = owner.client.post(
        "/public/v1/call-batches",
        {
            "name": "Spring reminders",
            "agentId": str(agent.id),
            "phoneNumberId": str(number.id),
            "recipients": [{"to": f"+1415555{1000 + i}", "variables": {"first": f"P{i}"}} for i in range(4)],
            "concurrency": 2,
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    return CallBatch.objects.get(pk=response.json()["id"])


def act(staff, action, batch):
    return staff.post(
        "/admin/telephony/callbatch/", {"action": action, "_selected_action": [str(batch.pk)]}, follow=True
    ).content.decode()


def test_the_list_shows_progress_and_outcomes(staff, batch, owner):
    batch_tick()
    owner.client.post(f"/public/v1/call-batches/{batch.pk}/cancel")  # 2 pending -> canceled
    page = staff.get("/admin/telephony/callbatch/").content.decode()
    assert "Spring reminders" in page and "Ava" in page
    assert "2/4" in page and "canceled 2" in page


def test_the_batch_page_lists_recipients_and_calls(staff, batch):
    batch_tick()
    page = staff.get(f"/admin/telephony/callbatch/{batch.pk}/change/").content.decode()
    assert "+14155551003" in page and "first=P3" in page
    assert "calling" in page and "queued" in page and "2 calls in all" in page


def test_the_actions_pause_resume_and_cancel(staff, batch):
    assert "1 campaign paused." in act(staff, "pause", batch)
    batch.refresh_from_db()
    assert batch.status == "paused"
    assert "A paused batch cannot be paused" in act(staff, "pause", batch)
    assert "1 campaign resumed." in act(staff, "resume", batch)
    assert "1 campaign canceled." in act(staff, "cancel", batch)
    batch.refresh_from_db()
    assert batch.status == "canceled"
