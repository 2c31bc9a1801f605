"""Post-call analysis (realtime/analysis/) of calls ended through the calls write path (the functions the
engine calls), read back through GET /public/v1/calls/{id}: the openai brain against the scripted Chat
Completions server (JSON checked against the plan's schema, one repair, then failed), the embedded
brain, skipped analyses, and an analysis that never delays the end of its call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from calls.models import Call
from calls.services import call_finish, call_message_add, call_start
from testing.chat_server import ChatServer, Error, Gate, Text
from testing.waiting import polled_sync

MODEL = "scripted-model"
KEY = "sk-analysis-test-key-0123"
BOOKING = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "The caller's full name"},
        "party_size": {"type": "integer", "minimum": 1, "description": "How many people the table is for"},
    },
    "required": ["name", "party_size"],
}
EVALUATION = {"enabled": True, "rubric": "The caller got a table booked.", "scale": "pass-fail"}
TALK = [
    ("assistant", "Hi, I'm Ava, an AI agent. How can I help?"),
    ("user", "I would like a table for four tomorrow evening, my name is Dana Smith."),
    ("assistant", "Done: a table for four tomorrow at seven, under Dana Smith."),
    ("user", "Thank you, goodbye."),
]
NO_PARTS = {"summary": {"enabled": False}}


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


@pytest.fixture
def openai_brain(settings: Any, chat: ChatServer) -> ChatServer:
    settings.LLM_PROVIDER = "openai"
    settings.LLM_BASE_URL = chat.base_url
    settings.LLM_MODEL = MODEL
    settings.LLM_API_KEY = KEY
    settings.CALL_ANALYSIS_TIMEOUT_SECONDS = 10
    settings.BACKGROUND_WORK = "inline"  # the suite's: the analysis runs in the caller's thread, on commit
    return chat


def plan(**parts: Any) -> dict[str, Any]:
    from agents.analysis_plan import normalize_plan

    return normalize_plan(parts)


def ended_call(agent: Any, capture: Any, said: list[tuple[str, str]] = TALK) -> Call:
    call = call_start(agent=agent, channel="web")
    for role, content in said:
        call_message_add(call=call, role=role, content=content)
    with capture(execute=True):
        call_finish(call=call, status="completed")
    return call


def analysis_of(owner: Any, call: Call) -> dict[str, Any]:
    response = owner.client.get(f"/public/v1/calls/{call.pk}")
    assert response.status_code == 200, response.content
    return response.json()["analysis"]


def answer(value: Any, usage: tuple[int, int] = (100, 20)) -> Text:
    return Text(value if isinstance(value, str) else json.dumps(value), usage=usage)


# --- openai ------------------------------------------------------------------------------------------


def test_the_openai_brain_summarizes_extracts_valid_fields_and_evaluates(
    owner, make_agent, openai_brain, django_capture_on_commit_callbacks
):
    agent = make_agent(
        owner.organization,
        name="Ava",
        analysis_plan=plan(
            summary={"prompt": "Say who called."},
            structuredData={"schema": BOOKING},
            successEvaluation=EVALUATION,
        ),
    )
    openai_brain.analysis(
        answer({"summary": "Dana Smith booked a table for four for tomorrow evening."}, (120, 15)),
        answer({"name": "Dana Smith", "party_size": 4}, (140, 10)),
        answer({"result": True, "reasoning": "A table for four was booked."}, (110, 12)),
    )
    call = ended_call(agent, django_capture_on_commit_callbacks)

    assert analysis_of(owner, call) == {
        "status": "completed",
        "summary": "Dana Smith booked a table for four for tomorrow evening.",
        "structuredData": {"name": "Dana Smith", "party_size": 4},
        "successEvaluation": {"result": True, "reasoning": "A table for four was booked.", "scale": "pass-fail"},
        "parts": {"summary": "completed", "structuredData": "completed", "successEvaluation": "completed"},
        "model": MODEL,
        "usage": {"inputTokens": 370, "outputTokens": 37},
        "error": None,
    }
    # One request per part, asking for JSON, with the transcript; none of them took a conversation reply.
    summary, extraction, evaluation = openai_brain.analysis_requests
    assert openai_brain.requests == []
    for request in (summary, extraction, evaluation):
        assert request.body["model"] == MODEL and request.body["response_format"] == {"type": "json_object"}
        assert request.headers["Authorization"] == f"Bearer {KEY}"
        assert "Caller: I would like a table for four tomorrow evening" in request.messages[-1]["content"]
    assert "Say who called." in summary.messages[0]["content"]
    # The plan's schema is in the system message (as stored: jsonb may order its keys differently).
    assert json.loads(extraction.messages[0]["content"].split("\n")[1]) == BOOKING
    assert "The caller got a table booked." in evaluation.messages[0]["content"]


def test_a_score_evaluation_is_an_integer_from_1_to_10(
    owner, make_agent, openai_brain, django_capture_on_commit_callbacks
):
    agent = make_agent(
        owner.organization,
        analysis_plan=plan(summary={"enabled": False}, successEvaluation={**EVALUATION, "scale": "1-10"}),
    )
    openai_brain.analysis(answer({"result": 8, "reasoning": "Booked, but the time was not confirmed."}))
    analysis = analysis_of(owner, ended_call(agent, django_capture_on_commit_callbacks))
    assert analysis["status"] == "completed"
    assert analysis["successEvaluation"] == {
        "result": 8,
        "reasoning": "Booked, but the time was not confirmed.",
        "scale": "1-10",
    }


def test_an_invalid_answer_is_repaired_once_with_the_validation_error(
    owner, make_agent, openai_brain, django_capture_on_commit_callbacks
):
    agent = make_agent(
        owner.organization, analysis_plan=plan(summary={"enabled": False}, structuredData={"schema": BOOKING})
    )
    openai_brain.analysis(
        answer({"name": "Dana Smith", "party_size": "four"}, (100, 10)),
        answer({"name": "Dana Smith", "party_size": 4}, (130, 9)),
    )
    analysis = analysis_of(owner, ended_call(agent, django_capture_on_commit_callbacks))

    assert analysis["status"] == "completed"
    assert analysis["structuredData"] == {"name": "Dana Smith", "party_size": 4}
    assert analysis["usage"] == {"inputTokens": 230, "outputTokens": 19}
    first, repair = openai_brain.analysis_requests
    assert repair.messages[: len(first.messages)] == first.messages
    assert repair.messages[-2] == {"role": "assistant", "content": '{"name": "Dana Smith", "party_size": "four"}'}
    assert repair.messages[-1]["role"] == "user"
    assert "'four' is not of type 'integer' (at party_size)" in repair.messages[-1]["content"]


def test_an_answer_still_invalid_after_the_repair_fails_with_the_reason(
    owner, make_agent, openai_brain, django_capture_on_commit_callbacks
):
    agent = make_agent(owner.organization, analysis_plan=plan(structuredData={"schema": BOOKING}))
    openai_brain.analysis(
        answer({"summary": "Dana Smith booked a table."}),
        answer("Sure! Here is the data: name Dana Smith"),
        answer({"name": "Dana Smith"}),
    )
    analysis = analysis_of(owner, ended_call(agent, django_capture_on_commit_callbacks))

    assert len(openai_brain.analysis_requests) == 3  # the summary, the extraction and its one repair
    assert analysis["status"] == "failed"
    assert analysis["parts"] == {"summary": "completed", "structuredData": "failed"}
    assert analysis["summary"] == "Dana Smith booked a table."  # what did run is kept
    assert analysis["structuredData"] is None
    assert analysis["error"] == (
        "structuredData: the model's answer is not valid against the plan's schema after one repair: "
        "'party_size' is a required property"
    )


def test_a_failing_model_server_fails_the_part_without_showing_the_key(
    owner, make_agent, openai_brain, django_capture_on_commit_callbacks
):
    agent = make_agent(owner.organization)  # the default plan: a summary
    openai_brain.analysis(Error(401, f"Incorrect API key provided: {KEY}", type="invalid_request_error"))
    analysis = analysis_of(owner, ended_call(agent, django_capture_on_commit_callbacks))

    assert len(openai_brain.analysis_requests) == 1
    assert analysis["status"] == "failed" and analysis["parts"] == {"summary": "failed"}
    assert analysis["error"].startswith("summary: the language model server answered HTTP 401")
    assert KEY not in json.dumps(analysis)


def test_a_model_that_does_not_answer_in_time_fails_the_part(
    owner, make_agent, openai_brain, settings, django_capture_on_commit_callbacks
):
    settings.CALL_ANALYSIS_TIMEOUT_SECONDS = 0.5
    agent = make_agent(owner.organization)
    openai_brain.analysis(Text(json.dumps({"summary": "Too late."}), delay=3.0))
    analysis = analysis_of(owner, ended_call(agent, django_capture_on_commit_callbacks))
    assert analysis["status"] == "failed"
    assert analysis["error"] == "summary: the language model did not answer within 0.5 s"


# --- embedded ----------------------------------------------------------------------------------------


def test_the_embedded_brain_summarizes_and_fills_fields_from_the_callers_words(
    owner, make_agent, settings, django_capture_on_commit_callbacks
):
    settings.BACKGROUND_WORK = "inline"  # the suite's: the analysis runs in the caller's thread, on commit
    schema = {
        "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email", "description": "The caller's e-mail address"},
            "party_size": {"type": "integer", "description": "How many people the table is for"},
            "order_number": {"type": "string", "description": "The order number"},
        },
    }
    agent = make_agent(
        owner.organization, analysis_plan=plan(structuredData={"schema": schema}, successEvaluation=EVALUATION)
    )
    said = [
        ("assistant", "Hi, I'm Ava, an AI agent. How can I help?"),
        ("user", "I need a table for four people."),
        # The agent's words are not read: this number is not the caller's.
        ("assistant", "Sure. Your reference is order 1234. Anything else?"),
        ("user", "Yes, send it to dana at example dot com please."),
    ]
    call = ended_call(agent, django_capture_on_commit_callbacks, said)
    analysis = analysis_of(owner, call)

    assert analysis["status"] == "completed"
    assert analysis["structuredData"] == {"party_size": 4, "email": "dana@example.com"}
    # What the caller wanted (realtime/analysis/summary.py), not the transcript; it becomes the call's own
    # `summary`.
    assert analysis["summary"] == "Caller: I need a table for four people."
    assert analysis["summary"] == owner.client.get(f"/public/v1/calls/{call.pk}").json()["summary"]
    assert analysis["parts"] == {"summary": "completed", "structuredData": "completed", "successEvaluation": "skipped"}
    assert analysis["successEvaluation"] is None
    assert analysis["error"] == (
        "successEvaluation: the embedded brain does not evaluate calls; successEvaluation needs LLM_PROVIDER=openai"
    )
    assert analysis["model"] == "embedded" and analysis["usage"] == {"inputTokens": 0, "outputTokens": 0}


# --- skipped, pending, never in the way ------------------------------------------------------------------


def test_a_call_without_caller_words_or_without_parts_is_skipped(
    owner, make_agent, openai_brain, django_capture_on_commit_callbacks
):
    agent = make_agent(owner.organization)
    silent = ended_call(agent, django_capture_on_commit_callbacks, [("assistant", "Hello? Are you there?")])
    assert analysis_of(owner, silent)["status"] == "skipped"
    assert analysis_of(owner, silent)["error"] == "The caller said nothing: there is nothing to analyse."

    quiet_agent = make_agent(owner.organization, analysis_plan=plan(**NO_PARTS))
    off = analysis_of(owner, ended_call(quiet_agent, django_capture_on_commit_callbacks))
    assert off["status"] == "skipped" and off["error"] == "Every part of the agent's analysisPlan is off."
    assert openai_brain.analysis_requests == []  # nothing was asked of the model


def test_an_active_call_has_no_analysis(owner, make_agent):
    call = call_start(agent=make_agent(owner.organization), channel="web")
    assert analysis_of(owner, call) is None


@pytest.mark.django_db(transaction=True)
def test_the_analysis_runs_in_the_background_and_never_delays_the_end_of_the_call(
    owner, make_agent, openai_brain, settings
):
    settings.BACKGROUND_WORK = "inprocess"  # the server's way: the analysis on a background thread of this process
    # Nothing else of a serving process starts here: no heartbeat loop for the call (heartbeat_at stays empty,
    # as in the suite) and no upkeep sweep (the timer call_start would start).
    settings.LIVENESS_HEARTBEAT_SECONDS = 0
    settings.CALLS_MAINTENANCE_SECONDS = 0
    agent = make_agent(owner.organization)
    answer, asked = Gate(), Gate()
    openai_brain.analysis(Text(json.dumps({"summary": "Dana booked a table."}), hold=answer, holding=asked))
    call = call_start(agent=agent, channel="web")
    for role, content in TALK:
        call_message_add(call=call, role=role, content=content)

    # The model answers only once the test lets it: call_finish returns before that (it would otherwise wait
    # until the analysis request timed out, and the analysis would have failed).
    call_finish(call=call, status="completed")
    assert analysis_of(owner, call)["status"] == "pending"
    polled_sync(lambda: asked.opened, what="the analysis asking the model", timeout=20, every=0.05)
    assert analysis_of(owner, call)["status"] == "pending"
    answer.open()
    analysis = polled_sync(
        lambda: (found := analysis_of(owner, call))["status"] != "pending" and found,
        what="the analysis finished",
        timeout=20,
        every=0.1,
    )
    assert analysis["status"] == "completed" and analysis["summary"] == "Dana booked a table."
