"""Limits through real servers (docs/operations/limits.md): two Daphne processes sharing a redis-server this module
starts on a free port, so the per-API-key rate limit, the concurrent-call cap and the upload bound are
proved the way a deployment with several processes sees them, on SQLite and on PostgreSQL alike. The
upload bound is the server's own HTTP handling (voiceagent/server.py: upload slots, large bodies kept on
disk): concurrent large uploads beyond it are refused before their body is read, and the process's
memory stays flat."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Any

import httpx
import pytest
from django.db import transaction

from accounts.models import ApiKey, Plan
from agents.models import AgentStatus
from calls.models import Call
from kit import throttling
from telephony.services.numbers import phone_number_assign, phone_number_claim
from telephony.webhooks import BUSY_SENTENCE
from testing.daphne import DaphneServer, start_test_server, stop_test_server, wait_until_indexed
from testing.servers import free_port
from testing.stores import RedisServer
from testing.twilio_webhooks import PUBLIC_BASE_URL, make_account, parse_twiml, sign, status_params, voice_params

pytestmark = [pytest.mark.django_db(transaction=True)]

NUMBER = "+14155550123"
VOICE = "/telephony/twilio/voice"
STATUS = "/telephony/twilio/status"


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    """A redis-server of this module's own (no persistence), on a free port."""
    server = RedisServer().start()
    yield server.url
    server.kill()


@pytest.fixture(scope="module")
def servers(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: Any, redis_url: str
) -> Iterator[tuple[DaphneServer, DaphneServer]]:
    env = {
        "REDIS_URL": redis_url,
        "REALTIME_PRELOAD": "false",
        "PUBLIC_BASE_URL": PUBLIC_BASE_URL,
        "KNOWLEDGE_MAX_CONCURRENT_UPLOADS": "1",
        # Documents are indexed by the server's own worker (a test server with REDIS_URL would queue them on
        # this module's Redis, where no Celery worker runs).
        "BACKGROUND_WORK": "inprocess",
        "KNOWLEDGE_MAX_PROCESSING_PER_ORGANIZATION": "10",
        "KNOWLEDGE_MAX_CHUNKS_PER_DOCUMENT": "200",
    }
    with django_db_blocker.unblock():
        first = start_test_server(tmp_path_factory, "limits-a", env)
        try:
            second = start_test_server(tmp_path_factory, "limits-b", env)
        except Exception:
            stop_test_server(first)
            raise
    yield first, second
    with django_db_blocker.unblock():
        stop_test_server(first)
        stop_test_server(second)


def _plan(code: str, **limits: int) -> None:
    # The module's transactional tests flush the database after each test; the conftest seeds the
    # plans (with their documented limits) again before the next one.
    Plan.objects.filter(code=code).update(**limits)


# One client for the module's requests (it is thread-safe): httpx.get() builds a client, and its TLS context
# (about 0.1 s of CPU), per request.
HTTP = httpx.Client(timeout=60)


def _get(server: DaphneServer, path: str, key: str) -> httpx.Response:
    return HTTP.get(f"{server.http_url}{path}", headers={"Authorization": f"Bearer {key}"})


def _post(server: DaphneServer, path: str, key: str, **kwargs: Any) -> httpx.Response:
    return HTTP.post(f"{server.http_url}{path}", headers={"Authorization": f"Bearer {key}"}, **kwargs)


def _assert_429(response: httpx.Response, code: str) -> dict[str, Any]:
    assert response.status_code == 429, response.text
    assert int(response.headers["Retry-After"]) >= 1
    body = response.json()
    assert body["code"] == code and body["error"]
    assert body["retryAfter"] == int(response.headers["Retry-After"])
    return body


# --- per-API-key rate limit ----------------------------------------------------------------------
def test_the_rate_limit_of_a_key_is_one_budget_across_two_processes(servers, make_persona) -> None:
    first, second = servers
    _plan("launch", api_requests_per_second=0.01, api_burst=4)  # a token back every 100 s
    limited = make_persona("Limited", plan="launch")
    other = make_persona("Other", plan="launch")

    # The burst of 4, spent alternately on both processes...
    answers = [_get((first, second)[i % 2], "/public/v1/agents", limited.api_key) for i in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 200]
    # ...is gone on both: the next request is refused whichever process takes it.
    body = _assert_429(_get(second, "/public/v1/agents", limited.api_key), "RATE_LIMITED")
    assert (body["limit"], body["burst"]) == (0.01, 4)
    _assert_429(_get(first, "/public/v1/agents", limited.api_key), "RATE_LIMITED")
    # Another key has its own budget.
    assert _get(second, "/public/v1/agents", other.api_key).status_code == 200
    # A bad key is still a 401, not a 429 (no key, no budget).
    assert _get(first, "/public/v1/agents", "va_" + "x" * 40).status_code == 401


def test_the_documented_plan_limits_leave_room_for_real_use() -> None:
    limits = {p.code: (p.api_requests_per_second, p.api_burst, p.max_concurrent_calls) for p in Plan.objects.all()}
    assert limits == {
        "trial": (10, 100, 2),
        "launch": (20, 200, 5),
        "studio": (50, 500, 20),
        "agency": (100, 1000, 100),
    }


def test_the_limit_holds_in_the_test_process_too_with_one_log_line_for_many_refusals(make_persona, caplog) -> None:
    # Without REDIS_URL (the embedded default) the local buckets of this process; with it, Redis.
    _plan("launch", api_requests_per_second=0.01, api_burst=3)
    persona = make_persona("Embedded", plan="launch")
    with caplog.at_level(logging.INFO):
        statuses = [persona.client.get("/public/v1/agents").status_code for _ in range(10)]
    assert statuses == [200] * 3 + [429] * 7
    response = persona.client.get("/public/v1/agents")
    assert response.status_code == 429 and int(response["Retry-After"]) >= 1
    assert response.json()["code"] == "RATE_LIMITED"
    # A flood past the limit does not flood the log: one line names the key by its prefix, never in full.
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1 and "over its rate limit" in lines[0]
    assert persona.api_key[:10] in lines[0] and persona.api_key not in lines[0]


# --- concurrent calls per organization -------------------------------------------------------------
def test_the_concurrent_call_cap_holds_for_browser_and_phone_across_processes(servers, make_persona, make_agent):
    first, second = servers
    _plan("trial", max_concurrent_calls=2)
    persona = make_persona("Capped", plan="trial")
    agent = make_agent(persona.organization, status=AgentStatus.ACTIVE, language="en-US")
    make_account(persona.organization)
    number = phone_number_claim(organization=persona.organization, number=NUMBER)
    phone_number_assign(organization=persona.organization, agent=agent, phone_number_id=number.pk)
    sessions = f"/public/v1/agents/{agent.pk}/realtime-sessions"

    def phone_call(server: DaphneServer, params: dict[str, str], path: str = VOICE) -> httpx.Response:
        signature = sign(PUBLIC_BASE_URL + path, params)
        return HTTP.post(f"{server.http_url}{path}", data=params, headers={"X-Twilio-Signature": signature})

    # One browser session (process A) and one phone call (process B) take the plan's 2 slots.
    assert _post(first, sessions, persona.api_key).status_code == 200
    ringing = voice_params(to=NUMBER)
    answered = parse_twiml(phone_call(second, ringing).content)
    assert [child.tag for child in answered] == ["Connect"]

    # A third session is refused on either process, naming the limit.
    body = _assert_429(_post(second, sessions, persona.api_key), "CONCURRENT_CALL_LIMIT_EXCEEDED")
    assert body["maxConcurrentCalls"] == 2 and "2 live calls" in body["error"]
    # A third caller hears a short sorry and is hung up on; no call record is made for them.
    refused = phone_call(first, voice_params(to=NUMBER))
    assert refused.status_code == 200 and refused.headers["Content-Type"].startswith("text/xml")
    document = parse_twiml(refused.content)
    assert [child.tag for child in document] == ["Say", "Hangup"]
    assert document[0].text == BUSY_SENTENCE
    assert Call.objects.count() == 0

    # The phone call ends before its stream opened: its slot is free again at once.
    ended = status_params(sid=ringing["CallSid"], status="completed", to=NUMBER)
    assert phone_call(first, ended, STATUS).status_code == 204
    assert _post(second, sessions, persona.api_key).status_code == 200
    _assert_429(_post(first, sessions, persona.api_key), "CONCURRENT_CALL_LIMIT_EXCEEDED")


def test_simultaneous_session_requests_on_two_processes_get_exactly_the_cap(servers, make_persona, make_agent):
    first, second = servers
    _plan("trial", max_concurrent_calls=3)
    persona = make_persona("Racing", plan="trial")
    agent = make_agent(persona.organization, status=AgentStatus.ACTIVE)
    sessions = f"/public/v1/agents/{agent.pk}/realtime-sessions"
    with ThreadPoolExecutor(max_workers=12) as pool:
        answers = list(pool.map(lambda i: _post((first, second)[i % 2], sessions, persona.api_key), range(12)))
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] * 3 + [429] * 9
    for answer in answers:
        if answer.status_code == 429:
            _assert_429(answer, "CONCURRENT_CALL_LIMIT_EXCEEDED")


# --- concurrent uploads per process ----------------------------------------------------------------
def test_uploads_over_the_per_process_bound_get_a_429(servers, make_persona, make_agent) -> None:
    first, _ = servers  # KNOWLEDGE_MAX_CONCURRENT_UPLOADS=1
    persona = make_persona("Uploader", plan="studio")
    agent = make_agent(persona.organization, status=AgentStatus.ACTIVE)
    path = f"/public/v1/agents/{agent.pk}/knowledge"
    text = "Opening hours are nine to five on weekdays. " * 50

    def upload(name: str) -> httpx.Response:
        return _post(first, path, persona.api_key, files={"file": (name, text.encode(), "text/plain")})

    # Hold the API key's row: the server's first request of this key (which records last_used_at) waits on
    # the lock inside the upload, keeping its upload slot until the lock is let go.
    pool = ThreadPoolExecutor(max_workers=2)
    try:
        with transaction.atomic():
            ApiKey.objects.select_for_update().filter(organization=persona.organization).update(name="held")
            futures = {pool.submit(upload, "a.txt"), pool.submit(upload, "b.txt")}
            done, pending = wait(futures, timeout=60, return_when=FIRST_COMPLETED)
            # One of the two took the single slot and waits; the other was refused without waiting.
            assert len(done) == 1 and len(pending) == 1
            _assert_429(done.pop().result(), "UPLOADS_BUSY")
        (held,) = pending
        accepted = held.result(timeout=60)
        assert accepted.status_code == 200
    finally:
        pool.shutdown(wait=True)

    def documents() -> list[dict[str, Any]]:
        return _get(first, path, persona.api_key).json()

    # The slot is free again once the request is over and so is the document's ingestion on the server's
    # worker (it holds a slot of its own until then: knowledge/admission.py).
    assert wait_until_indexed(documents, accepted.json()["id"])["status"] == "ready"
    last = upload("c.txt")
    assert last.status_code == 200
    # Indexed before the test ends: no write of the server's after the test's flush.
    assert wait_until_indexed(documents, last.json()["id"])["status"] == "ready"


MIB = 1024 * 1024
# Distinct paragraphs, each long enough to be a chunk of its own.
PARAGRAPHS = [
    f"Room {n} faces the {('garden', 'harbour', 'square')[n % 3]} and has {n % 4 + 1} beds; its minibar is "
    f"refilled at {n % 12 + 1} o'clock and its safe code is reset after every guest who stays there."
    for n in range(2)
]


def test_concurrent_large_uploads_beyond_the_bound_are_refused_and_memory_stays_flat(
    servers, make_persona, make_agent
) -> None:
    """Moved from knowledge/tests/test_upload_bounds.py: process A's one upload slot
    (KNOWLEDGE_MAX_CONCURRENT_UPLOADS=1), its documents indexed by its own worker, over 200 chunks failed."""
    server, _ = servers
    persona = make_persona("Flooder", plan="agency")
    agent = make_agent(persona.organization, status=AgentStatus.ACTIVE)
    path = f"/public/v1/agents/{agent.pk}/knowledge"

    def documents() -> list[dict[str, Any]]:
        return _get(server, path, persona.api_key).json()

    size, count = 12 * MIB, 6
    line = b"Guests may borrow an umbrella at the front desk; please bring it back when you leave.\n"
    body = line * (size // len(line))

    def upload(n: int) -> httpx.Response:
        return _post(server, path, persona.api_key, files={"file": (f"big-{n}.txt", body, "text/plain")}, timeout=120)

    # What the server keeps once it has indexed a first document (the embedding model, about 200 MiB)
    # and processed a first large one (buffers and caches, about 50 MiB) is not what a flood costs.
    small = _post(server, path, persona.api_key, json={"content": "# Pool\n\n" + PARAGRAPHS[0]})
    assert small.status_code == 200
    assert wait_until_indexed(documents, small.json()["id"])["status"] == "ready"
    first = upload(0)
    assert first.status_code == 200
    assert wait_until_indexed(documents, first.json()["id"])["status"] == "failed"
    before = server.rss_bytes()

    # Hold the API key's row: the server's first request of this key in the view (which records
    # last_used_at) waits on the lock, keeping the process's only slot until the lock is let go.
    pool = ThreadPoolExecutor(max_workers=count)
    try:
        with transaction.atomic():
            ApiKey.objects.select_for_update().filter(organization=persona.organization).update(name="held")
            futures = {pool.submit(upload, n) for n in range(count)}
            refused: set[Any] = set()
            for _ in range(count):  # each pass collects at least one finished upload
                done, pending = wait(futures - refused, timeout=120, return_when=FIRST_COMPLETED)
                refused |= done
                if len(refused) == count - 1:
                    break
            # Every upload but the one holding the slot was refused while that one was still held.
            assert len(refused) == count - 1 and len(pending) == 1
            for future in refused:
                assert _assert_429(future.result(), "UPLOADS_BUSY")["retryAfter"] == 5
        (held,) = futures - refused
        accepted = held.result(timeout=120)
    finally:
        pool.shutdown(wait=True)
    assert accepted.status_code == 200
    # 12 MiB of text make far more than 200 chunks: failed before anything is embedded.
    item = wait_until_indexed(documents, accepted.json()["id"])
    assert item["status"] == "failed" and "KNOWLEDGE_MAX_CHUNKS_PER_DOCUMENT" in item["error"]

    grown = server.rss_bytes() - before
    assert grown < size * count, f"the server grew by {grown / MIB:.0f} MiB for {size * count / MIB:.0f} MiB sent"
    # The slot is free again: a small upload is accepted (and indexed before the test ends).
    last = _post(server, path, persona.api_key, json={"content": "# Bar\n\n" + PARAGRAPHS[1]})
    assert last.status_code == 200
    assert wait_until_indexed(documents, last.json()["id"])["status"] == "ready"


def test_the_rate_limit_fails_open_with_a_warning_when_redis_is_down(make_persona, settings, caplog) -> None:
    # Nothing listens on this port: every cache call fails, as during a Redis restart.
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port()}/0",
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        }
    }
    _plan("launch", api_requests_per_second=0.01, api_burst=1)
    persona = make_persona("Blip", plan="launch")
    throttling.reset_failure_log()  # the warning is written at most once a minute
    with caplog.at_level(logging.WARNING, logger="kit.throttling"):
        statuses = [persona.client.get("/public/v1/agents").status_code for _ in range(3)]
    assert statuses == [200, 200, 200]  # over the burst of 1, yet let through: never a 500
    warnings = [r for r in caplog.records if r.name == "kit.throttling"]
    assert len(warnings) == 1 and "rate limits not enforced" in warnings[0].getMessage()
