"""Upkeep starts with the serving process, through real Daphne processes killed with SIGKILL and
restarted on the same database: a call orphaned by the crash is closed with no new call, a document
whose ingestion died never stays `processing`, and the upload answers before ingestion runs (on the
server's background worker) and the document becomes `ready`."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from calls.models import Call, CallMessage
from realtime import tokens
from testing.clients import VoiceClient, is_type
from testing.daphne import DaphneServer, start_test_server, stop_test_server, wait_until_indexed
from testing.waiting import polled_sync

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("close_db_threads")]

GREETING = "Hello, this is Ava from Acme. How can I help you today?"
# A sweep every second; a heartbeat every second, a process silent for 5 s counts as dead.
SWEEP = {
    "CALLS_MAINTENANCE_AT_START": "true",
    "CALLS_MAINTENANCE_SECONDS": "1",
    "LIVENESS_HEARTBEAT_SECONDS": "1",
    "LIVENESS_EXPIRY_SECONDS": "5",
}


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


def kill(server: DaphneServer) -> None:
    """SIGKILL: no disconnect handler, no shutdown hook, nothing of the process runs any more."""
    assert server.process is not None
    server.process.kill()
    server.process.wait()


def parse_time(value: str) -> Any:
    from datetime import datetime

    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@pytest.fixture
def ava(owner: Any, make_agent: Any, realtime_settings: Any) -> Any:
    return make_agent(owner.organization, name="Ava", status="active", greeting_type="static", static_greeting=GREETING)


async def test_a_call_orphaned_by_a_killed_process_is_failed_at_restart_without_a_new_call(
    ava, owner, tmp_path_factory
):
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
    assert orphan.status == "active"
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

            def orphan() -> Call:
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

            other = await sync_to_async(orphan)()
            await sync_to_async(wait_until)(
                lambda: Call.objects.get(pk=other.pk).status == "failed", timeout=10, what="second orphan closed"
            )
            assert (await sync_to_async(Call.objects.get)(pk=live_call.pk)).status == "active"
            await live.send({"type": "stop"})
            assert await live.wait_closed() == 1000
    finally:
        await sync_to_async(stop_test_server)(second)


def test_a_document_whose_ingestion_was_killed_does_not_stay_processing(owner, make_agent, tmp_path_factory):
    agent = make_agent(owner.organization)
    path = f"/public/v1/agents/{agent.pk}/knowledge"

    def listed(server: DaphneServer) -> Callable[[], list[dict[str, Any]]]:
        return lambda: api(server, owner.api_key, "GET", path)

    # The embedded default (no broker) under test, also when the suite runs with REDIS_URL: ingestion on
    # the serving process's background worker (the broker path: knowledge/tests/test_celery_worker.py).
    embedded = {"REDIS_URL": ""}
    first = start_test_server(tmp_path_factory, "ingesting", {**embedded, **SWEEP})
    try:
        # An upload answers at once; the server's background worker makes the document ready.
        small = api(first, owner.api_key, "POST", path, {"content": "# Parking\n\nVisitors park in bay 12."})
        item = wait_until_indexed(listed(first), small["id"], timeout=120)
        assert (item["status"], item["chunkCount"], item["error"]) == ("ready", 1, None)

        # About 400 KiB of distinct paragraphs: several seconds of embedding, well past the upload's answer.
        content = "\n\n".join(
            f"## Section {n}\n\nParcel {n} leaves depot {n % 17} at {n % 24}:00 and reaches bay {n * 7 % 101} "
            f"after {n % 9 + 1} stops; drivers report delays on line {n % 13} to dispatch desk {n % 5}."
            for n in range(2000)
        )
        created = api(first, owner.api_key, "POST", path, {"content": content, "name": "Depots"}, timeout=10)
        # The upload answered while the document is still being ingested in the background.
        assert [d["status"] for d in listed(first)() if d["id"] == created["id"]] == ["processing"]
    finally:
        kill(first)
        stop_test_server(first)

    # Restarted: the sweep fails it, with the reason, once the dead process's heartbeat expired.
    second = start_test_server(tmp_path_factory, "after-kill", {**embedded, **SWEEP})
    try:
        item = wait_until_indexed(listed(second), created["id"], timeout=15)
        assert item["status"] == "failed" and item["chunkCount"] == 0
        assert "did not finish" in item["error"] and "upload the document again" in item["error"]
        assert [d["status"] for d in listed(second)() if d["id"] == small["id"]] == ["ready"]
    finally:
        stop_test_server(second)
