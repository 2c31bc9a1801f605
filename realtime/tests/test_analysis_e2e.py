"""Post-call analysis through real Daphne processes: the embedded brain fills the plan's fields from what
a caller said in a real spoken call, and an analysis whose server process was killed (SIGKILL) while it
ran is resumed by the next start of a server on the same database."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from agents.analysis_plan import normalize_plan
from calls.models import Call
from calls.services import call_message_add, call_start
from realtime.tests.test_agent_e2e import ASK_ORDER, SHIPPED, olive
from testing.chat_server import ChatServer, Text
from testing.conversations import Caller, Exchange, conversation
from testing.daphne import DaphneServer, shared_test_server, start_test_server, stop_test_server
from testing.voice import record_voice
from testing.waiting import polled_sync
from testing.webhooks import LoopbackReceiver, Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

# The embedded default (no broker: the server's own background worker), also when the suite has REDIS_URL.
LOOPBACK = {"OUTBOUND_ALLOWED_NETWORKS": "127.0.0.0/8"}  # the server calls the tools on this machine
EMBEDDED = {"REDIS_URL": ""}
ORDER_PLAN = {
    "structuredData": {
        "schema": {
            "type": "object",
            "properties": {
                "order_number": {"type": "string", "description": "The order number the caller asked about"},
                "email": {"type": "string", "format": "email", "description": "The caller's e-mail address"},
            },
        }
    }
}
BOOKING = {
    "type": "object",
    "properties": {"name": {"type": "string", "description": "The caller's full name"}},
    "required": ["name"],
}


@pytest.fixture(scope="module")
def server(django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: Any) -> Iterator[DaphneServer]:
    with shared_test_server(django_db_blocker, tmp_path_factory, "analysis", {**LOOPBACK, **EMBEDDED}) as started:
        yield started


@pytest.fixture(scope="module")
def voice(tmp_path_factory: Any) -> dict[str, bytes]:
    return record_voice((ASK_ORDER,), tmp_path_factory.mktemp("voice"))


def analysis_when_done(owner: Any, call_id: Any, timeout: float = 60) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        response = owner.client.get(f"/public/v1/calls/{call_id}")
        assert response.status_code == 200, response.content
        analysis = response.json()["analysis"]
        return analysis if analysis and analysis["status"] != "pending" else None

    return polled_sync(done, timeout=timeout, what=f"the analysis of call {call_id}", every=0.1)


async def test_the_embedded_brain_fills_the_plans_fields_from_what_the_caller_said(
    server, voice, owner, make_agent, realtime_settings
):
    with LoopbackReceiver(Reply(json={"message": SHIPPED})) as hook:
        agent, _ = await sync_to_async(olive)(owner, make_agent, hook)
        agent.analysis_plan = normalize_plan(ORDER_PLAN)
        await sync_to_async(agent.save)(update_fields=["analysis_plan"])

        async def talk(caller: Caller) -> tuple[str, Exchange]:
            exchange = await caller.say(ASK_ORDER)
            await caller.hang_up()
            return caller.call_id, exchange

        call_id, exchange = await conversation(server, agent, voice, talk)
    assert exchange.said == SHIPPED, exchange.heard

    analysis = await sync_to_async(analysis_when_done)(owner, call_id)
    assert analysis["status"] == "completed", analysis
    # The order number the caller said (the tool got the same); no e-mail address was said.
    assert analysis["structuredData"] == {"order_number": "3561"}, exchange.heard
    assert analysis["parts"] == {"summary": "completed", "structuredData": "completed"}
    assert f"Caller: {exchange.heard}" in analysis["summary"] and analysis["model"] == "embedded"


def test_an_analysis_killed_with_its_server_is_resumed_when_a_server_starts_again(owner, make_agent, tmp_path_factory):
    with ChatServer() as chat:
        env = {
            **EMBEDDED,
            "LLM_PROVIDER": "openai",
            "LLM_BASE_URL": chat.base_url,
            "LLM_MODEL": "scripted-model",
            "CALLS_MAINTENANCE_AT_START": "true",
            "CALLS_STALE_AFTER_SECONDS": "60",
        }
        # A call its server process left active two hours ago: the next server's start-up sweep closes it,
        # which marks its analysis pending and queues it on that server's background worker.
        agent = make_agent(owner.organization, analysis_plan=normalize_plan({"structuredData": {"schema": BOOKING}}))
        call = call_start(agent=agent, channel="web")
        long_ago = timezone.now() - timedelta(hours=2)
        call_message_add(call=call, role="user", content="Hi, this is Dana Smith.", occurred_at=long_ago)
        Call.objects.filter(pk=call.pk).update(started_at=long_ago - timedelta(seconds=5))

        # The first server takes the analysis; the model takes its time, and the server is killed.
        chat.analysis(Text(json.dumps({"summary": "Never sent."}), delay=120))
        first = start_test_server(tmp_path_factory, "analysis-killed", env)
        try:
            chat.until_sync(lambda: len(chat.analysis_requests) == 1, timeout=60, what="the first server's request")
            assert first.process is not None
            first.process.kill()
            first.process.wait()
        finally:
            stop_test_server(first)
        row = Call.objects.get(pk=call.pk)
        assert (row.status, row.analysis_status) == ("failed", "pending")
        assert row.analysis_claimed_at is not None  # taken by the dead process
        # The next server sweeps as it starts (within a second): its lease (1 s, below) must be over by then.
        claimed = row.analysis_claimed_at
        polled_sync(lambda: timezone.now() - claimed > timedelta(seconds=1.5), timeout=10, what="the lease's end")

        # The next server's start-up sweep resumes it once the dead worker's lease is over.
        chat.analysis(
            Text(json.dumps({"summary": "Dana Smith called and hung up."}), usage=(90, 12)),
            Text(json.dumps({"name": "Dana Smith"}), usage=(110, 6)),
        )
        second = start_test_server(tmp_path_factory, "analysis-resumed", {**env, "CALL_ANALYSIS_LEASE_SECONDS": "1"})
        try:
            analysis = analysis_when_done(owner, call.pk)
        finally:
            stop_test_server(second)
    assert analysis == {
        "status": "completed",
        "summary": "Dana Smith called and hung up.",
        "structuredData": {"name": "Dana Smith"},
        "successEvaluation": None,
        "parts": {"summary": "completed", "structuredData": "completed"},
        "model": "scripted-model",
        "usage": {"inputTokens": 200, "outputTokens": 18},
        "error": None,
    }
    assert len(chat.analysis_requests) == 3
