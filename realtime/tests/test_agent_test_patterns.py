"""Customers' regular expressions cannot stall the service (issue 34, item 1): an agent test's `replyMatches`
and a tool schema's `pattern` are matched in linear time (kit/patterns.py, RE2); what RE2 cannot run
(backreferences, lookaround) is refused when saved, naming the field.

The end-to-end case runs the project's ASGI application in the test's process (testing/inprocess.py)
with the test runs on the process's own worker thread (a pool of one, as a server has): one
organization's run matches `(a+)+$` against a mocked reply of 40 `a`s (with Python's backtracking `re`,
about 2^40 steps holding the GIL, which the application in this same process would need to answer)
while another organization types to its agent; /livez and the other organization's answers each come
within 1 s, the run's reads within 5 s (awaited with those timeouts, never measured)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from agents.models import AgentTool
from kit import background
from realtime.agent_tests import worker
from testing.agents import with_order_tool
from testing.clients import VoiceClient, is_type
from testing.conversations import agent_for, session_token, socket_url
from testing.inprocess import InProcessServer, serving

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_db_threads")]

STALLING = "(a+)+$"
REPLY = {"name": "t", "kind": "reply", "turns": [{"user": "Hello"}]}


def refusal(response: Any, field: str) -> str:
    assert response.status_code == 400, response.content
    body = response.json()
    [message] = body["issues"][field]
    assert body["error"] == f"Invalid {field}: {message}"
    return str(message)


@pytest.mark.parametrize(
    ("pattern", "said"),
    [
        (r"(ship)ped \1", "Backreferences"),
        (r"(?P<word>\w+) (?P=word)", "Backreferences"),
        (r"shipped(?= yesterday)", "Lookahead and lookbehind"),
        (r"(?<!not )shipped", "Lookahead and lookbehind"),
    ],
)
def test_a_pattern_the_linear_matcher_cannot_run_is_refused_when_saved(owner, make_agent, pattern, said):
    agent = make_agent(owner.organization, name="Olive")
    url = f"/public/v1/agents/{agent.pk}/tests"
    message = refusal(
        owner.client.post(url, {**REPLY, "expect": {"replyMatches": pattern}}, format="json"), "expect.replyMatches"
    )
    assert message.startswith(said) and "linear time (RE2)" in message
    # The same rule on a change, and for what a backtracking engine would stall on nothing is refused.
    created = owner.client.post(url, {**REPLY, "expect": {"replyMatches": STALLING}}, format="json")
    assert created.status_code == 201, created.content
    changed = owner.client.patch(f"{url}/{created.json()['id']}", {"expect": {"replyMatches": pattern}}, format="json")
    assert refusal(changed, "expect.replyMatches") == message


def test_a_tool_schema_pattern_the_linear_matcher_cannot_run_is_refused(owner, make_agent):
    agent = make_agent(owner.organization, name="Olive", agent_type="webhook", server_url="https://hooks.example.com/v")
    schema = {
        "type": "object",
        "properties": {"order_number": {"type": "string", "pattern": r"^(\d)\1+$"}},
    }
    response = owner.client.post(
        f"/public/v1/agents/{agent.pk}/tools",
        {"name": "lookup_order", "description": "Look up an order", "parameterSchema": schema},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert (
        "Backreferences" in response.json()["error"] and "properties/order_number/pattern" in response.json()["error"]
    )
    assert not AgentTool.objects.filter(agent=agent).exists()


@pytest.fixture
def run_worker(monkeypatch: Any) -> Iterator[background.Pool]:
    """The process's test-run worker for one test: a fresh pool of one thread (as a server's, with
    TEST_RUNS_WORKERS=1; the module's own pool keeps the thread count of its first job), its thread ended
    once the test is over (after the attempt it is running, if any), so nothing of it runs past the test."""
    pool = background.Pool("agent-tests", lambda: 1)
    monkeypatch.setattr(worker, "_pool", pool)
    yield pool
    pool.shutdown()
    for thread in list(pool._threads):
        thread.join(timeout=60)
        assert not thread.is_alive(), "the test-run worker did not finish its attempt"


def run_values(**values: Any) -> dict[str, Any]:
    """The settings of an application whose test runs go to the worker thread (never run in the request,
    as BACKGROUND_WORK=inline would: the test suite's)."""
    return {"TEST_RUNS_INLINE": False, "TEST_RUNS_WORKER": "inprocess", "TEST_RUNS_WORKERS": 1, **values}


@pytest.fixture
def server(settings: Any, realtime_settings: Any, run_worker: background.Pool) -> Iterator[InProcessServer]:
    with serving(settings, run_values()) as started:
        yield started


async def preloaded() -> None:
    """The voice engine's models loaded, as on a server taking calls: making the application starts loading
    them in a thread of this process (realtime/routing.py, the first time), which holds the CPU for
    seconds. The bounds below are about a test run beside live sessions, not about a cold start."""
    for thread in threading.enumerate():
        if thread.name == "voice-preload":
            await asyncio.to_thread(thread.join, 180)
            assert not thread.is_alive(), "the voice engine's preload did not end"


def order_agent(persona: Any, make_agent: Any, server_url: str, **fields: Any) -> Any:
    """Olive, a webhook agent answering about orders (its server at `server_url`)."""
    return agent_for(
        persona,
        make_agent,
        name="Olive",
        instructions="You answer questions about the status of orders.",
        agent_type="webhook",
        server_url=server_url,
        server_secret="whsec-orders-7Qk2",
        **fields,
    )


def stalling_test(owner: Any, make_agent: Any) -> Any:
    """Olive's order tool answers 40 `a`s (mocked); the test expects its replies to match `(a+)+$`."""
    return with_order_tool(order_agent(owner, make_agent, "https://hooks.example.com/voice"))


async def test_a_backtracking_pattern_stalls_neither_the_server_nor_another_organizations_session(
    server, owner, outsider, make_agent, realtime_settings
):
    # Ava's caller types as fast as she answers: her typed-input budget is lifted, so that a refusal for typing
    # too fast is never taken for a stall.
    realtime_settings.REALTIME_TEXT_PER_SECOND = 1000.0
    realtime_settings.REALTIME_TEXT_BURST = 1000
    realtime_settings.REALTIME_TEXT_MAX_MESSAGES_PER_CALL = 1000
    olive = await sync_to_async(stalling_test)(owner, make_agent)
    ava = await sync_to_async(agent_for)(outsider, make_agent, name="Ava", instructions="You help callers.")
    token = await session_token(outsider, ava, {"modality": "text"})
    owner_key = {"Authorization": f"Bearer {owner.api_key}"}
    async with server.ahttp(headers=owner_key) as http:
        test = await http.post(
            f"/public/v1/agents/{olive.pk}/tests",
            json={
                "name": "forty a",
                "kind": "tool_call",
                "turns": [{"user": "What is the status of order 3561?"}],
                "toolMocks": [{"tool": "check_order_status", "result": {"status": "a" * 40}}],
                "expect": {"replyMatches": STALLING},
            },
        )
        assert test.status_code == 201, test.text
        async with VoiceClient(socket_url(server, ava, token)) as client:
            started = await client.wait_for(is_type("session.started"), timeout=60)
            await client.wait_for(is_type("transcript", role="assistant"), after=started, timeout=30)
            # A first exchange before the run, and the engine's models loaded (as a server's are by then).
            await preloaded()
            before = len(client.messages)
            await client.send_text("Hello")
            await client.wait_for(is_type("transcript", role="assistant"), after=before, timeout=30)
            created = await http.post(f"/public/v1/agents/{olive.pk}/test-runs", json={})
            assert created.status_code == 202, created.text
            assert created.json()["status"] == "queued"  # on the worker thread, not in the request
            run: dict[str, Any] = {}
            # The other organization keeps typing until the run is over. Python's `re` would take 2**40 steps on
            # the 40 a's, holding the GIL for hours: a bound of seconds tells a stall from a busy machine.
            for _ in range(200):
                assert (await http.get("/livez", timeout=5)).status_code == 200
                before = len(client.messages)
                await client.send_text("Hello")
                await client.wait_for(is_type("transcript", role="assistant"), after=before, timeout=5)
                run = (await http.get(f"/public/v1/test-runs/{created.json()['id']}", timeout=5)).json()
                if run["status"] not in ("queued", "running"):
                    break
    assert run["status"] == "completed", run
    [attempt] = run["results"][0]["attempts"]
    assert "a" * 40 in attempt["transcript"][-1]["text"]  # the 40 a's were said, then a full stop
    assert attempt["verdict"] == "fail" and attempt["reasons"] == [f"replyMatches: no reply matches /{STALLING}/"]
