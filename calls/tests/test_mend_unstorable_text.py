"""The data migration calls/0012 mends rows stored before the edge refused text that cannot be stored
(a lone surrogate kept as a JSON escape, NUL in text): the organization's call reads answer again, and a
second run changes nothing. Run through `apps`, as `migrate` runs it."""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

import pytest
from django.apps import apps
from django.db import connection

from calls.models import Call, CallMessage
from realtime.models import AgentTest
from testing.factories import CallFactory

pytestmark = pytest.mark.django_db

migration = importlib.import_module("calls.migrations.0013_mend_unstorable_text")


def mend() -> int:
    return int(migration.mend(apps, SimpleNamespace(connection=connection)))


@pytest.mark.skipif(connection.vendor == "postgresql", reason="PostgreSQL cannot hold such rows")
def test_poisoned_rows_are_mended_once_and_the_call_reads_again(owner: Any, make_agent: Any) -> None:
    agent = make_agent(owner.organization, name="Ava")
    call = CallFactory(agent=agent, variables={"name": "Ada\ud800"}, metadata={"crm\x00": ["x\udfff"]})
    CallMessage.objects.create(
        call=call, role="user", content="Hello\x00 there", occurred_at=call.started_at, sequence=1
    )
    clean = CallFactory(agent=agent, variables={"name": "Zoë 😀"})
    test = AgentTest.objects.create(
        organization=owner.organization, agent=agent, name="Greets", turns=[{"user": "Bye\ud800"}]
    )
    # Before the mend the API already answers (text it cannot write goes out mended), the row is as it was.
    before = owner.client.get(f"/public/v1/calls/{call.pk}")
    assert before.status_code == 200 and before.json()["variables"] == {"name": "Ada\ufffd"}
    assert Call.objects.get(pk=call.pk).variables == {"name": "Ada\ud800"}

    assert mend() == 3  # the call, its message, the test

    call.refresh_from_db()
    assert (call.variables, call.metadata) == ({"name": "Ada\ufffd"}, {"crm": ["x\ufffd"]})
    assert CallMessage.objects.get(call=call).content == "Hello there"
    assert AgentTest.objects.get(pk=test.pk).turns == [{"user": "Bye\ufffd"}]
    assert Call.objects.get(pk=clean.pk).variables == {"name": "Zoë 😀"}
    detail = owner.client.get(f"/public/v1/calls/{call.pk}")
    assert detail.status_code == 200 and detail.json()["variables"] == {"name": "Ada\ufffd"}
    assert owner.client.get("/public/v1/calls").status_code == 200
    assert mend() == 0  # idempotent


@pytest.mark.skipif(connection.vendor == "postgresql", reason="PostgreSQL cannot hold such rows")
def test_rows_are_mended_in_pages(owner: Any, make_agent: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(migration, "BATCH", 2)
    agent = make_agent(owner.organization)
    calls = [CallFactory(agent=agent, variables={"n": f"{n}\x00"}) for n in range(5)]

    assert mend() == 5
    assert sorted(Call.objects.get(pk=c.pk).variables["n"] for c in calls) == ["0", "1", "2", "3", "4"]


@pytest.mark.skipif(connection.vendor == "postgresql", reason="PostgreSQL cannot hold such rows")
def test_a_row_not_mended_yet_does_not_fail_its_list(owner: Any, make_agent: Any) -> None:
    """Until the migration ran (or a row came in another way), the lists answer with the text mended."""
    call = CallFactory(agent=make_agent(owner.organization), metadata={"note": "\udc00 x"})

    listed = owner.client.get("/public/v1/calls")

    assert listed.status_code == 200
    assert [item["id"] for item in listed.json()] == [str(call.pk)]
    assert owner.client.get(f"/public/v1/calls/{call.pk}").json()["metadata"] == {"note": "\ufffd x"}
