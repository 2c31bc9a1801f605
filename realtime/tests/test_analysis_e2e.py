"""Post-call analysis end to end: the embedded brain fills the plan's fields from what a caller said in a
real spoken call, talking to the project's ASGI application in the test's event loop (testing/inprocess.py);
the analysis runs where BACKGROUND_WORK places it (inline in the tests: as the call ends). An analysis whose
server process was killed (SIGKILL) while it ran, resumed by the next start of a server on the same
database, needs real processes: voiceagent/tests/test_restarts.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from agents.analysis_plan import normalize_plan
from realtime.tests.test_agent_e2e import ASK_ORDER, SHIPPED, olive
from testing.conversations import Caller, Exchange, conversation
from testing.inprocess import LOOPBACK, InProcessServer, serving
from testing.voice import record_voice
from testing.waiting import polled_sync
from testing.webhooks import LoopbackReceiver, Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

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


@pytest.fixture
def server(settings: Any) -> Iterator[InProcessServer]:
    with serving(settings, LOOPBACK) as started:
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
