"""agent_log (batched) and GET /public/v1/agents/{id}/logs."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from calls import tasks
from calls.logging import LogSession, agent_log, flush_agent_logs, new_session_id, stop_agent_log_writer
from calls.models import AgentLog
from testing.waiting import polled


def _session(agent, session_id: str | None = None) -> LogSession:
    return LogSession(
        organization_id=agent.organization_id, agent_id=agent.id, session_id=session_id or new_session_id()
    )


def _logs_url(agent, query: str = "") -> str:
    return f"/public/v1/agents/{agent.id}/logs" + (f"?{query}" if query else "")


def test_session_ids_are_6_lowercase_letters_or_digits():
    ids = {new_session_id() for _ in range(200)}
    assert all(re.fullmatch(r"[a-z0-9]{6}", i) for i in ids)
    assert len(ids) > 190


def test_lines_are_buffered_until_flushed_then_listed_newest_first(owner, agent):
    session = _session(agent)
    for index in range(3):
        agent_log(session, "info", f"turn {index}", turn=index)
    assert AgentLog.objects.count() == 0  # nothing written in the caller's path

    flush_agent_logs()

    body = owner.client.get(_logs_url(agent)).json()
    assert [log["content"]["message"] for log in body["logs"]] == ["turn 2", "turn 1", "turn 0"]
    first = body["logs"][0]
    assert first["content"] == {"message": "turn 2", "turn": 2}
    assert (first["accountId"], first["agentId"], first["sessionId"]) == (
        str(owner.organization.id),
        str(agent.id),
        session.session_id,
    )
    assert first["severity"] == "info"
    assert body["pagination"] == {"limit": 25, "offset": 0, "hasNextPage": False, "hasPreviousPage": False}


def test_agent_log_never_raises_and_always_keeps_a_message(owner, agent):
    session = _session(agent)
    agent_log(session, "warning", "aliased")
    agent_log(session, "loud", "unknown severity")
    agent_log(session, "error", "odd fields", blob=object(), message_override={"x": 1})
    agent_log(session, "debug", 12345)
    agent_log(None, "info", "no session")  # type: ignore[arg-type]  # what the test checks: no session
    flush_agent_logs()

    logs = {log.content["message"]: log for log in AgentLog.objects.all()}
    assert set(logs) == {"aliased", "unknown severity", "odd fields", "12345"}
    assert logs["aliased"].severity == "warn"
    assert logs["unknown severity"].severity == "info"
    assert isinstance(logs["odd fields"].content["blob"], str)


def test_lines_of_a_deleted_agent_are_dropped_without_losing_the_others(owner, agent, make_agent):
    doomed = make_agent(owner.organization, name="Doomed")
    agent_log(_session(doomed), "info", "gone")
    agent_log(_session(agent), "info", "kept")
    doomed.delete()

    flush_agent_logs()

    assert list(AgentLog.objects.values_list("content__message", flat=True)) == ["kept"]


def test_the_buffer_is_bounded(agent, settings):
    settings.AGENT_LOG_MAX_BUFFER = 5
    session = _session(agent)
    for index in range(8):
        agent_log(session, "debug", f"line {index}")
    flush_agent_logs()
    assert sorted(AgentLog.objects.values_list("content__message", flat=True)) == [f"line {i}" for i in range(3, 8)]


@pytest.mark.django_db(transaction=True)
async def test_a_chatty_session_is_written_in_batches_by_the_writer_thread(
    owner, make_agent, settings, thread_connections_closed
):
    settings.BACKGROUND_WORK = "inprocess"  # the process's writer thread runs (the suite's is inline)
    settings.AGENT_LOG_FLUSH_SECONDS = 60  # only the batch size can wake the writer within this test
    settings.AGENT_LOG_BATCH_SIZE = 50
    agent = await sync_to_async(make_agent)(owner.organization, status="active")
    session = _session(agent)
    for index in range(50):
        agent_log(session, "debug", f"frame {index}")

    async def written() -> bool:
        return await AgentLog.objects.acount() == 50

    await polled(written, what="the writer's 50 lines", timeout=10)

    assert await AgentLog.objects.acount() == 50
    await sync_to_async(stop_agent_log_writer)()


def _make_logs(agent, count: int, session_id: str = "abc123", severity: str = "info") -> None:
    session = _session(agent, session_id)
    for index in range(count):
        agent_log(session, severity, f"{severity} {index}")
    flush_agent_logs()


def test_pagination_flags(owner, agent):
    _make_logs(agent, 5)

    first = owner.client.get(_logs_url(agent, "limit=2")).json()
    middle = owner.client.get(_logs_url(agent, "limit=2&offset=2")).json()
    last = owner.client.get(_logs_url(agent, "limit=2&offset=4")).json()
    exact = owner.client.get(_logs_url(agent, "limit=5")).json()
    beyond = owner.client.get(_logs_url(agent, "limit=2&offset=10")).json()

    assert [log["content"]["message"] for log in first["logs"]] == ["info 4", "info 3"]
    assert first["pagination"] == {"limit": 2, "offset": 0, "hasNextPage": True, "hasPreviousPage": False}
    assert [log["content"]["message"] for log in middle["logs"]] == ["info 2", "info 1"]
    assert middle["pagination"] == {"limit": 2, "offset": 2, "hasNextPage": True, "hasPreviousPage": True}
    assert [log["content"]["message"] for log in last["logs"]] == ["info 0"]
    assert last["pagination"] == {"limit": 2, "offset": 4, "hasNextPage": False, "hasPreviousPage": True}
    assert exact["pagination"]["hasNextPage"] is False
    assert beyond["logs"] == [] and beyond["pagination"]["hasPreviousPage"] is True


def test_filters_by_severity_and_session(owner, agent):
    _make_logs(agent, 2, "sess01", "info")
    _make_logs(agent, 3, "sess02", "error")

    errors = owner.client.get(_logs_url(agent, "severity=error")).json()["logs"]
    session = owner.client.get(_logs_url(agent, "sessionId=sess01")).json()["logs"]
    both = owner.client.get(_logs_url(agent, "sessionId=sess01&severity=error")).json()["logs"]

    assert len(errors) == 3 and {log["severity"] for log in errors} == {"error"}
    assert len(session) == 2 and {log["sessionId"] for log in session} == {"sess01"}
    assert both == []


def test_only_the_last_24_hours_are_listed(owner, agent):
    _make_logs(agent, 3)
    old, edge, recent = AgentLog.objects.order_by("sequence")
    now = timezone.now()
    AgentLog.objects.filter(pk=old.pk).update(timestamp=now - timedelta(hours=24, minutes=1))
    AgentLog.objects.filter(pk=edge.pk).update(timestamp=now - timedelta(hours=23, minutes=59))

    body = owner.client.get(_logs_url(agent)).json()

    assert [log["id"] for log in body["logs"]] == [str(recent.id), str(edge.id)]


def test_logs_past_the_retention_window_are_purged(agent, settings):
    settings.AGENT_LOG_RETENTION_HOURS = 72
    _make_logs(agent, 3)
    expired, kept_old, _ = AgentLog.objects.order_by("sequence")
    AgentLog.objects.filter(pk=expired.pk).update(timestamp=timezone.now() - timedelta(hours=73))
    AgentLog.objects.filter(pk=kept_old.pk).update(timestamp=timezone.now() - timedelta(hours=30))

    assert tasks.purge_agent_logs.delay().get() == 1
    assert set(AgentLog.objects.values_list("pk", flat=True)) == {kept_old.pk, _.pk}


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=abc", "limit"),
        ("offset=-1", "offset"),
        ("offset=x", "offset"),
        ("offset=99999999999999999999999", "offset"),
        ("severity=warning", "severity"),
        ("severity=", "severity"),
        ("sessionId=abc", "sessionId"),
        ("sessionId=abcdefg", "sessionId"),
        ("sessionId=ab%20c12", "sessionId"),
    ],
)
def test_invalid_log_query_parameters_are_a_400(owner, agent, query, field):
    response = owner.client.get(_logs_url(agent, query))
    assert response.status_code == 400
    assert field in response.json()["issues"]


def test_unknown_log_query_parameters_are_ignored(owner, agent):
    assert owner.client.get(_logs_url(agent, "page=2")).status_code == 200


def test_logs_of_another_organizations_agent_are_404(owner, outsider, agent):
    _make_logs(agent, 1)
    assert outsider.client.get(_logs_url(agent)).status_code == 404
    assert owner.client.get(f"/public/v1/agents/{uuid.uuid4()}/logs").status_code == 404
    assert owner.client.get("/public/v1/agents/nope/logs").status_code == 400
