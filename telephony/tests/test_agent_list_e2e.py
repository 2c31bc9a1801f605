"""GET /public/v1/agents through the project's ASGI application in the test's process
(testing/inprocess.py), which keeps each organization's rendered list between requests
(telephony/agent_list.py, per process): every change shows in the very next list, whoever makes it (the
API, another process writing the database, a bulk update), call figures are read for each request, and a
long list is gzip-compressed for a client that accepts it.

"Another process" is a write from the test's own thread that goes around the application's hooks (a
queryset `.update()`, no model save, no signal): all the application can learn of it is what another
process's write leaves, the database triggers' counter."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.utils import timezone

from accounts.services import organization_create
from agents.models import Agent
from calls.models import Call, CallStatus
from testing.factories import AgentFactory, CallFactory
from testing.inprocess import InProcessServer, serving
from testing.waiting import polled

pytestmark = pytest.mark.django_db(transaction=True)

SCHEMA = {"type": "object", "properties": {"orderId": {"type": "string"}}, "required": ["orderId"]}


@pytest.fixture
def server(settings: Any) -> Iterator[InProcessServer]:
    with serving(settings, {"REALTIME_PRELOAD": False}) as started:
        yield started


class Api:
    def __init__(self, server: InProcessServer, name: str) -> None:
        self.organization, issued = organization_create(name=name, plan_code="agency")
        self.headers = {"Authorization": f"Bearer {issued.raw_key}"}
        self.client = server.http(headers=self.headers)

    def create(self, name: str, **fields: Any) -> str:
        response = self.client.post("/public/v1/agents", json={"name": name, "instructions": "Help callers.", **fields})
        assert response.status_code == 200, response.text
        return str(response.json()["id"])

    def listed(self) -> list[dict[str, Any]]:
        response = self.client.get("/public/v1/agents")
        assert response.status_code == 200, response.text
        return response.json()

    def one(self, agent_id: str) -> dict[str, Any]:
        """The agent as the list shows it, checked against GET /agents/{id} (read afresh every time)."""
        item = next(a for a in self.listed() if a["id"] == agent_id)
        detail = self.client.get(f"/public/v1/agents/{agent_id}")
        assert detail.status_code == 200
        assert {k: v for k, v in detail.json().items() if k in item} == item
        return item


def raw_get(server: InProcessServer, path: str, headers: dict[str, str]) -> tuple[httpx.Headers, bytes]:
    """GET `path`: the answer's headers and its body as sent (not decoded)."""

    async def get() -> tuple[httpx.Headers, bytes]:
        async with server.ahttp(headers=headers) as client, client.stream("GET", path) as response:
            return response.headers, b"".join([part async for part in response.aiter_raw()])

    return async_to_sync(get)()


def test_every_change_shows_in_the_next_list_whoever_makes_it(server):
    api = Api(server, "Lighthouse Dental")
    assert api.listed() == []
    agent_id = api.create("Reception", serverUrl="https://hooks.example.com/agent")
    assert [a["name"] for a in api.listed()] == ["Reception"]

    updated_at = api.one(agent_id)["updatedAt"]
    patched = api.client.patch(
        f"/public/v1/agents/{agent_id}", json={"name": "Front desk", "expectedUpdatedAt": updated_at}
    )
    assert patched.status_code == 200, patched.text
    assert api.one(agent_id)["name"] == "Front desk"

    tool = api.client.post(
        f"/public/v1/agents/{agent_id}/tools",
        json={"name": "lookup_order", "description": "Look up an order", "parameterSchema": SCHEMA},
    )
    assert tool.status_code == 201, tool.text
    assert api.one(agent_id)["toolCount"] == 1

    document = api.client.post(
        f"/public/v1/agents/{agent_id}/knowledge",
        json={"name": "Hours", "description": "Opening hours", "content": "We open at nine on weekdays."},
    )
    assert document.status_code == 200, document.text
    assert api.one(agent_id)["knowledgeDocumentCount"] == 1

    # Another process writes the database (this test's, not the server's): a bulk update, no model save.
    Agent.objects.filter(pk=agent_id).update(instructions="Book cleanings.", name="Front desk (bulk)")
    item = api.one(agent_id)
    assert (item["name"], item["instructions"]) == ("Front desk (bulk)", "Book cleanings.")

    removed = api.client.delete(f"/public/v1/agents/{agent_id}/tools/{tool.json()['id']}")
    assert removed.status_code == 200
    assert api.one(agent_id)["toolCount"] == 0

    second = api.create("After hours")
    assert [a["id"] for a in api.listed()] == [agent_id, second]
    assert api.client.delete(f"/public/v1/agents/{agent_id}").status_code == 200
    assert [a["id"] for a in api.listed()] == [second]


def test_call_figures_are_current_in_every_list(server):
    api = Api(server, "Harbour Taxis")
    agent_id = api.create("Dispatch")
    quiet_id = api.create("Lost property")
    assert (api.one(agent_id)["callsToday"], api.one(agent_id)["successRate"]) == (0, 0.0)

    now = timezone.now()
    agent = Agent.objects.get(pk=agent_id)

    def call(status: str, minutes_ago: int) -> Call:
        return CallFactory.create(agent=agent, status=status, started_at=now - timedelta(minutes=minutes_ago))

    call(CallStatus.COMPLETED, 3)
    live = call(CallStatus.ACTIVE, 1)
    assert (api.one(agent_id)["callsToday"], api.one(agent_id)["successRate"]) == (2, 100.0)
    assert (api.one(quiet_id)["callsToday"], api.one(quiet_id)["successRate"]) == (0, 0.0)

    Call.objects.filter(pk=live.pk).update(status=CallStatus.FAILED)  # a call ends: the rate follows at once
    assert api.one(agent_id)["successRate"] == 50.0
    call(CallStatus.COMPLETED, 60 * 24 * 8)  # older than the rate's seven days, and not today's
    assert (api.one(agent_id)["callsToday"], api.one(agent_id)["successRate"]) == (2, 50.0)


def test_a_list_shows_only_its_own_organizations_agents(server):
    first, second = Api(server, "North Clinic"), Api(server, "South Clinic")
    first.create("North reception")
    assert [a["name"] for a in first.listed()] == ["North reception"]
    assert second.listed() == []
    second.create("South reception")
    assert [a["name"] for a in first.listed()] == ["North reception"]
    assert [a["name"] for a in second.listed()] == ["South reception"]


def test_a_long_list_is_gzip_compressed_for_a_client_that_accepts_it(server):
    api = Api(server, "Call Centre")
    AgentFactory.create_batch(60, organization=api.organization, instructions="Help. " * 40)
    plain = api.client.get("/public/v1/agents", headers={"Accept-Encoding": "identity"})
    assert "Content-Encoding" not in plain.headers and plain.headers["Vary"] == "Accept-Encoding"
    assert len(plain.content) > 16 * 1024 and len(plain.json()) == 60

    squeezed, raw = raw_get(server, "/public/v1/agents", {**api.headers, "Accept-Encoding": "gzip"})
    assert squeezed["Content-Encoding"] == "gzip"
    assert len(raw) < len(plain.content) / 5 and json.loads(gzip.decompress(raw)) == plain.json()

    refused = api.client.get("/public/v1/agents", headers={"Accept-Encoding": "gzip;q=0, identity"})
    assert "Content-Encoding" not in refused.headers and refused.content == plain.content

    indented = api.client.get("/public/v1/agents", headers={"Accept": "application/json; indent=2"})
    assert indented.text.startswith('[\n  {\n    "id": ') and indented.json() == plain.json()

    short = Api(server, "Corner Shop")
    short.create("Till")
    small = short.client.get("/public/v1/agents", headers={"Accept-Encoding": "gzip"})
    assert "Content-Encoding" not in small.headers and [a["name"] for a in small.json()] == ["Till"]


async def _threads_and_files() -> tuple[int, int]:
    """This process's threads and open files (the application runs here), once the clients' connections
    are gone: the counts of two polls in a row 0.2 s apart that agree."""
    last = [(-1, -1)]

    def agreeing() -> tuple[int, int] | None:
        now = len(os.listdir("/proc/self/task")), len(os.listdir("/proc/self/fd"))
        agreed = now == last[0]
        last[0] = now
        return now if agreed else None

    return await polled(agreeing, what="the process's threads and files settling", timeout=10, every=0.2)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads the process's threads and files in /proc")
@pytest.mark.usefixtures("close_db_threads")
async def test_many_reads_leave_the_server_with_the_threads_and_files_it_had(server):
    """Each request runs on a thread of its own; the threads are kept for the next requests (with their
    database connections) instead of started and stopped for every request (voiceagent/http.py, the
    application's HTTP handler), and nothing a request opens (a database or Redis connection) is left
    behind. One client reads after another's answer, so the application never needs more threads than
    the first reads made. The application runs in this process, in this test's event loop: its threads
    and files are this process's."""
    api = await sync_to_async(Api)(server, "Busy Desk")
    await sync_to_async(api.create)("Front desk")

    async def reads(requests: int) -> tuple[int, int]:
        async with server.ahttp(headers=api.headers) as client:
            assert {(await client.get("/public/v1/agents")).status_code for _ in range(requests)} == {200}
        return await _threads_and_files()

    threads, files = await reads(40)
    more_threads, more_files = await reads(300)
    assert more_threads <= threads + 1, (threads, more_threads)
    assert more_files <= files + 4, (files, more_files)
