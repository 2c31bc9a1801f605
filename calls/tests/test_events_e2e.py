"""Call events end to end (issue 20): the outbox is delivered to receivers on loopback
(testing/webhooks.py), signed over the exact bytes, retried, in order, redelivered on request.

Who sends is BACKGROUND_WORK's (kit/background.py): a serving process's delivery loop, or Celery (a task per
delivery, beat's `calls.deliver_due_events` for what is due). The tests run background work `inline`, where
no loop runs: they send what is due through that task (eager here, in the test's process), as often as it
takes. Retries come after EVENTS_RETRY_BASE_SECONDS (20 ms, 40 ms, 80 ms... here: `quick_retries`), the
product's own backoff on its own clock; a wait is `polled_sync`, never a sleep. A browser call talks to the
project's ASGI application in the test's event loop (testing/inprocess.py). The delivery a restarted server
resumes needs real server processes: voiceagent/tests/test_restarts.py."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from calls import services
from calls.models import CallEvent
from calls.tasks import deliver_due_events
from kit.signing import signature
from testing.clients import VoiceClient, is_type
from testing.conversations import agent_for, issue, socket_url
from testing.fixtures import close_db_threads
from testing.inprocess import LOOPBACK, InProcessServer, serving
from testing.servers import free_port
from testing.waiting import polled_sync
from testing.webhooks import LoopbackReceiver, Received, Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback", "quick_retries")]
__all__ = ["close_db_threads"]  # fixtures

AGENT_SECRET = "whsec-agent-e2e-51xQ"


@pytest.fixture
def loopback(settings: Any) -> Any:
    """This process may save loopback webhook URLs, and send to them."""
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    return settings


@pytest.fixture
def quick_retries(settings: Any) -> Any:
    """Retries after 20 ms, 40 ms, 80 ms... (EVENTS_RETRY_BASE_SECONDS; 30 s by default)."""
    settings.EVENTS_RETRY_BASE_SECONDS = 0.02
    return settings


@pytest.fixture
def server(settings: Any, tmp_path: Path) -> Iterator[InProcessServer]:
    """The application in the test's loop; recordings in the test's folder."""
    with serving(settings, LOOPBACK, folder=tmp_path) as started:
        yield started


@pytest.fixture
def receivers() -> Iterator[Callable[..., LoopbackReceiver]]:
    """Receivers serving from threads (the deliveries are sent from the test's thread or a worker thread)."""
    started: list[LoopbackReceiver] = []

    def make(*replies: Reply) -> LoopbackReceiver:
        hook = LoopbackReceiver().reply(*replies).start()
        started.append(hook)
        return hook

    yield make
    for hook in started:
        hook.stop()


def deliver() -> int:
    """Send every due delivery: Celery beat's task (calls.deliver_due_events), run here (tasks are eager in
    the tests). How many attempts it made."""
    return deliver_due_events.delay().get()


def delivered(predicate: Callable[[], Any], *, timeout: float = 30, what: str = "") -> Any:
    """Send what is due until `predicate()` holds (a retry comes due after its backoff): its value."""

    def check() -> Any:
        deliver()
        return predicate()

    return polled_sync(check, what=what or str(predicate), timeout=timeout)


def signed(received: Received, secret: str) -> bool:
    expected = "sha256=" + hmac.new(secret.encode(), received.body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(received.headers.get("x-service-signature", ""), expected)


def webhook(owner: Any, url: str, events: list[str], **fields: Any) -> dict[str, Any]:
    response = owner.client.post("/public/v1/webhooks", {"url": url, "events": events, **fields}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def deliveries(owner: Any, **query: str) -> list[dict[str, Any]]:
    response = owner.client.get("/public/v1/webhook-deliveries", query)
    assert response.status_code == 200, response.json()
    return response.json()


def kinds(requests: list[Received]) -> list[tuple[str, str]]:
    return [(r.json()["message"]["type"], r.headers["x-service-attempt"]) for r in requests]


@pytest.fixture
def static_agent(owner: Any, make_agent: Any) -> Any:
    return make_agent(owner.organization, name="Desk", status="active", agent_type="static", server_url=None)


# --- a browser call ------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.usefixtures("close_db_threads")
async def test_a_browser_call_sends_started_ended_analyzed_in_order_signed_over_the_exact_bytes(
    server: InProcessServer, owner: Any, make_agent: Any, receivers: Any
) -> None:
    hook = receivers()
    agent = await sync_to_async(agent_for)(
        owner,
        make_agent,
        name="Olive",
        instructions="You help callers with the status of their orders.",
        agent_type="webhook",
        server_url=hook.url("/agent"),
        server_secret=AGENT_SECRET,
        server_headers={"X-Tenant": "acme"},
        recording_enabled=True,
    )
    org = await sync_to_async(webhook)(owner, hook.url("/org"), ["call.started", "call.ended", "call.analyzed"])
    token = await sync_to_async(issue)(agent)

    async with VoiceClient(socket_url(server, agent, token)) as client:
        started = await client.wait_for(is_type("session.started"), timeout=60)
        call_id = client.messages[started].message["callId"]
        await client.wait_for(is_type("transcript", role="assistant"), after=started, timeout=60)
        await client.send({"type": "stop"})
        assert await client.wait_closed() == 1000

    def arrived(path: str) -> list[Received]:
        return [r for r in hook.requests if r.path == path]

    # The analysis ran when the call ended (inline); its event follows the others.
    await sync_to_async(delivered)(lambda: len(arrived("/agent")) == 3 and len(arrived("/org")) == 3, what="6 events")
    detail = (await sync_to_async(owner.client.get)(f"/public/v1/calls/{call_id}")).json()
    for path, secret in (("/agent", AGENT_SECRET), ("/org", org["secret"])):
        requests = arrived(path)
        assert kinds(requests) == [("call.started", "1"), ("call.ended", "1"), ("call.analyzed", "1")]
        for received in requests:
            assert signed(received, secret), path
            message = received.json()["message"]
            assert received.headers["x-service-event-id"] == message["id"]
            assert received.headers["content-type"] == "application/json"
            assert message["call"]["id"] == call_id and message["createdAt"].endswith("Z")
        assert requests[0].json()["message"]["call"]["status"] == "active"
        ended = requests[1].json()["message"]["call"]
        # The call as GET /public/v1/calls/{id} returns it, with the transcript: at its end with the
        # analysis to come, then analysed.
        assert ended["status"] == "completed" and ended["analysis"]["status"] == "pending"
        # Why it ended, and where its recording is (signed links: each has an expiry of its own).
        assert ended["endedReason"] == "caller-hung-up"
        assert ended["recordingUrl"].startswith(f"{server.http_url}/public/v1/recordings/{call_id}?expires=")
        unsigned = {"analysis": None, "recordingUrl": None}
        assert {**ended, **unsigned} == {**detail, **unsigned}
        assert [m["role"] for m in ended["messages"]][:1] == ["assistant"]
        analyzed = requests[2].json()["message"]["call"]
        assert {**analyzed, "recordingUrl": None} == {**detail, "recordingUrl": None}
        assert analyzed["analysis"]["status"] in ("completed", "skipped")
    assert arrived("/agent")[0].headers["x-tenant"] == "acme"  # the agent's serverHeaders, as tool calls
    assert "x-tenant" not in arrived("/org")[0].headers

    # A delivery is marked succeeded once the receiver's answer is read.
    def all_succeeded() -> list[dict[str, Any]] | None:
        listed = deliveries(owner, callId=call_id)
        return listed if {d["status"] for d in listed} == {"succeeded"} else None

    listed = await sync_to_async(polled_sync)(all_succeeded, what="the deliveries marked succeeded")
    assert len(listed) == 6 and {d["status"] for d in listed} == {"succeeded"}
    assert all(d["attemptLog"][0]["statusCode"] == 200 for d in listed)


# --- retries, order, final failures, redelivery ----------------------------------------------------


def test_500_twice_then_200_gets_the_same_event_three_times_and_later_events_wait(
    owner: Any, static_agent: Any, receivers: Any
) -> None:
    hook = receivers(Reply(status=500, body="busy"), Reply(status=500, body="busy"))
    org = webhook(owner, hook.url(), ["call.started", "call.ended", "call.analyzed"])

    call = services.call_start(agent=static_agent, channel="web")
    services.call_finish(call=call, status="completed")

    delivered(lambda: len(hook.requests) == 5, what="5 requests")
    assert kinds(hook.requests) == [
        ("call.started", "1"),
        ("call.started", "2"),
        ("call.started", "3"),
        ("call.ended", "1"),
        ("call.analyzed", "1"),
    ]
    first_three = hook.requests[:3]
    started = CallEvent.objects.get(call=call, event_type="call.started")
    assert {r.headers["x-service-event-id"] for r in first_three} == {str(started.id)}
    assert {r.body for r in first_three} == {started.body.encode()}  # the same bytes every time
    assert all(signed(r, org["secret"]) for r in hook.requests)

    [delivery] = polled_sync(
        lambda: [
            d
            for d in deliveries(owner, callId=str(call.pk))
            if d["eventType"] == "call.started" and d["status"] == "succeeded"
        ],
        what="call.started recorded as succeeded",
    )
    log = delivery["attemptLog"]
    assert [(a["attempt"], a["statusCode"], a["succeeded"]) for a in log] == [
        (1, 500, False),
        (2, 500, False),
        (3, 200, True),
    ]
    assert log[0]["error"] == "HTTP 500" and log[0]["responseSnippet"] == "busy" and log[0]["nextAttemptAt"]
    assert delivery["attempts"] == 3 and delivery["webhookId"] == org["id"]


def test_a_400_is_final_and_redeliver_sends_it_again(owner: Any, static_agent: Any, receivers: Any) -> None:
    hook = receivers(Reply(status=400, json={"error": "unknown"}))
    # A second endpoint that answers 500 is retried (after 20 ms, then 40 ms): its third attempt shows the
    # sender has passed over the 400's delivery through several backoff periods.
    retried = receivers(*[Reply(status=500, json={"error": "busy"})] * 3)
    webhook(owner, hook.url(), ["call.started"])
    webhook(owner, retried.url(), ["call.started"])
    call = services.call_start(agent=static_agent, channel="web")

    [failed] = delivered(
        lambda: [d for d in deliveries(owner, status="failed") if d["lastStatusCode"] == 400],
        what="the failed delivery",
    )
    assert failed["attempts"] == 1 and failed["nextAttemptAt"] is None
    assert failed["attemptLog"][0]["nextAttemptAt"] is None
    delivered(lambda: len(retried.requests) >= 3, what="the other endpoint's third attempt")
    assert len(hook.requests) == 1  # no retry came

    answered = owner.client.post(f"/public/v1/webhook-deliveries/{failed['id']}/redeliver")
    assert answered.status_code == 202
    delivered(
        lambda: [d for d in deliveries(owner, status="succeeded") if d["id"] == failed["id"]], what="the redelivery"
    )
    assert kinds(hook.requests) == [("call.started", "1"), ("call.started", "2")]
    assert hook.requests[0].body == hook.requests[1].body
    assert hook.requests[1].headers["x-service-event-id"] == str(CallEvent.objects.get(call=call).id)


def test_after_a_rotation_events_are_signed_with_the_new_secret(owner: Any, static_agent: Any, receivers: Any) -> None:
    hook = receivers()
    created = webhook(owner, hook.url(), ["call.started"])
    rotated = owner.client.post(f"/public/v1/webhooks/{created['id']}/rotate-secret").json()
    services.call_start(agent=static_agent, channel="web")

    [received] = delivered(lambda: hook.requests, what="the event")
    assert signed(received, rotated["secret"]) and not signed(received, created["secret"])


def test_senders_reaching_for_one_due_delivery_at_once_send_it_once(owner: Any, static_agent: Any) -> None:
    """A process's sender threads, its start-up resend and other processes' senders may take the same due
    delivery at the same moment (on PostgreSQL each claim waits on the other's row lock): one sends it."""
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    from django.db import connections

    from calls.webhooks import events

    rounds, senders = 6, 8
    with LoopbackReceiver() as hook:
        webhook(owner, hook.url(), ["call.started"])
        for done in range(1, rounds + 1):  # the race is won or lost within a millisecond: several rounds
            call = services.call_start(agent=static_agent, channel="web")
            [pending] = deliveries(owner, callId=str(call.id))
            barrier = Barrier(senders)

            def send(_: int, delivery_id: str = pending["id"], barrier: Barrier = barrier) -> bool:
                barrier.wait()
                try:
                    return events.deliver_one(delivery_id)
                finally:
                    connections.close_all()

            with ThreadPoolExecutor(senders) as pool:
                sent = list(pool.map(send, range(senders)))  # a sender's error is raised here
            # One of them sent it (no other sender runs in this process: background work is inline).
            assert sent.count(True) == 1
            assert len(hook.requests) == done  # sent before deliver_one returned
        polled_sync(
            lambda: {d["status"] for d in deliveries(owner)} == {"succeeded"}, what="every delivery marked sent"
        )
        assert len(hook.requests) == rounds


# --- the receivers of docs/reference/webhooks.md -------------------------------------------------------------


def doc_receivers() -> dict[str, str]:
    """The Python and Node receivers of docs/reference/webhooks.md, as printed there."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "webhooks.md").read_text()
    section = text.split("### A receiver in about ten lines", 1)[1]
    return {
        "python": re.search(r"```python\n(.*?)```", section, re.S).group(1),  # type: ignore[union-attr]
        "node": re.search(r"```js\n(.*?)```", section, re.S).group(1),  # type: ignore[union-attr]
    }


def post(url: str, body: bytes, signature: str) -> int:
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json", "x-service-signature": signature}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.parametrize("language", ["python", "node"])
def test_the_documented_receivers_accept_signed_events_once_and_refuse_the_rest(
    owner: Any, static_agent: Any, tmp_path: Path, language: str
) -> None:
    code = doc_receivers()[language]
    assert len([line for line in code.splitlines() if line.strip()]) <= 14, "a receiver in about ten lines"
    port = free_port()
    created = webhook(owner, f"http://127.0.0.1:{port}/events", ["call.started", "call.ended"])
    source = tmp_path / ("receiver.py" if language == "python" else "receiver.js")
    source.write_text(code)
    command = [sys.executable if language == "python" else "node", str(source)]
    env = {**os.environ, "WEBHOOK_SECRET": created["secret"], "PORT": str(port)}
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        polled_sync(lambda: _listening(port), timeout=15, what="the receiver")
        call = services.call_start(agent=static_agent, channel="web")
        delivered(lambda: deliveries(owner, status="succeeded"), what="the delivery")
        event = CallEvent.objects.get(call=call)
        body = event.body.encode()
        url = f"http://127.0.0.1:{port}/events"
        assert post(url, body, signature(created["secret"], body)) == 200  # a duplicate: accepted, not handled again
        assert post(url, body, signature("whsec_wrong", body)) == 401
        assert post(url, body + b" ", signature(created["secret"], body)) == 401  # bytes changed
        old = json.loads(body)
        old["message"].update(id=str(uuid.uuid4()), createdAt="2026-01-01T00:00:00.000000Z")
        old_body = json.dumps(old).encode()
        assert post(url, old_body, signature(created["secret"], old_body)) == 200  # signed, but too old: dropped
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=10)
    assert output.strip().splitlines() == [f"call.started {call.pk}"], output


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0
