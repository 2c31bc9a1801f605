"""Agent test runs through the API and the real runtime (issue 22, docs/guides/agent-test-runs.md).

Runs are carried out inline (BACKGROUND_WORK=inline, the suite's) once the request's transaction commits, in the test's
process: each attempt is a real session (the agent's prompt, tools, knowledge, handoff; the configured
brain) with mocked tools and no call record."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from celery.contrib.testing.worker import start_worker
from celery.signals import task_postrun, task_prerun
from django.conf import settings as django_settings
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from calls.models import AgentLog, Call, CallEvent
from realtime.agent_tests import worker
from realtime.agent_tests.services import agent_test_create_for
from realtime.models import AgentTest, TestRun
from testing.agents import with_order_tool
from testing.chat_server import ChatServer, Text
from testing.daphne import database_url
from testing.factories import attempt_rows_create
from testing.waiting import polled_sync
from testing.webhooks import LoopbackReceiver, Reply
from voiceagent.celery import app

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_db_threads")]

HANDOFF = "+15557654321"
CLINIC = """# Riverside Clinic

## Parking

Patients park for free in the car park behind the clinic, on Mill Street.

## Opening hours

The clinic is open from Monday to Friday, from eight in the morning to six in the evening.
"""


@pytest.fixture
def inline_runs(settings: Any) -> None:
    settings.BACKGROUND_WORK = "inline"  # the suite's: a run is carried out in the request's thread, on commit


@pytest.fixture
def hook(settings: Any) -> Iterator[LoopbackReceiver]:
    """The agent's server: a test's tools are mocked and must never reach it (unless allowed)."""
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    with LoopbackReceiver(Reply(json={"message": "Order 3561 is out for delivery and arrives today."})) as receiver:
        yield receiver


@pytest.fixture
def olive(owner: Any, make_agent: Any, hook: LoopbackReceiver) -> Any:
    """A webhook agent with one tool, knowledge and a handoff number."""
    agent = make_agent(
        owner.organization,
        name="Olive",
        status="active",
        identity="",
        instructions="You help callers with their orders and questions about the Riverside Clinic.",
        ai_identity_disclosure_template_id="named_agent",
        greeting_type="static",
        static_greeting="Thanks for calling.",
        agent_type="webhook",
        server_url=hook.url("/hooks/voice"),
        server_secret="whsec-agent-tests",
        handoff_phone_number=HANDOFF,
    )
    with_order_tool(agent)
    upload = owner.client.post(f"/public/v1/agents/{agent.pk}/knowledge", {"content": CLINIC}, format="json")
    assert upload.status_code == 200, upload.content
    return agent


WIRE = {"tool_mocks": "toolMocks", "allow_real_tools": "allowRealTools"}


def make_test(agent: Any, name: str, **fields: Any) -> AgentTest:
    """A test made as POST /agents/{id}/tests makes it (the same checks and stored shapes)."""
    body = {"kind": "reply", "name": name, **{WIRE.get(key, key): value for key, value in fields.items()}}
    return agent_test_create_for(agent=agent, body=body)


def run(owner: Any, agent: Any, **body: Any) -> dict[str, Any]:
    created = owner.client.post(f"/public/v1/agents/{agent.pk}/test-runs", body, format="json")
    assert created.status_code == 202, created.content
    assert created.json()["status"] == "queued"
    detail = owner.client.get(f"/public/v1/test-runs/{created.json()['id']}")
    assert detail.status_code == 200
    return detail.json()


ORDER = "What is the status of order 3561?"
SHIPPED = {"status": "shipped yesterday", "arrives": "Friday"}
MOCK_3561 = {"tool": "check_order_status", "when": {"argumentsInclude": {"order_number": "3561"}}, "result": SHIPPED}


def suite(agent: Any) -> dict[str, AgentTest]:
    """Eleven tests of Olive: what the embedded brain does, and what it does not."""
    tests = [
        make_test(
            agent,
            "a mocked tool's result is spoken",
            kind="tool_call",
            turns=[{"user": ORDER}],
            tool_mocks=[MOCK_3561],
            expect={
                "toolCalls": [{"name": "check_order_status", "argumentsInclude": {"order_number": "3561"}}],
                "replyContains": ["shipped yesterday", "Friday"],
            },
            tags=["orders"],
        ),
        make_test(
            agent,
            "a mocked tool error is apologized for",
            turns=[{"user": ORDER}],
            tool_mocks=[{"tool": "check_order_status", "error": "The order service is down"}],
            expect={"replyContains": ["Sorry, I could not complete that right now"]},
            tags=["orders"],
        ),
        make_test(agent, "an unmocked tool", turns=[{"user": ORDER}], expect={"replyContains": ["shipped"]}),
        make_test(
            agent,
            "opening hours from the knowledge",
            turns=[{"user": "What are the opening hours of the clinic?"}],
            expect={
                "toolCalls": [{"name": "search_knowledge"}],
                "replyContains": ["Monday to Friday"],
                "replyMatches": r"eight in the morning to six",
            },
        ),
        make_test(
            agent,
            "parking, expected wrongly",
            turns=[{"user": "Where can patients park at the clinic?"}],
            expect={"replyContains": ["valet parking"], "replyMatches": r"\bgarage\b", "transferred": True},
        ),
        make_test(
            agent,
            "a person is asked for",
            turns=[{"user": "Can I talk to a real person please?"}],
            expect={"transferred": True, "toolCalls": [{"name": "transfer_call"}]},
        ),
        make_test(agent, "hello needs no tool", turns=[{"user": "Hello"}], expect={"noToolCalls": True}),
        make_test(
            agent,
            "the wrong tool is expected",
            turns=[{"user": "Hello"}, {"user": "What are the opening hours of the clinic?"}],
            expect={"toolCalls": [{"name": "check_order_status"}]},
        ),
        make_test(
            agent,
            "goodbye ends the call",
            turns=[{"user": "That's all, thank you, goodbye."}, {"user": "Are you still there?"}],
            expect={"ended": True, "transferred": False},
        ),
        make_test(
            agent,
            "criteria only",
            turns=[{"user": "Hello"}],
            expect={"criteria": ["The agent is polite"]},
        ),
        make_test(
            agent,
            "a simulated caller",
            kind="conversation",
            caller={"persona": "A patient", "goal": "Learn the opening hours", "maxTurns": 3},
        ),
    ]
    return {test.name: test for test in tests}


def by_name(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {result["name"]: result for result in run["results"]}


def test_a_suite_runs_through_the_real_runtime_with_the_embedded_brain(owner, olive, hook, inline_runs):
    tests = suite(olive)
    done = run(owner, olive)
    assert done["status"] == "completed", done
    assert [result["testId"] for result in done["results"]] == [str(test.pk) for test in tests.values()]
    results = by_name(done)
    verdicts = {name: [a["verdict"] for a in result["attempts"]] for name, result in results.items()}
    assert verdicts == {
        "a mocked tool's result is spoken": ["pass"],
        "a mocked tool error is apologized for": ["pass"],
        "an unmocked tool": ["error"],
        "opening hours from the knowledge": ["pass"],
        "parking, expected wrongly": ["fail"],
        "a person is asked for": ["pass"],
        "hello needs no tool": ["pass"],
        "the wrong tool is expected": ["fail"],
        "goodbye ends the call": ["pass"],
        "criteria only": ["skipped"],
        "a simulated caller": ["error"],
    }
    assert (done["passed"], done["failed"], done["errored"]) == (6, 2, 2)

    # The mocked result, spoken; the call's arguments and the mocked result reported.
    [spoken] = results["a mocked tool's result is spoken"]["attempts"]
    assert spoken["transcript"][1:] == [
        {"role": "user", "text": ORDER},
        {"role": "assistant", "text": "Status: shipped yesterday, arrives: Friday."},
    ]
    assert spoken["transcript"][0]["role"] == "assistant"  # the greeting
    assert spoken["toolCalls"] == [
        {
            "name": "check_order_status",
            "arguments": {"order_number": "3561"},
            "result": SHIPPED,
            "status": "success",
            "mocked": True,
        }
    ]
    assert len(spoken["latencyMs"]) == 1 and spoken["latencyMs"][0] >= 0
    assert spoken["reasons"] == [] and spoken["transferred"] is False

    # An unmocked tool never reaches the agent's server: an error naming it.
    [unmocked] = results["an unmocked tool"]["attempts"]
    assert unmocked["reasons"] == [
        "unmocked tool check_order_status was called (add a toolMock for it, or allow real tools)"
    ]
    assert unmocked["toolCalls"][0]["mocked"] is False and unmocked["toolCalls"][0]["result"] is None

    # Each failed expectation, by name.
    [parking] = results["parking, expected wrongly"]["attempts"]
    assert parking["reasons"] == [
        "replyContains: 'valet parking' is not in the agent's replies",
        "replyMatches: no reply matches /\\bgarage\\b/",
        "transferred: expected true, got false",
    ]
    assert "car park behind the clinic" in parking["transcript"][-1]["text"]
    [wrong] = results["the wrong tool is expected"]["attempts"]
    assert wrong["reasons"] == [
        "toolCalls: expected a call of check_order_status; calls made: search_knowledge",
    ]
    [person] = results["a person is asked for"]["attempts"]
    assert person["transferred"] is True and person["toolCalls"][0]["result"]["phoneNumber"] == HANDOFF
    [goodbye] = results["goodbye ends the call"]["attempts"]
    assert goodbye["ended"] is True and [t["role"] for t in goodbye["transcript"]] == ["assistant", "user", "assistant"]

    # Criteria are never passed by the embedded brain; a simulated caller needs a model.
    [criteria] = results["criteria only"]["attempts"]
    assert criteria["criteria"] == [
        {
            "criterion": "The agent is polite",
            "verdict": "skipped",
            "reason": "criteria need a language model (LLM_PROVIDER=openai)",
        }
    ]
    assert results["criteria only"]["passRate"] is None
    [simulated] = results["a simulated caller"]["attempts"]
    assert simulated["reasons"] == [
        "conversation: a simulated caller needs a language model (LLM_PROVIDER=openai); with the embedded "
        "brain, give the test scripted turns"
    ]

    # A test run is not a customer call: nothing recorded, billed or sent; no tool reached the agent's server.
    assert hook.requests == []
    assert not Call.objects.exists() and not CallEvent.objects.exists() and not AgentLog.objects.exists()


def test_repeats_give_a_pass_rate_per_test_and_a_tag_chooses_the_tests(owner, olive, inline_runs):
    tests = suite(olive)
    done = run(owner, olive, tag="orders", repeat=3)
    assert done["repeat"] == 3 and done["tag"] == "orders"
    assert [r["name"] for r in done["results"]] == [
        "a mocked tool's result is spoken",
        "a mocked tool error is apologized for",
    ]
    assert [len(r["attempts"]) for r in done["results"]] == [3, 3]
    assert [r["passRate"] for r in done["results"]] == [1.0, 1.0]
    assert done["passed"] == 6

    chosen = [str(tests["an unmocked tool"].pk), str(tests["opening hours from the knowledge"].pk)]
    done = run(owner, olive, testIds=chosen, repeat=2)
    assert [r["testId"] for r in done["results"]] == chosen
    assert [r["passRate"] for r in done["results"]] == [0.0, 1.0]
    assert (done["passed"], done["failed"], done["errored"]) == (2, 0, 2)


def test_a_test_may_allow_real_tools(owner, olive, hook, inline_runs):
    real = make_test(
        olive,
        "the real order service",
        turns=[{"user": ORDER}],
        allow_real_tools=True,
        expect={"replyContains": ["out for delivery"]},
    )
    done = run(owner, olive, testIds=[str(real.pk)])
    [attempt] = done["results"][0]["attempts"]
    assert attempt["verdict"] == "pass", attempt
    assert attempt["toolCalls"][0]["mocked"] is False and attempt["toolCalls"][0]["status"] == "success"
    [request] = hook.requests
    assert request.json()["message"]["toolCall"]["arguments"] == {"order_number": "3561"}
    assert not Call.objects.exists()


def test_a_test_run_counts_in_no_live_gauge(owner, olive, hook, anonymous, inline_runs):
    """/metrics read while a test's session waits on the agent's real tool: no live web session or call
    (voiceagent_live_sessions and _calls count sockets and call records; a test has neither)."""
    hook.reply(Reply(json={"message": "Order 3561 is out for delivery and arrives today."}, hold=True))
    real = make_test(olive, "the real order service", turns=[{"user": ORDER}], allow_real_tools=True)
    seen: dict[str, str] = {}

    def read_metrics_mid_session() -> None:
        with contextlib.suppress(AssertionError):  # none: the check below fails, and the hook is released
            hook.until_sync(lambda: hook.requests, what="the real tool's request", timeout=60)
        seen["metrics"] = anonymous.get("/metrics").content.decode() if hook.requests else ""
        hook.release()

    reader = threading.Thread(target=read_metrics_mid_session)
    reader.start()
    done = run(owner, olive, testIds=[str(real.pk)])
    reader.join()
    [attempt] = done["results"][0]["attempts"]
    assert attempt["toolCalls"][0]["mocked"] is False and attempt["toolCalls"][0]["status"] == "success"
    assert "voiceagent_live_sessions" in seen["metrics"]  # read while the session waited on the tool
    live = [
        line
        for line in seen["metrics"].splitlines()
        if line.startswith(("voiceagent_live_sessions{", "voiceagent_live_calls{")) and float(line.split()[-1]) > 0
    ]
    assert live == []


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"repeat": 0}, "Invalid repeat: must be a whole number from 1 to 5"),
        ({"repeat": 6}, "Invalid repeat: must be a whole number from 1 to 5"),
        ({"repeat": "2"}, "Invalid repeat: must be a whole number from 1 to 5"),
        (
            {"testIds": ["5f0c8d8e-7b8a-4a47-9b6c-2f3f3c1d7e11"]},
            "Invalid testIds: unknown test 5f0c8d8e-7b8a-4a47-9b6c-2f3f3c1d7e11",
        ),
        ({"testIds": "all"}, "Invalid testIds: must be a list of test ids"),
        ({"tag": "nothing-has-it"}, "Nothing to run: the agent has no test tagged 'nothing-has-it'."),
        ({"tag": ""}, "Invalid tag: must name a tag (leave tag out to run every test)"),
        ({"tag": "  "}, "Invalid tag: must name a tag (leave tag out to run every test)"),
        ({"tag": None}, "Invalid tag: must name a tag (leave tag out to run every test)"),
    ],
)
def test_bad_runs_are_refused_with_a_clear_message(owner, olive, inline_runs, body, message):
    suite(olive)
    response = owner.client.post(f"/public/v1/agents/{olive.pk}/test-runs", body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"].startswith(message)
    assert not TestRun.objects.exists()


@pytest.mark.parametrize("text", ["null", "[]", '"run"'])
def test_a_body_that_is_not_an_object_is_refused_and_no_body_runs_every_test(owner, olive, inline_runs, text):
    suite(olive)
    path = f"/public/v1/agents/{olive.pk}/test-runs"
    response = owner.client.post(path, text, content_type="application/json")
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "The request body must be a JSON object."
    assert not TestRun.objects.exists()
    assert owner.client.post(path).status_code == 202  # no body at all: every test, once


def test_another_organizations_agent_tests_and_runs_are_not_found(owner, outsider, olive, make_agent, inline_runs):
    tests = suite(olive)
    theirs = make_agent(outsider.organization, name="Theirs", status="active")
    mine = run(owner, olive, testIds=[str(tests["hello needs no tool"].pk)])
    assert outsider.client.post(f"/public/v1/agents/{olive.pk}/test-runs", {}, format="json").status_code == 404
    assert outsider.client.get(f"/public/v1/test-runs/{mine['id']}").status_code == 404
    # The owner's test ids are unknown to another agent.
    other = owner.client.post(f"/public/v1/agents/{theirs.pk}/test-runs", {}, format="json")
    assert other.status_code == 404
    empty = make_agent(owner.organization, name="Empty", status="active")
    refused = owner.client.post(
        f"/public/v1/agents/{empty.pk}/test-runs", {"testIds": [str(tests["hello needs no tool"].pk)]}, format="json"
    )
    assert refused.status_code == 400 and "unknown test" in refused.json()["error"]
    nothing = owner.client.post(f"/public/v1/agents/{empty.pk}/test-runs", {}, format="json")
    assert nothing.status_code == 400 and nothing.json()["error"] == "Nothing to run: the agent has no tests."
    assert owner.client.get("/public/v1/test-runs/not-a-uuid").status_code == 400


def wait_for_status(owner: Any, run_id: str, timeout: float = 120) -> dict[str, Any]:
    def over() -> dict[str, Any] | None:
        body: dict[str, Any] = owner.client.get(f"/public/v1/test-runs/{run_id}").json()
        return body if body["status"] in ("completed", "failed") else None

    return polled_sync(over, what=f"test run {run_id} over", timeout=timeout, every=0.1)


def test_runs_go_on_in_a_background_thread_and_resume_after_a_restart(owner, olive, settings):
    settings.BACKGROUND_WORK = "inprocess"  # the runs on this process's pool (the agent's document was indexed before)
    tests = suite(olive)
    created = owner.client.post(f"/public/v1/agents/{olive.pk}/test-runs", {"tag": "orders"}, format="json")
    assert created.status_code == 202 and created.json()["status"] == "queued"
    done = wait_for_status(owner, created.json()["id"])
    assert (done["status"], done["passed"]) == ("completed", 2)

    # A worker died with a run half done: its lease runs out and the upkeep sweep resumes it after the
    # last attempt it stored.
    first = {"verdict": "pass", "reasons": ["kept"]}
    ids = [str(tests["hello needs no tool"].pk), str(tests["an unmocked tool"].pk)]
    stale = TestRun.objects.create(
        organization=owner.organization,
        agent=olive,
        status="running",
        test_ids=ids,
        repeat=1,
        passed=1,  # as the worker counted its stored attempt
        started_at=timezone.now() - timedelta(hours=1),
        claimed_at=timezone.now() - timedelta(hours=1),
    )
    attempt_rows_create(
        stale, [{"testId": ids[0], "name": "hello needs no tool", "kind": "reply", "attempts": [first]}]
    )
    held = TestRun.objects.create(
        organization=owner.organization, agent=olive, status="running", test_ids=ids, claimed_at=timezone.now()
    )
    assert worker.test_runs_resume() == 1
    resumed = wait_for_status(owner, str(stale.pk))
    assert [r["attempts"][0]["verdict"] for r in resumed["results"]] == ["pass", "error"]
    assert resumed["results"][0]["attempts"][0]["reasons"] == ["kept"]
    assert (resumed["passed"], resumed["errored"]) == (1, 1)
    held.refresh_from_db()
    assert held.status == "running" and not held.attempts.exists()  # another worker holds it


# --- with a language model: the scripted Chat Completions server ------------------------------------


@pytest.fixture
def chat(settings: Any) -> Iterator[ChatServer]:
    with ChatServer() as server:
        settings.LLM_PROVIDER = "openai"
        settings.LLM_BASE_URL = server.base_url
        settings.LLM_MODEL = "scripted-model"
        settings.LLM_API_KEY = "sk-agent-tests"
        yield server


def verdict(value: str, reason: str) -> Text:
    return Text(json.dumps({"verdict": value, "reason": reason}), usage=None)


def line(text: str, done: bool = False) -> Text:
    return Text(json.dumps({"line": text, "done": done}), usage=None)


def test_criteria_are_judged_and_a_simulated_caller_converses_with_a_model(owner, olive, chat, inline_runs):
    polite = make_test(
        olive,
        "polite and brief",
        turns=[{"user": "Hello"}],
        expect={"replyContains": ["help"], "criteria": ["The agent is polite", "The agent gives the hours"]},
    )
    caller = make_test(
        olive,
        "a patient asks for the hours",
        kind="conversation",
        caller={"persona": "A patient of the clinic", "goal": "Learn the opening hours", "maxTurns": 4},
        expect={"replyContains": ["eight"], "criteria": ["The agent answered the question"]},
    )
    chat.script(
        Text("Hello! How can I help you today?"),
        Text("We are open from eight to six, Monday to Friday."),
        Text("You are welcome. Goodbye!"),
    )
    chat.analysis(
        verdict("pass", "The agent greets warmly."),
        verdict("fail", "The agent never mentions the opening hours."),
        line("Hi, when are you open?"),
        line("Thanks a lot!"),
        line("", done=True),
        verdict("pass", "The agent gave the hours."),
    )
    done = run(owner, olive, testIds=[str(polite.pk), str(caller.pk)])
    results = by_name(done)
    [judged] = results["polite and brief"]["attempts"]
    assert judged["verdict"] == "fail"
    assert judged["criteria"] == [
        {"criterion": "The agent is polite", "verdict": "pass", "reason": "The agent greets warmly."},
        {
            "criterion": "The agent gives the hours",
            "verdict": "fail",
            "reason": "The agent never mentions the opening hours.",
        },
    ]
    assert judged["reasons"] == [
        "criteria: 'The agent gives the hours' failed: The agent never mentions the opening hours."
    ]
    [conversed] = results["a patient asks for the hours"]["attempts"]
    assert conversed["verdict"] == "pass", conversed
    assert [turn["text"] for turn in conversed["transcript"][1:]] == [
        "Hi, when are you open?",
        "We are open from eight to six, Monday to Friday.",
        "Thanks a lot!",
        "You are welcome. Goodbye!",
    ]
    assert conversed["criteria"] == [
        {"criterion": "The agent answered the question", "verdict": "pass", "reason": "The agent gave the hours."}
    ]
    # The judge read the transcript; the simulated caller was told who it is and what was said.
    judge_request = chat.analysis_requests[1].body
    assert "Criterion: The agent gives the hours" in judge_request["messages"][1]["content"]
    assert "Agent: Hello! How can I help you today?" in judge_request["messages"][1]["content"]
    second_line = chat.analysis_requests[3].body["messages"]
    assert "A patient of the clinic" in second_line[0]["content"]
    assert "Agent: We are open from eight to six" in second_line[1]["content"]
    assert (done["passed"], done["failed"], done["errored"]) == (1, 1, 0)
    assert not Call.objects.exists()


# --- manage.py agenttest ----------------------------------------------------------------------------


def test_agenttest_passes_in_process(owner, olive, capsys):
    make_test(
        olive,
        "hours",
        turns=[{"user": "What are the opening hours of the clinic?"}],
        expect={"replyContains": ["Monday"]},
    )
    call_command("agenttest", "--agent", str(olive.pk))
    out = capsys.readouterr().out
    assert "pass         hours" in out and "1 passed, 0 failed, 0 errors (completed" in out


def test_agenttest_writes_junit_and_exits_1_on_a_failing_test(owner, olive, tmp_path: Path):
    tests = suite(olive)
    report = tmp_path / "report.xml"
    done = subprocess.run(
        [sys.executable, "manage.py", "agenttest", "--agent", str(olive.pk), "--junit", str(report)],
        cwd=django_settings.BASE_DIR,
        env={**_environment(), "DATABASE_URL": database_url(connection.settings_dict)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    assert "6 passed, 2 failed, 2 errors (completed" in done.stdout
    assert "- replyContains: 'valet parking' is not in the agent's replies" in done.stdout
    suite_element = ElementTree.parse(report).getroot()  # noqa: S314 - the report this test had written
    assert suite_element.tag == "testsuite"
    counts = {key: suite_element.get(key) for key in ("tests", "failures", "errors", "skipped")}
    assert counts == {"tests": str(len(tests)), "failures": "2", "errors": "2", "skipped": "1"}
    cases = {case.get("name"): case for case in suite_element.iter("testcase")}
    assert set(cases) == set(tests)
    failure = cases["parking, expected wrongly"].find("failure")
    assert failure is not None and "replyContains" in failure.get("message", "")
    error = cases["an unmocked tool"].find("error")
    assert error is not None and "unmocked tool check_order_status" in error.get("message", "")
    assert cases["criteria only"].find("skipped") is not None
    assert list(cases["opening hours from the knowledge"]) == [
        cases["opening hours from the knowledge"].find("system-out")
    ]
    assert TestRun.objects.get().status == "completed"
    assert not Call.objects.exists()


def _environment() -> dict[str, str]:
    import os

    return {key: value for key, value in os.environ.items() if key not in ("REDIS_URL", "PYTEST_XDIST_WORKER")}


def test_a_celery_worker_carries_out_a_queued_run(owner, olive, settings):
    settings.BACKGROUND_WORK = "celery"  # the run sent to the broker on commit (the document was indexed before)
    app.conf.task_always_eager = False
    tests = suite(olive)
    done = threading.Event()
    at_start: list[str] = []  # the run's status when the worker took it

    def ours(task: Any, args: Any) -> bool:
        return task is not None and task.name == "realtime.run_agent_tests" and str(run_id) in map(str, args or ())

    def starting(sender=None, task_id=None, task=None, args=None, **kwargs):
        if ours(task, args):
            at_start.append(TestRun.objects.get(pk=run_id).status)

    def finished(sender=None, task_id=None, task=None, args=None, **kwargs):
        if ours(task, args):
            done.set()

    try:
        created = owner.client.post(
            f"/public/v1/agents/{olive.pk}/test-runs",
            {"testIds": [str(tests["a person is asked for"].pk)]},
            format="json",
        )
        assert created.status_code == 202
        run_id = created.json()["id"]
        assert owner.client.get(f"/public/v1/test-runs/{run_id}").json()["status"] == "queued"  # no worker yet
        task_prerun.connect(starting, weak=False)
        task_postrun.connect(finished, weak=False)
        try:
            with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
                assert done.wait(timeout=180), "the worker did not run the test run"
        finally:
            task_prerun.disconnect(starting)
            task_postrun.disconnect(finished)
        assert at_start == ["queued"]  # nothing ran it before the worker came
    finally:
        app.conf.task_always_eager = True
    body = owner.client.get(f"/public/v1/test-runs/{run_id}").json()
    assert (body["status"], body["passed"]) == ("completed", 1)
