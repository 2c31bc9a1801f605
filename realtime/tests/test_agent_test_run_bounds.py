"""Test runs are bounded, fair and stoppable (issue 34, item 3; docs/guides/agent-test-runs.md): each attempt is a
row of its own; a run makes at most TEST_RUNS_MAX_ATTEMPTS attempts and an organization has at most
TEST_RUNS_MAX_UNFINISHED_PER_ORGANIZATION runs queued or running; the worker takes attempts round-robin by
organization; POST /test-runs/{id}/cancel stops a run, and so does deleting its agent. Test runs of an
agent that redacts personal data are stored redacted; the run pages keep to the Content-Security-Policy.

The fairness and stopping cases run the project's ASGI application in the test's process
(testing/inprocess.py) with one worker thread for the test runs (a pool of one, as a server with
TEST_RUNS_WORKERS=1 has), answering the API from its own request threads meanwhile: the big run's agent
asks its server for its prompt at the start of every attempt, and that loopback server never answers, so
each attempt lasts the request's 3 s timeout and is one request there (what the test counts to see that a
stopped run makes no more). The other organization's runs complete within awaited bounds while the big
run holds the only worker thread between attempts."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async

from realtime.agent_tests.services import agent_test_create_for
from realtime.models import TestAttempt, TestRun
from realtime.tests.test_agent_test_patterns import (
    order_agent,
    run_values,
    run_worker,  # noqa: F401 - the fixture
)
from testing.conversations import agent_for
from testing.factories import attempt_rows_create
from testing.inprocess import InProcessServer, serving
from testing.waiting import polled
from testing.webhooks import LoopbackReceiver, Reply

HELLO = {"name": "hello", "kind": "reply", "turns": [{"user": "Hello"}], "expect": {"noToolCalls": True}}


def make_tests(agent: Any, count: int, **body: Any) -> list[str]:
    return [str(agent_test_create_for(agent=agent, body={**HELLO, "name": f"t{i}", **body}).pk) for i in range(count)]


# --- the caps and cancelling, through the API (runs stay queued: nothing commits in these tests) ----------


@pytest.mark.django_db
def test_a_run_over_the_attempt_cap_is_refused_and_the_cap_is_allowed(owner, make_agent, settings):
    settings.TEST_RUNS_MAX_ATTEMPTS = 6
    agent = make_agent(owner.organization, name="Ava")
    ids = make_tests(agent, 4)
    refused = owner.client.post(f"/public/v1/agents/{agent.pk}/test-runs", {"repeat": 2}, format="json")
    assert refused.status_code == 400 and refused.json()["code"] == "TEST_RUN_TOO_BIG"
    assert refused.json()["error"].startswith("A run makes at most 6 attempts (tests x repeat); this one would make 8")
    assert not TestRun.objects.exists()
    allowed = owner.client.post(
        f"/public/v1/agents/{agent.pk}/test-runs", {"testIds": ids[:3], "repeat": 2}, format="json"
    )
    assert allowed.status_code == 202, allowed.content


@pytest.mark.django_db
def test_an_organization_with_its_most_unfinished_runs_gets_a_429_and_another_organization_does_not(
    owner, outsider, make_agent, settings
):
    settings.TEST_RUNS_MAX_UNFINISHED_PER_ORGANIZATION = 2
    ava, bob = make_agent(owner.organization, name="Ava"), make_agent(outsider.organization, name="Bob")
    make_tests(ava, 1), make_tests(bob, 1)
    runs = [owner.client.post(f"/public/v1/agents/{ava.pk}/test-runs", {}, format="json") for _ in range(2)]
    assert [run.status_code for run in runs] == [202, 202]
    busy = owner.client.post(f"/public/v1/agents/{ava.pk}/test-runs", {}, format="json")
    assert busy.status_code == 429 and busy.json()["code"] == "TEST_RUNS_BUSY"
    assert busy["Retry-After"] == "30" and busy.json()["retryAfter"] == 30
    assert "2 test runs queued or running" in busy.json()["error"]
    assert outsider.client.post(f"/public/v1/agents/{bob.pk}/test-runs", {}, format="json").status_code == 202
    # A cancelled run no longer counts.
    assert owner.client.post(f"/public/v1/test-runs/{runs[0].json()['id']}/cancel").status_code == 200
    assert owner.client.post(f"/public/v1/agents/{ava.pk}/test-runs", {}, format="json").status_code == 202


@pytest.mark.django_db
def test_cancel_stops_a_queued_run_and_a_finished_one_is_a_409(owner, outsider, make_agent):
    agent = make_agent(owner.organization, name="Ava")
    make_tests(agent, 1)
    run_id = owner.client.post(f"/public/v1/agents/{agent.pk}/test-runs", {}, format="json").json()["id"]
    assert outsider.client.post(f"/public/v1/test-runs/{run_id}/cancel").status_code == 404
    assert owner.client.post("/public/v1/test-runs/not-a-uuid/cancel").status_code == 400
    cancelled = owner.client.post(f"/public/v1/test-runs/{run_id}/cancel")
    assert cancelled.status_code == 200, cancelled.content
    body = cancelled.json()
    assert body["id"] == run_id and body["status"] == "cancelled" and body["finishedAt"] and body["results"] == []
    assert owner.client.get(f"/public/v1/test-runs/{run_id}").json()["status"] == "cancelled"
    assert owner.client.post(f"/public/v1/test-runs/{run_id}/cancel").json()["status"] == "cancelled"  # a retry
    TestRun.objects.filter(pk=run_id).update(status="completed")
    finished = owner.client.post(f"/public/v1/test-runs/{run_id}/cancel")
    assert finished.status_code == 409 and finished.json()["code"] == "TEST_RUN_FINISHED"
    assert finished.json()["error"] == "The test run is already over (completed): there is nothing to cancel."


# --- redaction and the dashboard ------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_db_threads")
def test_the_attempts_of_an_agent_that_redacts_are_stored_redacted(owner, make_agent, settings):
    settings.TEST_RUNS_INLINE = True
    agent = make_agent(owner.organization, name="Ava", status="active", redact_pii="all")
    said = "My email is maria.lopez@example.com and my card is 4111 1111 1111 1111."
    make_tests(agent, 1, turns=[{"user": said}], expect={"replyContains": ["maria.lopez@example.com"]})
    created = owner.client.post(f"/public/v1/agents/{agent.pk}/test-runs", {}, format="json")
    run = owner.client.get(f"/public/v1/test-runs/{created.json()['id']}").json()
    assert run["status"] == "completed", run
    [attempt] = run["results"][0]["attempts"]
    stored = str(TestAttempt.objects.get().result)
    for raw in ("maria.lopez@example.com", "4111 1111 1111 1111"):
        assert raw not in str(run) and raw not in stored
    assert "[EMAIL]" in attempt["transcript"][1]["text"]
    [reason] = attempt["reasons"]  # the expected text named in the reason is redacted too
    assert reason.startswith("replyContains: ") and "[EMAIL]" in reason


@pytest.mark.django_db
def test_the_run_pages_have_no_inline_styles(admin_client, owner, make_agent):
    agent = make_agent(owner.organization, name="Ava")
    [test_id] = make_tests(agent, 1)
    run = TestRun.objects.create(organization=owner.organization, agent=agent, status="completed", test_ids=[test_id])
    attempts = [{"verdict": verdict, "reasons": [], "transcript": [], "toolCalls": []} for verdict in ("pass", "fail")]
    attempt_rows_create(run, [{"testId": test_id, "name": "hello", "kind": "reply", "attempts": attempts}])
    for url in (
        f"/admin/realtime/testrun/{run.pk}/change/",
        "/admin/realtime/testrun/",
        f"/admin/realtime/agenttest/?agent__id__exact={agent.pk}",
        f"/admin/realtime/agenttest/{test_id}/change/",
    ):
        page = admin_client.get(url)
        assert page.status_code == 200, url
        html = page.content.decode()
        assert not re.search(r"\sstyle\s*=", html, re.IGNORECASE), url
        assert "<style" not in html.lower(), url
    page = admin_client.get(f"/admin/realtime/testrun/{run.pk}/change/").content.decode()
    assert 'class="test-verdict-pass">pass<' in page and 'class="test-verdict-fail">fail<' in page
    listing = admin_client.get(f"/admin/realtime/agenttest/?agent__id__exact={agent.pk}").content.decode()
    assert f'<form method="post" action="/admin/realtime/agenttest/run/{agent.pk}/" class="inline-form">' in listing


# --- fair and stoppable, on the in-process application with one worker thread -------------------------


@pytest.fixture
def server(settings: Any, run_worker: Any) -> Iterator[InProcessServer]:  # noqa: F811 - the fixture imported
    with serving(settings, run_values(OUTBOUND_ALLOWED_NETWORKS=["127.0.0.0/8"])) as started:
        yield started


@pytest.fixture
def silent_server() -> Iterator[LoopbackReceiver]:
    """An agent's server that never answers: each request lasts its timeout."""
    with LoopbackReceiver(Reply(json={"status": "shipped"}, hold=True)) as receiver:
        yield receiver


def big_agent(owner: Any, make_agent: Any, server: LoopbackReceiver) -> Any:
    """20 tests of an agent whose prompt comes from its server (a dynamic prompt), asked once at the start of
    each attempt: 100 attempts of about 3 s (the request's timeout) with repeat 5."""
    agent = order_agent(owner, make_agent, server.url("/hooks/voice"), prompt_type="dynamic")
    make_tests(agent, 20, expect={})
    return agent


def small_agent(persona: Any, make_agent: Any) -> Any:
    agent = agent_for(persona, make_agent, name="Ava", instructions="You help callers.")
    make_tests(agent, 1)
    return agent


async def until(check: Callable[[], Awaitable[Any]], what: str, timeout: float) -> Any:
    """Await `check()` until it is truthy (its value), for at most `timeout` seconds (the server's state
    over HTTP: polled)."""
    return await polled(check, what=what, timeout=timeout)


def client(server: InProcessServer, persona: Any) -> httpx.AsyncClient:
    return server.ahttp(headers={"Authorization": f"Bearer {persona.api_key}"})


async def run_of(http: httpx.AsyncClient, agent: Any, **body: Any) -> str:
    created = await http.post(f"/public/v1/agents/{agent.pk}/test-runs", json=body)
    assert created.status_code == 202, created.text
    return str(created.json()["id"])


async def status_of(http: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    return (await http.get(f"/public/v1/test-runs/{run_id}")).json()


async def completed(http: httpx.AsyncClient, run_id: str, timeout: float = 60) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        body = await status_of(http, run_id)
        return body if body["status"] not in ("queued", "running") else None

    body = await until(done, f"run {run_id} over", timeout)
    assert body["status"] == "completed", body
    return body


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_db_threads")
async def test_a_large_run_is_cancelled_while_another_organizations_runs_complete(
    server, owner, outsider, make_agent, silent_server
):
    olive = await sync_to_async(big_agent)(owner, make_agent, silent_server)
    ava = await sync_to_async(small_agent)(outsider, make_agent)
    async with client(server, owner) as ours, client(server, outsider) as theirs:
        big = await run_of(ours, olive, repeat=5)
        await silent_server.until(lambda: silent_server.requests, what="the big run's first attempt", timeout=60)
        # Another organization's one-test run is served between two attempts of the big run.
        small = await completed(theirs, await run_of(theirs, ava), timeout=30)
        assert small["passed"] == 1
        assert (await status_of(ours, big))["status"] == "running"

        cancelled = await ours.post(f"/public/v1/test-runs/{big}/cancel")
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled", cancelled.text
        calls_at_cancel = len(silent_server.requests)

        async def stopped() -> bool:
            return (await status_of(ours, big))["status"] == "cancelled"

        await until(stopped, "the big run cancelled", 5)
        # The worker goes on to other work: a run made after the cancellation completes, and the big run
        # made at most the attempt that was under way.
        await completed(theirs, await run_of(theirs, ava), timeout=30)
        body = await status_of(ours, big)
    assert body["status"] == "cancelled"
    assert len(silent_server.requests) <= calls_at_cancel + 1
    attempts = sum(len(result["attempts"]) for result in body["results"])
    assert 1 <= attempts <= calls_at_cancel + 1 < 100
    assert await sync_to_async(TestAttempt.objects.filter(run_id=big).count)() == attempts


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_db_threads")
async def test_deleting_the_agent_stops_its_run(server, owner, outsider, make_agent, silent_server):
    olive = await sync_to_async(big_agent)(owner, make_agent, silent_server)
    ava = await sync_to_async(small_agent)(outsider, make_agent)
    async with client(server, owner) as ours, client(server, outsider) as theirs:
        big = await run_of(ours, olive, repeat=5)
        await silent_server.until(lambda: silent_server.requests, what="the big run's first attempt", timeout=60)
        deleted = await ours.delete(f"/public/v1/agents/{olive.pk}")
        assert deleted.status_code == 200, deleted.text
        calls_at_delete = len(silent_server.requests)
        assert (await ours.get(f"/public/v1/test-runs/{big}")).status_code == 404
        await completed(theirs, await run_of(theirs, ava), timeout=30)
        await completed(theirs, await run_of(theirs, ava), timeout=30)
    assert len(silent_server.requests) <= calls_at_delete + 1
    assert not await sync_to_async(TestAttempt.objects.filter(run_id=big).exists)()


# --- the data migration -------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_migration_moves_stored_results_into_attempt_rows(owner, make_agent):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before, after = [("realtime", "0004_session_modality")], [("realtime", "0005_test_attempt_rows")]
    agent = make_agent(owner.organization, name="Ava")
    first, second = "5f0c3c1e-1d5e-4c55-9c0a-3f1a3d2b7e01", "5f0c3c1e-1d5e-4c55-9c0a-3f1a3d2b7e02"
    results = [
        {
            "testId": first,
            "name": "order status",
            "kind": "tool_call",
            "passRate": 0.5,
            "attempts": [
                {"verdict": "pass", "reasons": [], "transcript": [{"role": "user", "text": "Where is 42?"}]},
                {"verdict": "fail", "reasons": ["replyContains: 'shipped' is not in the agent's replies"]},
            ],
        },
        {"testId": second, "name": "hello", "kind": "reply", "passRate": None, "attempts": [{"verdict": "skipped"}]},
    ]
    executor = MigrationExecutor(connection)
    try:
        executor.migrate(before)
        old = executor.loader.project_state(before).apps.get_model("realtime", "TestRun")
        run = old.objects.create(
            organization_id=owner.organization.pk,
            agent_id=agent.pk,
            status="running",
            test_ids=[first, second],
            repeat=2,
            passed=1,
            failed=1,
            results=results,
        )
    finally:
        # Forward to the realtime migration under test, then every app's latest: going back unapplied
        # the migrations of other apps that depend on it too (calls' among them), which later tests of
        # this worker need.
        executor = MigrationExecutor(connection)
        executor.migrate(after)
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    body = owner.client.get(f"/public/v1/test-runs/{run.pk}").json()
    assert body["results"] == results and (body["passed"], body["failed"]) == (1, 1)
    rows = list(TestAttempt.objects.filter(run_id=run.pk).values_list("position", "number", "verdict"))
    assert rows == [(0, 0, "pass"), (0, 1, "fail"), (1, 0, "skipped")]
