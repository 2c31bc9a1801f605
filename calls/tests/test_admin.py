"""Dashboard: call pages, transcripts for permitted staff only, usage of the period, CSV export."""

from __future__ import annotations

import csv
import io

import pytest
from django.contrib.auth.models import Permission, User

from calls import services
from calls.logging import LogSession, agent_log, flush_agent_logs

# What only the transcript and the tool requests hold: never a run of hex digits, which a call's or an
# organization's UUID may contain by chance.
CARD_SAID = "4111 1111 1111 1111"
CARD_LOOKED_UP = "card ending 4111"


def transcript_or_tool_request_in(text: str) -> bool:
    return CARD_SAID in text or CARD_LOOKED_UP in text


@pytest.fixture
def finished_call(agent):
    call = services.call_start(agent=agent, channel="phone", from_number="+14155550100")
    services.call_message_add(call=call, role="user", content=f"My card number is {CARD_SAID}.")
    services.call_tool_invocation_add(
        call=call, tool_name="lookup", request={"card": CARD_LOOKED_UP}, response="{}", status="success", duration_ms=3
    )
    return services.call_finish(call=call, status="completed")


def _staff(client, *, perms: tuple[str, ...], superuser: bool = False):
    user = User.objects.create_user("staff", password="pw", is_staff=True, is_superuser=superuser)
    for codename in perms:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    client.force_login(user)
    return client


def test_staff_with_the_transcript_permission_see_the_transcript(client, finished_call):
    _staff(client, perms=("view_call", "view_callmessage"))
    page = client.get(f"/admin/calls/call/{finished_call.pk}/change/").content.decode()
    assert CARD_SAID in page


def test_staff_without_it_see_the_call_but_not_the_transcript_or_tool_requests(client, finished_call):
    _staff(client, perms=("view_call",))
    response = client.get(f"/admin/calls/call/{finished_call.pk}/change/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "Support" in page
    assert not transcript_or_tool_request_in(page)


def test_non_staff_cannot_open_the_dashboard(client, finished_call):
    User.objects.create_user("visitor", password="pw")
    client.login(username="visitor", password="pw")
    response = client.get(f"/admin/calls/call/{finished_call.pk}/change/")
    assert response.status_code == 302


def test_usage_page_shows_the_current_period_per_organization(client, owner, call_lasting):
    plan = owner.organization.plan
    plan.included_minutes = 1
    plan.save(update_fields=["included_minutes"])
    call_lasting(50)
    call_lasting(40)  # 10 s included, 30 s overage
    _staff(client, perms=("view_call",))

    response = client.get("/admin/calls/call/usage/")

    assert response.status_code == 200
    row = next(r for r in response.context["usage"] if r["organization"] == owner.organization)
    assert row["calls"] == 2
    assert row["included_used_minutes"] == pytest.approx(1.0)
    assert row["overage_minutes"] == pytest.approx(0.5)
    assert row["remaining_minutes"] == 0
    assert "Acme" in response.content.decode()


def test_csv_export_of_selected_calls_has_usage_but_no_transcript(client, finished_call, call_lasting):
    other = call_lasting(61)
    _staff(client, perms=("view_call",), superuser=True)

    response = client.post(
        "/admin/calls/call/",
        {"action": "export_csv", "_selected_action": [str(finished_call.pk), str(other.pk)]},
    )

    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv"
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert {r["id"] for r in rows} == {str(finished_call.pk), str(other.pk)}
    exported = next(r for r in rows if r["id"] == str(other.pk))
    assert exported["durationSeconds"] == "61"
    assert float(exported["billableMinutes"]) == pytest.approx(70 / 60)
    assert exported["usageClassification"] == "included"
    assert exported["endedReason"] == "caller-hung-up"
    assert next(r for r in rows if r["id"] == str(finished_call.pk))["fromNumber"] == "+14155550100"
    exported_alone = client.post(
        "/admin/calls/call/", {"action": "export_csv", "_selected_action": [str(finished_call.pk)]}
    )
    assert not transcript_or_tool_request_in(b"".join(exported_alone.streaming_content).decode())


def test_agent_logs_are_listed_in_the_dashboard(client, agent):
    agent_log(LogSession(agent.organization_id, agent.id, "dash01"), "warn", "tool slow")
    flush_agent_logs()
    _staff(client, perms=("view_agentlog",))
    page = client.get("/admin/calls/agentlog/").content.decode()
    assert "tool slow" in page and "dash01" in page
