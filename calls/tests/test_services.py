"""The write path used by the voice engine: start, transcript, tool log, model usage, finish."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from calls import services, tasks
from calls.models import AgentLog, Call, CallMessage, LlmUsage, ToolInvocation
from calls.sequence import next_sequence


def test_start_call_keeps_the_agent_name_of_call_time(owner, agent):
    call = services.call_start(agent=agent, channel="phone", from_number="+14155550100", to_number="+14155550199")
    agent.name = "Renamed"
    agent.save(update_fields=["name"])

    body = owner.client.get(f"/public/v1/calls/{call.id}").json()
    assert body["agentName"] == "Support"
    assert body["status"] == "active"
    assert (body["fromNumber"], body["toNumber"]) == ("+14155550100", "+14155550199")
    assert body["usageClassification"] is None


def test_web_calls_get_stable_placeholder_numbers(agent):
    first = services.call_start(agent=agent, channel="web")
    second = services.call_start(agent=agent, channel="web")
    assert (first.from_number, first.to_number) == (second.from_number, second.to_number) == ("web-client", "web-agent")


def test_the_history_outlives_a_deleted_agent(owner, agent, call_lasting):
    call = call_lasting(12)
    agent.delete()

    body = owner.client.get(f"/public/v1/calls/{call.id}").json()
    assert body["agentName"] == "Support"
    assert body["agentId"] is None


@pytest.mark.parametrize(
    ("function", "kwargs"),
    [
        (services.call_start, {"channel": "fax"}),
        (services.call_message_add, {"role": "robot", "content": "hi"}),
        (services.call_message_add, {"role": "user", "content": None}),
        (
            services.call_tool_invocation_add,
            {"tool_name": "t", "request": {}, "response": "", "status": "weird", "duration_ms": 1},
        ),
        (
            services.call_tool_invocation_add,
            {"tool_name": "t", "request": [], "response": "", "status": "success", "duration_ms": 1},
        ),
        (services.call_finish, {"status": "active"}),
    ],
)
def test_invalid_arguments_are_refused_without_writing(agent, function, kwargs):
    call = services.call_start(agent=agent, channel="web")
    target = {"agent": agent} if function is services.call_start else {"call": call}
    with pytest.raises(ValueError):
        function(**target, **kwargs)
    assert Call.objects.count() == 1
    assert Call.objects.get().status == "active"
    assert not CallMessage.objects.exists() and not ToolInvocation.objects.exists()


def test_the_detail_holds_messages_in_order_the_tool_log_and_model_usage(owner, agent):
    call = services.call_start(agent=agent, channel="web")
    same_time = timezone.now()
    services.call_message_add(call=call, role="system", content="You are Support.", occurred_at=same_time)
    services.call_message_add(call=call, role="user", content="Where is my order 42?", occurred_at=same_time)
    services.call_message_add(call=call, role="assistant", content="Let me check that.", occurred_at=same_time)
    tool_id = uuid.uuid4()
    services.call_tool_invocation_add(
        call=call,
        tool_name="order_status",
        request={"orderId": 42},
        response='{"status": "shipped"}',
        status="success",
        duration_ms=120,
        agent_tool_id=tool_id,
    )
    services.call_tool_invocation_add(
        call=call, tool_name="search_knowledge", request={"query": "x"}, response="", status="timeout", duration_ms=3000
    )
    services.call_llm_usage_add(call=call, provider="openai", model="gpt-x", input_tokens=120, output_tokens=30)
    services.call_llm_usage_add(
        call=call, provider="xai", model="grok-voice", input_audio_seconds=2.5, output_audio_seconds=1.25
    )
    services.call_message_add(call=call, role="assistant", content="It shipped yesterday.")
    services.call_finish(call=call, status="completed")

    body = owner.client.get(f"/public/v1/calls/{call.id}").json()
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "assistant"]
    assert body["messages"][1]["content"] == "Where is my order 42?"
    assert body["toolInvocations"] == 2
    log = body["toolInvocationsLog"]
    assert [t["toolName"] for t in log] == ["order_status", "search_knowledge"]
    assert log[0]["agentToolId"] == str(tool_id) and log[1]["agentToolId"] is None
    assert log[0]["request"] == {"orderId": 42} and log[0]["response"] == '{"status": "shipped"}'
    assert (log[0]["status"], log[0]["durationMs"], log[1]["status"]) == ("success", 120, "timeout")
    usage = body["llmUsage"]
    assert [(u["provider"], u["inputTokens"], u["outputTokens"]) for u in usage] == [("openai", 120, 30), ("xai", 0, 0)]
    assert usage[1]["inputAudioSeconds"] == 2.5 and usage[1]["outputAudioSeconds"] == 1.25
    assert "Where is my order 42?" in body["summary"]
    assert "You are Support" not in body["summary"]


def test_finish_is_idempotent(owner, call_lasting):
    call = call_lasting(25)
    first = (call.ended_at, call.billable_seconds, call.included_seconds, call.status)

    again = services.call_finish(call=call, status="failed")
    stale_object = Call.objects.get(pk=call.pk)
    stale_object.status = "active"  # a second socket handler still holding an old copy
    services.call_finish(call=stale_object, status="completed")

    row = Call.objects.get(pk=call.pk)
    assert (row.ended_at, row.billable_seconds, row.included_seconds, row.status) == first
    assert again.status == "completed"
    assert sum(Call.objects.values_list("included_seconds", flat=True)) == 30


def test_summary_is_short_and_extractive(agent):
    call = services.call_start(agent=agent, channel="web")
    services.call_message_add(call=call, role="user", content="Hi. I need to change the delivery address of my order.")
    for _ in range(30):
        services.call_message_add(call=call, role="assistant", content="Could you repeat that? " * 3)
    services.call_message_add(call=call, role="assistant", content="Your order delivery address is now updated.")
    services.call_finish(call=call, status="completed")

    summary = Call.objects.get(pk=call.pk).summary
    assert summary.startswith("Caller: ")
    assert "delivery address" in summary
    assert len(summary) <= 500


def test_an_empty_transcript_has_an_empty_summary(call_lasting):
    assert call_lasting(3).summary == ""


@pytest.mark.django_db(transaction=True)
async def test_the_write_path_records_a_whole_call_from_async_code(owner, make_agent, thread_connections_closed):
    from asgiref.sync import sync_to_async
    from channels.db import database_sync_to_async

    agent = await sync_to_async(make_agent)(owner.organization, status="active")
    call = await database_sync_to_async(services.call_start)(agent=agent, channel="web")
    await database_sync_to_async(services.call_message_add)(call=call, role="user", content="Hello there.")
    await database_sync_to_async(services.call_tool_invocation_add)(
        call=call, tool_name="lookup", request={"q": 1}, response="ok", status="error", duration_ms=7
    )
    await database_sync_to_async(services.call_llm_usage_add)(
        call=call, provider="embedded", model="responder", input_tokens=4
    )
    finished = await database_sync_to_async(services.call_finish)(call=call, status="failed")
    again = await database_sync_to_async(services.call_finish)(call=call, status="completed")

    assert finished.status == again.status == "failed"
    row = await Call.objects.aget(pk=call.pk)
    assert (row.status, row.tool_invocation_count) == ("failed", 1)
    assert await CallMessage.objects.filter(call=row).acount() == 1
    assert await LlmUsage.objects.filter(call=row).acount() == 1


def _age(call: Call, **delta) -> None:
    Call.objects.filter(pk=call.pk).update(started_at=timezone.now() - timedelta(**delta))


def test_stale_active_calls_are_closed_as_failed_at_their_last_activity(agent, settings):
    settings.CALLS_STALE_AFTER_SECONDS = 3600
    crashed = services.call_start(agent=agent, channel="phone")
    _age(crashed, hours=3)
    last_word = timezone.now() - timedelta(hours=3) + timedelta(seconds=95)
    services.call_message_add(call=crashed, role="user", content="Hello?", occurred_at=last_word)
    quiet_but_young = services.call_start(agent=agent, channel="phone")
    _age(quiet_but_young, minutes=30)
    long_but_alive = services.call_start(agent=agent, channel="phone")
    _age(long_but_alive, hours=3)
    services.call_message_add(call=long_but_alive, role="user", content="Still here.")

    assert tasks.close_stale_calls.delay().get() == 1

    crashed.refresh_from_db()
    assert crashed.status == "failed"
    assert crashed.ended_at == last_word
    assert crashed.duration_seconds in (94, 95)
    assert crashed.billable_seconds == 100
    assert Call.objects.get(pk=quiet_but_young.pk).status == "active"
    assert Call.objects.get(pk=long_but_alive.pk).status == "active"
    assert tasks.close_stale_calls.delay().get() == 0  # closing is done once


def test_the_maintenance_command_closes_stale_calls_and_purges_logs(agent, capsys):
    crashed = services.call_start(agent=agent, channel="web")
    _age(crashed, hours=2)
    AgentLog.objects.create(
        organization_id=agent.organization_id,
        agent=agent,
        session_id="abc123",
        timestamp=timezone.now() - timedelta(days=30),
        severity="info",
        content={"message": "old"},
        sequence=next_sequence(),
    )
    call_command("calls_maintenance")
    assert Call.objects.get(pk=crashed.pk).status == "failed"
    assert not AgentLog.objects.exists()
    assert json.loads(capsys.readouterr().out) == {
        "closedCalls": 1,
        "purgedLogs": 1,
        "failedDocuments": 0,
        "purgedSessionTokens": 0,
        "disabledWebhooks": 0,
        "purgedEvents": 0,
        # The closed call's analysis, pending since it was closed, is run by the sweep's next job.
        "resumedAnalyses": 1,
        "purgedRecordings": 0,
        "failedOutboundCalls": 0,
        "resumedTestRuns": 0,
    }


def test_a_request_no_longer_needed_is_logged_as_cancelled_and_shown_so(owner, agent, client):
    """Status cancelled (the caller interrupted, went on speaking or hung up): stored, in the API's log
    and drawn apart from failures on the call's page."""
    from django.contrib.auth.models import User

    call = services.call_start(agent=agent, channel="web")
    services.call_tool_invocation_add(
        call=call,
        tool_name="track_parcel",
        request={"parcel": "P-1"},
        response='{"cancelled":true}',
        status="cancelled",
        duration_ms=800,
    )
    services.call_finish(call=call, status="completed")
    log = owner.client.get(f"/public/v1/calls/{call.id}").json()["toolInvocationsLog"]
    assert [(t["toolName"], t["status"], t["response"]) for t in log] == [
        ("track_parcel", "cancelled", '{"cancelled":true}')
    ]
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    page = client.get(f"/admin/calls/call/{call.pk}/change/").content.decode()
    assert '<span class="status-cancelled">cancelled</span>' in page
    assert 'class="tool cancelled"' in page and 'class="tool failed"' not in page  # on the timeline, not a failure
