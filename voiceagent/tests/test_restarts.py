"""Restarts: what a serving process leaves half-done when it is killed (SIGKILL: no disconnect handler, no
shutdown hook) or stopped, and what the next process started on the same database makes of it. The one
module whose tests need a real server process (testing/daphne.py) to die and another to start: the rest of
call events, analyses, upkeep and batches runs on the in-process application or through the product's
entry points (calls/tests/test_events_e2e.py, realtime/tests/test_analysis_e2e.py, ...).

What it proves:

- a call event pending while the server restarts is delivered by the next server (its start-up resend),
  the same event and bytes, a later attempt;
- a post-call analysis killed with its server is resumed by the next server's start-up sweep once the dead
  worker's lease is over, and completed once;
- a call orphaned by a killed process is failed by the restarted server's sweep without a new call, ended
  and billed at its last sign of life; a live call of the running server is never closed by its timer,
  another crash's orphan is, within a sweep interval;
- the upload of a document answers before its ingestion (on the server's background worker) runs, and a
  document whose ingestion was killed does not stay `processing`;
- a server's batch scheduler places a batch within its concurrency and goes on as calls end, and a server
  killed mid-batch and started again places no recipient twice.

Every test kills or stops its own server (a process that outlived one test would carry its state, timers
and sweeps into the next test's database), and the two servers of a test are started with the settings
that test is about; they are forked from the warm process of testing/server_forker.py, so a start costs
about a second. Their timers are the servers' own (seconds), bounded by `polled_sync`: no sleep.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from agents.analysis_plan import normalize_plan
from calls import services as call_services
from calls.models import OPEN_STATUSES, Call, CallEvent, CallMessage
from realtime import tokens
from telephony.models import CallBatch, OutboundCall
from telephony.services.numbers import phone_number_claim
from testing.chat_server import ChatServer, Text
from testing.clients import VoiceClient, is_type
from testing.daphne import DaphneServer, start_test_server, stop_test_server, wait_until_indexed
from testing.fixtures import close_db_threads, realtime_settings
from testing.twilio_webhooks import make_account, public_settings
from testing.waiting import polled_sync
from testing.webhooks import LoopbackReceiver

# Slow, and about server processes sharing the database and Redis: the PostgreSQL suite runs it too.
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    pytest.mark.processes,
    pytest.mark.usefixtures("close_db_threads"),
]
__all__ = ["close_db_threads", "public_settings", "realtime_settings"]  # fixtures

# The embedded default (no broker: the server's own background worker), also when the suite has REDIS_URL.
EMBEDDED = {"REDIS_URL": ""}
# A sweep every second; a heartbeat every second, a process silent for 5 s counts as dead.
SWEEP = {
    "CALLS_MAINTENANCE_AT_START": "true",
    "CALLS_MAINTENANCE_SECONDS": "1",
    "LIVENESS_HEARTBEAT_SECONDS": "1",
    "LIVENESS_EXPIRY_SECONDS": "5",
}
GREETING = "Hello, this is Ava from Acme. How can I help you today?"


# --- the servers ----------------------------------------------------------------------------------


@contextmanager
def running(logs: Any, name: str, env: dict[str, str], *, public: bool = False) -> Iterator[DaphneServer]:
    """A server process on the test database for the block, stopped (and its connections gone) after it;
    one the block killed is only waited for."""
    server = start_test_server(logs, name, env, public=public)
    try:
        yield server
    finally:
        stop_test_server(server)


def kill(server: DaphneServer) -> None:
    """SIGKILL: no disconnect handler, no shutdown hook, nothing of the process runs any more."""
    assert server.process is not None
    server.process.kill()
    server.process.wait()


def api(server: DaphneServer, key: str, method: str, path: str, body: Any = None, timeout: float = 30) -> Any:
    request = urllib.request.Request(
        server.http_url + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        raise AssertionError(f"{method} {path}: {error.code} {error.read()[:500]!r}") from None


def wait_until(predicate: Callable[[], Any], *, timeout: float, what: str) -> Any:
    return polled_sync(predicate, what=what, timeout=timeout)


def parse_time(value: str) -> Any:
    from datetime import datetime

    return datetime.fromisoformat(value.replace("Z", "+00:00"))


# --- call events: a restart resends what is pending -------------------------------------------------

# The server's delivery worker looks for due rows often; the first retry waits 2 s (past the restart).
EVENTS = {
    "OUTBOUND_ALLOWED_NETWORKS": "127.0.0.0/8",
    "EVENTS_RETRY_BASE_SECONDS": "2",
    "EVENTS_POLL_SECONDS": "0.2",
}


def deliveries(owner: Any, **query: str) -> list[dict[str, Any]]:
    response = owner.client.get("/public/v1/webhook-deliveries", query)
    assert response.status_code == 200, response.json()
    return response.json()


def test_an_event_pending_while_the_server_restarts_is_delivered_after_the_restart(
    owner: Any, make_agent: Any, settings: Any, tmp_path_factory: Any
) -> None:
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]  # this process saves the loopback URL
    agent = make_agent(owner.organization, name="Desk", status="active", agent_type="static", server_url=None)
    hook = LoopbackReceiver()  # its port is known; nothing listens there yet
    created = owner.client.post("/public/v1/webhooks", {"url": hook.url(), "events": ["call.started"]}, format="json")
    assert created.status_code == 201, created.json()
    with running(tmp_path_factory, "events-before", EVENTS):
        call = call_services.call_start(agent=agent, channel="web")
        [pending] = wait_until(
            lambda: [d for d in deliveries(owner) if d["attempts"] >= 1], timeout=30, what="a failed attempt"
        )
        assert pending["status"] == "pending" and "Could not connect" in pending["lastError"]

    with hook, running(tmp_path_factory, "events-after", EVENTS):
        wait_until(lambda: hook.requests, timeout=30, what="the delivery after the restart")
        # The server records the answer once it has read it, a moment after the receiver has the request.
        wait_until(
            lambda: {d["status"] for d in deliveries(owner)} == {"succeeded"}, timeout=30, what="the delivery recorded"
        )
    [received] = hook.requests
    event = CallEvent.objects.get(call=call)
    assert received.headers["x-service-event-id"] == str(event.id) and received.body == event.body.encode()
    assert int(received.headers["x-service-attempt"]) >= 2
    [delivered] = deliveries(owner)
    assert delivered["status"] == "succeeded" and delivered["attemptLog"][0]["error"].startswith("Could not connect")


# --- a post-call analysis killed with its server ----------------------------------------------------

BOOKING = {
    "type": "object",
    "properties": {"name": {"type": "string", "description": "The caller's full name"}},
    "required": ["name"],
}


def analysis_when_done(owner: Any, call_id: Any, timeout: float = 60) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        response = owner.client.get(f"/public/v1/calls/{call_id}")
        assert response.status_code == 200, response.content
        analysis = response.json()["analysis"]
        return analysis if analysis and analysis["status"] != "pending" else None

    return polled_sync(done, timeout=timeout, what=f"the analysis of call {call_id}", every=0.1)


def test_an_analysis_killed_with_its_server_is_resumed_when_a_server_starts_again(
    owner: Any, make_agent: Any, tmp_path_factory: Any
) -> None:
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
        call = call_services.call_start(agent=agent, channel="web")
        long_ago = timezone.now() - timedelta(hours=2)
        call_services.call_message_add(call=call, role="user", content="Hi, this is Dana Smith.", occurred_at=long_ago)
        Call.objects.filter(pk=call.pk).update(started_at=long_ago - timedelta(seconds=5))

        # The first server takes the analysis; the model takes its time, and the server is killed.
        chat.analysis(Text(json.dumps({"summary": "Never sent."}), delay=120))
        with running(tmp_path_factory, "analysis-killed", env) as first:
            chat.until_sync(lambda: len(chat.analysis_requests) == 1, timeout=60, what="the first server's request")
            kill(first)
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
        with running(tmp_path_factory, "analysis-resumed", {**env, "CALL_ANALYSIS_LEASE_SECONDS": "1"}):
            analysis = analysis_when_done(owner, call.pk)
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


# --- upkeep: a call and a document left by a killed process ------------------------------------------


@pytest.fixture
def ava(owner: Any, make_agent: Any, realtime_settings: Any) -> Any:
    return make_agent(owner.organization, name="Ava", status="active", greeting_type="static", static_greeting=GREETING)


async def test_a_call_orphaned_by_a_killed_process_is_failed_at_restart_without_a_new_call(
    ava: Any, owner: Any, tmp_path_factory: Any
) -> None:
    first = await sync_to_async(start_test_server)(tmp_path_factory, "crashed", SWEEP)
    token = tokens.issue_token(agent_id=ava.pk, organization_id=ava.organization_id)[0]
    async with VoiceClient(f"{first.ws_url}/ws/agents/{ava.pk}/realtime?token={token}") as client:
        started = await client.wait_for(is_type("session.started"), timeout=60)
        call_id = client.messages[started].message.get("callId")
        call = await sync_to_async(lambda: Call.objects.get(pk=call_id) if call_id else Call.objects.get())()
        # The greeting is in the transcript: the call has recorded activity.
        await sync_to_async(wait_until)(
            lambda: CallMessage.objects.filter(call=call).exists(), timeout=30, what="greeting stored"
        )
        await sync_to_async(kill)(first)
        killed_at = timezone.now()
    await sync_to_async(stop_test_server)(first)
    orphan = await sync_to_async(Call.objects.get)(pk=call.pk)
    assert orphan.status == "active" and orphan.heartbeat_at is not None
    last_activity = await sync_to_async(
        lambda: max(CallMessage.objects.filter(call=call).values_list("occurred_at", flat=True))
    )()
    last_sign_of_life = max(last_activity, orphan.heartbeat_at)

    # Restarted, and nobody calls: the sweep closes the orphan once its heartbeat is older than the
    # expiry (a few seconds here; LIVENESS_EXPIRY_SECONDS).
    second = await sync_to_async(start_test_server)(tmp_path_factory, "restarted", SWEEP)
    try:

        def closed() -> Any:
            detail = api(second, owner.api_key, "GET", f"/public/v1/calls/{call.pk}")
            return detail if detail["status"] != "active" else None

        detail = await sync_to_async(wait_until)(closed, timeout=20, what="the orphan call is still active")
        assert detail["status"] == "failed"
        # Ended, and billed, at its last sign of life (its last heartbeat or message), never after the crash.
        assert parse_time(detail["endedAt"]) == last_sign_of_life <= killed_at
        (greeting,) = detail["messages"]  # transcript kept
        assert greeting["role"] == "assistant" and greeting["content"].endswith(GREETING)
        # Billed for what was used: from the start to the last sign of life, not to the restart.
        lived = parse_time(detail["endedAt"]) - parse_time(detail["startedAt"])
        assert detail["durationSeconds"] == int(lived.total_seconds()) < 60
        assert not await sync_to_async(Call.objects.exclude(pk=call.pk).exists)()

        # A live call of the running server is never closed by its timer; another crash's orphan is,
        # within a sweep interval (the server's own timer, not a start-up sweep).
        token = tokens.issue_token(agent_id=ava.pk, organization_id=ava.organization_id)[0]
        async with VoiceClient(f"{second.ws_url}/ws/agents/{ava.pk}/realtime?token={token}") as live:
            await live.wait_for(is_type("session.started"), timeout=60)
            live_call = await sync_to_async(Call.objects.exclude(pk=call.pk).get)()
            # The live call outlives the expiry: its own process's heartbeat keeps it.
            await sync_to_async(wait_until)(
                lambda: (
                    (beat := Call.objects.get(pk=live_call.pk).heartbeat_at) is not None
                    and (beat - live_call.started_at).total_seconds() > 6
                ),
                timeout=20,
                what="the live call's heartbeat",
            )

            def another_orphan() -> Call:
                other = Call.objects.create(
                    organization_id=ava.organization_id,
                    agent=ava,
                    agent_name=ava.name,
                    channel="web",
                    from_number="web-client",
                    to_number="web-agent",
                    status="active",
                    started_at=live_call.started_at - timedelta(minutes=5),
                    heartbeat_at=live_call.started_at - timedelta(minutes=4),
                )
                return other

            other = await sync_to_async(another_orphan)()
            await sync_to_async(wait_until)(
                lambda: Call.objects.get(pk=other.pk).status == "failed", timeout=10, what="second orphan closed"
            )
            assert (await sync_to_async(Call.objects.get)(pk=live_call.pk)).status == "active"
            await live.send({"type": "stop"})
            assert await live.wait_closed() == 1000
    finally:
        await sync_to_async(stop_test_server)(second)


def test_a_document_whose_ingestion_was_killed_does_not_stay_processing(
    owner: Any, make_agent: Any, tmp_path_factory: Any
) -> None:
    agent = make_agent(owner.organization)
    path = f"/public/v1/agents/{agent.pk}/knowledge"

    def listed(server: DaphneServer) -> Callable[[], list[dict[str, Any]]]:
        return lambda: api(server, owner.api_key, "GET", path)

    # The embedded default (no broker) under test, also when the suite runs with REDIS_URL: ingestion on
    # the serving process's background worker (the broker path: knowledge/tests/test_celery_worker.py).
    with running(tmp_path_factory, "ingesting", {**EMBEDDED, **SWEEP}) as first:
        try:
            # An upload answers at once; the server's background worker makes the document ready.
            small = api(first, owner.api_key, "POST", path, {"content": "# Parking\n\nVisitors park in bay 12."})
            item = wait_until_indexed(listed(first), small["id"], timeout=120)
            assert (item["status"], item["chunkCount"], item["error"]) == ("ready", 1, None)

            # About 400 KiB of distinct paragraphs: several seconds of embedding, well past the upload's answer.
            content = "\n\n".join(
                f"## Section {n}\n\nParcel {n} leaves depot {n % 17} at {n % 24}:00 and reaches bay "
                f"{n * 7 % 101} after {n % 9 + 1} stops; drivers report delays on line {n % 13} to dispatch "
                f"desk {n % 5}."
                for n in range(2000)
            )
            created = api(first, owner.api_key, "POST", path, {"content": content, "name": "Depots"}, timeout=10)
            # The upload answered while the document is still being ingested in the background.
            assert [d["status"] for d in listed(first)() if d["id"] == created["id"]] == ["processing"]
        finally:
            kill(first)

    # Restarted: the sweep fails it, with the reason, once the dead process's heartbeat expired.
    with running(tmp_path_factory, "after-kill", {**EMBEDDED, **SWEEP}) as second:
        item = wait_until_indexed(listed(second), created["id"], timeout=15)
        assert item["status"] == "failed" and item["chunkCount"] == 0
        assert "did not finish" in item["error"] and "upload the document again" in item["error"]
        assert [d["status"] for d in listed(second)() if d["id"] == small["id"]] == ["ready"]


# --- call batches: the scheduler of a server, killed mid-batch ---------------------------------------

SCHEDULER = {"BATCH_TICK_SECONDS": "0.2"}  # the server's scheduler (BACKGROUND_WORK=inprocess)


@pytest.fixture
def outbound_ready(owner: Any, public_settings: Any) -> Any:
    """The owner's organization can place calls: this service's public URL and stream secret are set and
    the organization has a Twilio account (as telephony/tests/conftest.py's fixture)."""
    make_account(owner.organization)
    return owner


def open_calls(batch_id: Any) -> list[Call]:
    return list(Call.objects.filter(outbound__recipient__batch_id=batch_id, status__in=OPEN_STATUSES))


def placed(batch_id: Any) -> int:
    return Call.objects.filter(outbound__recipient__batch_id=batch_id).count()


def complete(call: Call) -> None:
    Call.objects.filter(pk=call.pk).update(status="active")  # answered (the stream attached)
    call_services.call_finish(call=Call.objects.get(pk=call.pk), status="completed")


def test_the_servers_scheduler_places_the_batch_and_a_restart_places_nothing_twice(
    owner: Any, outsider: Any, make_agent: Any, tmp_path_factory: Any, outbound_ready: Any
) -> None:
    agent = make_agent(owner.organization, name="Ava", status="active")
    number = phone_number_claim(organization=owner.organization, number="+14155550100")
    # Another organization's batch (its own account, number and limits) is the scheduler's clock: its
    # second call is placed by a later tick than its first, so ticks have passed over the owner's batch.
    other_agent = make_agent(outsider.organization, name="Olive", status="active")
    make_account(outsider.organization, account_sid="AC" + "7" * 32)
    other_number = phone_number_claim(organization=outsider.organization, number="+14155550101")
    with running(tmp_path_factory, "batches", SCHEDULER, public=True) as server:
        try:
            batch = api(
                server,
                owner.api_key,
                "POST",
                "/public/v1/call-batches",
                {
                    "name": "E2E",
                    "agentId": str(agent.id),
                    "phoneNumberId": str(number.id),
                    "recipients": [{"to": f"+1415555{1000 + i}"} for i in range(4)],
                    "concurrency": 2,
                },
            )
            polled_sync(lambda: len(open_calls(batch["id"])) == 2, timeout=20, what="the first two calls")
            other = api(
                server,
                outsider.api_key,
                "POST",
                "/public/v1/call-batches",
                {
                    "name": "Ticks",
                    "agentId": str(other_agent.id),
                    "phoneNumberId": str(other_number.id),
                    "recipients": [{"to": f"+1415555{2000 + i}"} for i in range(2)],
                    "concurrency": 1,
                },
            )
            polled_sync(lambda: len(open_calls(other["id"])) == 1, timeout=20, what="the other batch's first call")
            complete(open_calls(other["id"])[0])
            polled_sync(lambda: len(open_calls(other["id"])) == 1, timeout=20, what="the other batch's second call")
            complete(open_calls(other["id"])[0])
            assert len(open_calls(batch["id"])) == 2  # the ticks that placed the other batch's calls: still two
            complete(open_calls(batch["id"])[0])  # ends here; the server's next tick fills the slot
            polled_sync(lambda: placed(batch["id"]) == 3, timeout=20, what="the third call")
        finally:
            kill(server)  # the scheduler dies mid-batch
    for call in open_calls(batch["id"]):
        complete(call)
    with running(tmp_path_factory, "batches-restarted", SCHEDULER, public=True):
        polled_sync(lambda: placed(batch["id"]) == 4, timeout=20, what="the last call, after the restart")
        complete(open_calls(batch["id"])[0])
        polled_sync(lambda: CallBatch.objects.get(pk=batch["id"]).status == "completed", timeout=20, what="completion")
    links = OutboundCall.objects.filter(recipient__batch_id=batch["id"])
    assert sorted(links.values_list("recipient__position", flat=True)) == [0, 1, 2, 3]
