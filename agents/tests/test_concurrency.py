"""Races that a user would notice: the plan allowance and optimistic concurrency under parallel requests.

Real threads, each with its own database connection, against the real database (row locks on
PostgreSQL, IMMEDIATE transactions on SQLite).
"""

import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from accounts.services import organization_create
from agents.models import Agent

BASE = {"name": "Support", "instructions": "Help callers."}


def run_parallel(requests):
    """Start every request together (behind a barrier) and return their status codes."""
    barrier = threading.Barrier(len(requests))
    results = [None] * len(requests)

    def worker(index, request):
        try:
            barrier.wait()
            results[index] = request()
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i, r)) for i, r in enumerate(requests)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def client_for(raw_key):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    return client


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("plan", "cap"), [("trial", 1), ("launch", 2)])
def test_parallel_activations_never_exceed_the_allowance(plan, cap):
    organization, issued = organization_create(name="Racer", plan_code=plan)
    setup = client_for(issued.raw_key)
    ids = [setup.post("/public/v1/agents", {**BASE, "name": f"A{i}"}, format="json").json()["id"] for i in range(6)]

    def activate(agent_id):
        return lambda: (
            client_for(issued.raw_key)
            .put(f"/public/v1/agents/{agent_id}", {**BASE, "status": "active"}, format="json")
            .status_code
        )

    statuses = run_parallel([activate(agent_id) for agent_id in ids])
    assert sorted(statuses) == [200] * cap + [409] * (6 - cap)
    assert Agent.objects.filter(organization=organization, status="active").count() == cap


@pytest.mark.django_db(transaction=True)
def test_parallel_stale_patches_yield_exactly_one_success():
    _organization, issued = organization_create(name="Editors", plan_code="studio")
    setup = client_for(issued.raw_key)
    agent_id = setup.post("/public/v1/agents", BASE, format="json").json()["id"]
    expected = setup.get("/public/v1/agents").json()[0]["updatedAt"]

    def edit(n):
        return lambda: (
            client_for(issued.raw_key)
            .patch(
                f"/public/v1/agents/{agent_id}", {"expectedUpdatedAt": expected, "name": f"Editor {n}"}, format="json"
            )
            .status_code
        )

    statuses = run_parallel([edit(n) for n in range(6)])
    assert sorted(statuses) == [200] + [409] * 5
    assert Agent.objects.get(pk=agent_id).name.startswith("Editor ")
