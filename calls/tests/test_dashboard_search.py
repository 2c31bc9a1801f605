"""Finding calls and log lines in the dashboard: the calls list's search box (words said in the call, part of
a call id, names and numbers) and the agent log's filters (by agent, by call). PostgreSQL searches
transcripts with full-text search, SQLite by substring: run these on both (DATABASE_URL)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from calls import selectors, services
from calls.logging import LogSession, agent_log, flush_agent_logs
from calls.models import Call


def _call(agent: Any, *lines: str, from_number: str = "+14155550100") -> Call:
    call = services.call_start(agent=agent, channel="phone", from_number=from_number)
    for number, line in enumerate(lines):
        services.call_message_add(call=call, role="user" if number % 2 == 0 else "assistant", content=line)
    return services.call_finish(call=call, status="completed")


@pytest.fixture
def conversations(agent: Any, outsider: Any, make_agent: Any) -> dict[str, Call]:
    other = make_agent(outsider.organization, name="Max", status="active")
    return {
        "refund": _call(agent, "Hello, I want my money back.", "I can help with refunds. Which order?", "Order 4417."),
        "delivery": _call(agent, "Where is my parcel?", "Your delivery arrives Friday."),
        "refund elsewhere": _call(other, "Refund please", "Which order?", from_number="+442071838750"),
        "silent": _call(agent),
    }


def _staff(client: Client, *, transcripts: bool) -> Client:
    user = User.objects.create_user("staff", password="pw-staff-1234", is_staff=True)
    for codename in ("view_call", "view_agentlog", *(("view_callmessage",) if transcripts else ())):
        user.user_permissions.add(Permission.objects.get(codename=codename))
    client.force_login(user)
    return client


def _found(client: Client, url: str, query: dict[str, str]) -> set[Any]:
    response = client.get(url, query)
    assert response.status_code == 200
    assert "?e=1" not in response.get("Location", "")
    return {row.pk for row in response.context["cl"].result_list}


def _search(client: Client, text: str, **filters: str) -> set[Any]:
    return _found(client, "/admin/calls/call/", {"q": text, **filters})


@pytest.mark.django_db
@pytest.mark.parametrize("id_list_max", [selectors.ID_LIST_MAX, 0], ids=["few matches", "many matches"])
def test_staff_who_read_transcripts_find_calls_by_words_said_in_them(client, conversations, monkeypatch, id_list_max):
    # Matches up to ID_LIST_MAX go to the database as a list of ids, more as a subquery: both find the same.
    monkeypatch.setattr(selectors, "ID_LIST_MAX", id_list_max)
    _staff(client, transcripts=True)
    refund, elsewhere = conversations["refund"].pk, conversations["refund elsewhere"].pk

    assert _search(client, "refund") == {refund, elsewhere}  # "Refund", and "refunds" (a word's start)
    assert _search(client, "REFUNDS") == {refund}  # any case
    # Every word, in any message of the call.
    assert _search(client, "money order") == {refund}
    assert _search(client, "money parcel") == set()
    assert _search(client, "parcel") == {conversations["delivery"].pk}
    assert _search(client, "refund", status__exact="failed") == set()


@pytest.mark.django_db
def test_staff_who_may_not_read_transcripts_cannot_search_them(client, conversations):
    _staff(client, transcripts=False)

    assert _search(client, "parcel") == set()
    assert _search(client, "Max") == {conversations["refund elsewhere"].pk}  # names still


@pytest.mark.django_db
def test_the_start_of_a_call_id_finds_the_call(client, conversations):
    _staff(client, transcripts=False)
    call_id = str(conversations["delivery"].pk)

    assert _search(client, call_id) == {conversations["delivery"].pk}
    assert _search(client, call_id[:8]) == {conversations["delivery"].pk}
    assert _search(client, call_id[:16].upper()) == {conversations["delivery"].pk}  # across a dash, any case
    assert _search(client, call_id.replace("-", "")[:20]) == {conversations["delivery"].pk}
    assert conversations["delivery"].pk not in _search(client, call_id[:5])  # too short to be an id
    assert _search(client, call_id[:8] + "-zz") == set()


@pytest.mark.django_db
@pytest.mark.parametrize("id_list_max", [selectors.ID_LIST_MAX, 0], ids=["few matches", "many matches"])
def test_names_numbers_and_odd_input_search_as_before(client, conversations, owner, monkeypatch, id_list_max):
    monkeypatch.setattr(selectors, "ID_LIST_MAX", id_list_max)
    _staff(client, transcripts=True)
    ours = {conversations[name].pk for name in ("refund", "delivery", "silent")}

    assert _search(client, "+4420718") == {conversations["refund elsewhere"].pk}
    assert _search(client, "(415) 555-0100") == ours  # written as people write numbers
    conversations["delivery"].agent.delete()  # its calls keep the name the agent had
    assert _search(client, "support") == ours
    assert _search(client, owner.organization.name) == ours
    assert _search(client, str(owner.organization.pk)) == ours
    for odd in ("'&|!:*", "refund:* & !x", "()", "  ", "ü", "a" * 300):
        _search(client, odd)  # a page, not an error


@pytest.mark.django_db
def test_the_agent_log_narrows_to_an_agent_or_to_one_call(client, agent, make_agent, owner):
    _staff(client, transcripts=False)
    other = make_agent(owner.organization, name="Other", status="active")
    first = services.call_start(agent=agent, channel="web")
    second = services.call_start(agent=agent, channel="web")
    for call, session_id in ((first, "sess01"), (second, "sess02")):
        session = LogSession(agent.organization_id, agent.pk, session_id)
        agent_log(session, "info", "session started", callId=str(call.pk))
        agent_log(session, "info", f"turn of {session_id}")
        services.call_finish(call=call, status="completed")
        agent_log(session, "info", "session ended", callId=str(call.pk))
    agent_log(LogSession(agent.organization_id, other.pk, "sess03"), "warn", "other agent")
    flush_agent_logs()
    logs = "/admin/calls/agentlog/"

    def messages(query: dict[str, str]) -> set[str]:
        response = client.get(logs, query)
        assert response.status_code == 200
        return {line.content["message"] for line in response.context["cl"].result_list}

    assert messages({"agent": str(other.pk)}) == {"other agent"}
    assert client.get(logs, {"agent": str(agent.pk)}).context["cl"].result_count == 6
    assert messages({"call": str(second.pk)}) == {"session started", "turn of sess02", "session ended"}
    assert messages({"q": str(first.pk)}) == {"session started", "turn of sess01", "session ended"}
    assert messages({"call": "not-a-call"}) == set()
    page = client.get(logs, {"call": str(second.pk)}).content.decode()
    assert str(second) in page  # the filter names the call it narrows to
    choices = client.get(logs).content.decode()
    assert f"?agent={agent.pk}" in choices and f"?agent={other.pk}" in choices
