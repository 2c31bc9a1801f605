"""The call page's Analysis section: status, summary, fields and evaluation (the analysis content only for
staff who may read transcripts)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from agents.analysis_plan import normalize_plan
from calls import services
from calls.models import Call

SCHEMA = {
    "type": "object",
    "properties": {"party_size": {"type": "integer", "description": "How many people the table is for"}},
}


@pytest.fixture
def superuser_client(client: Any, db: Any) -> Any:
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


@pytest.fixture
def viewer_client(db: Any) -> Any:
    """Staff who may see calls but not what was said in them (a client of their own)."""
    user = User.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_call"))
    client = Client()
    client.force_login(user)
    return client


def ended(agent: Any, capture: Any | None = None) -> Call:
    call = services.call_start(agent=agent, channel="web")
    services.call_message_add(call=call, role="assistant", content="Hello, how can I help?")
    services.call_message_add(call=call, role="user", content="A table for four people tonight.")
    if capture is None:  # the analysis stays pending (its queue runs after the commit)
        return services.call_finish(call=call, status="completed")
    with capture(execute=True):
        return services.call_finish(call=call, status="completed")


def page(client: Any, call: Call) -> str:
    response = client.get(f"/admin/calls/call/{call.pk}/change/")
    assert response.status_code == 200
    return response.content.decode()


def test_the_call_page_shows_the_embedded_analysis(
    superuser_client, owner, make_agent, django_capture_on_commit_callbacks
):
    plan = normalize_plan(
        {"structuredData": {"schema": SCHEMA}, "successEvaluation": {"rubric": "A table was booked."}}
    )
    call = ended(make_agent(owner.organization, analysis_plan=plan), django_capture_on_commit_callbacks)
    html = page(superuser_client, call)

    assert "<h2>Analysis</h2>" in html
    assert 'Status: <strong class="status-completed">completed</strong>' in html
    assert 'successEvaluation: <span class="status-skipped">skipped</span>' in html
    summary = html.split('<p class="analysis-summary">')[1].split("</p>")[0]
    assert "Caller: A table for four people tonight." in summary
    assert "<tr><td>party_size</td><td>4</td></tr>" in html
    assert "the embedded brain does not evaluate calls" in html


def test_the_call_page_shows_a_stored_evaluation_and_hides_the_content_from_viewers(
    superuser_client, viewer_client, owner, make_agent
):
    call = ended(make_agent(owner.organization))
    assert "Runs in the background after the call" in page(superuser_client, call)
    stored = services.call_analysis_save(
        call_id=call.pk,
        analysis={
            "status": "completed",
            "summary": "The caller booked a table for four.",
            "successEvaluation": {"result": 7, "reasoning": "Booked, time unconfirmed.", "scale": "1-10"},
            "parts": {"summary": "completed", "successEvaluation": "completed"},
            "model": "gpt-4o-mini",
            "usage": {"inputTokens": 300, "outputTokens": 40},
        },
    )
    assert stored
    # Stored once: a second worker's result changes nothing.
    assert not services.call_analysis_save(call_id=call.pk, analysis={"status": "failed", "error": "late"})

    html = page(superuser_client, call)
    assert '<p class="analysis-evaluation"><strong>7 / 10</strong> (1-10): Booked, time unconfirmed.</p>' in html
    assert "model gpt-4o-mini · 300 input / 40 output tokens" in html

    hidden = page(viewer_client, call)
    assert 'Status: <strong class="status-completed">completed</strong>' in hidden
    assert "booked a table" not in hidden and "Booked, time unconfirmed" not in hidden
