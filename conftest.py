"""Shared test personas: an owner organization, a teammate key in it, and an outsider organization."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Organization
from accounts.services import apikey_create, organization_create
from agents.models import Agent


def pytest_configure() -> None:
    # Tasks run in-process in tests, also when REDIS_URL names a broker (no worker runs beside the
    # suite). A dedicated test proves the broker path with a real worker.
    from voiceagent.celery import app

    app.conf.task_always_eager = True
    app.conf.task_eager_propagates = True

    # No background writer threads in tests (they would write outside the test's transaction):
    # agent logs wait for calls.logging.flush_agent_logs(), upkeep runs when a test calls it.
    from django.conf import settings

    settings.AGENT_LOG_FLUSH_SECONDS = 0
    settings.CALLS_MAINTENANCE_SECONDS = 0
    # No heartbeat thread either (voiceagent/liveness.py): calls and documents keep heartbeat_at empty.
    settings.LIVENESS_HEARTBEAT_SECONDS = 0
    # Knowledge ingestion runs inside the upload request, in the test's transaction (the background
    # worker of the serving process is proven through real servers: realtime/tests/test_upkeep_e2e.py).
    settings.KNOWLEDGE_INGEST_INLINE = True


@pytest.fixture(autouse=True)
def _seeded_plans(request: Any) -> None:
    """Plans come from a data migration; a transactional test's flush removes them, so put them back
    for every test that uses the database."""
    names = request.fixturenames
    marker = request.node.get_closest_marker("django_db")
    transactional = "transactional_db" in names or bool(marker and marker.kwargs.get("transaction"))
    if not (marker or "db" in names or transactional):
        return
    request.getfixturevalue("transactional_db" if transactional else "db")
    from django.apps import apps

    importlib.import_module("accounts.migrations.0002_seed_plans").seed(apps, None)
    importlib.import_module("accounts.migrations.0004_seed_plan_limits").seed(apps, None)


@dataclass
class Persona:
    organization: Organization
    api_key: str
    client: APIClient


def _persona(name: str, plan: str) -> Persona:
    organization, issued = organization_create(name=name, plan_code=plan)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.raw_key}")
    return Persona(organization=organization, api_key=issued.raw_key, client=client)


@pytest.fixture
def make_persona(db: Any):
    def make(name: str = "Acme", plan: str = "studio") -> Persona:
        return _persona(name, plan)

    return make


@pytest.fixture
def owner(make_persona: Any) -> Persona:
    """An organization on the Studio plan (10 active agents, ambient sounds allowed)."""
    return make_persona("Acme", "studio")


@pytest.fixture
def teammate(owner: Persona) -> Persona:
    """A second key of the owner's organization."""
    issued = apikey_create(organization=owner.organization, name="teammate")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.raw_key}")
    return Persona(organization=owner.organization, api_key=issued.raw_key, client=client)


@pytest.fixture
def outsider(make_persona: Any) -> Persona:
    """Another organization: none of the owner's objects may be visible to it."""
    return make_persona("Outsider Inc", "agency")


@pytest.fixture
def anonymous() -> APIClient:
    return APIClient()


@pytest.fixture
def make_agent(db: Any):
    """Create an agent row directly (for tests of other resources; agent rules are tested through the API)."""

    def make(organization: Organization, **fields: Any) -> Agent:
        defaults: dict[str, Any] = {
            "name": "Support",
            "agent_type": "webhook",
            "instructions": "Help callers with their orders.",
            "updated_at": timezone.now(),
        }
        defaults.update(fields)
        return Agent.objects.create(organization=organization, **defaults)

    return make


@dataclass(frozen=True)
class RefusedUrl:
    """A URL the outbound guard refuses without OUTBOUND_ALLOWED_NETWORKS, and the kind its reason names."""

    url: str
    kind: str

    def reason_in(self, response: Any, field: str) -> str:
        """The guard's reason in a save answered 400 naming `field` (the API's validation error shape)."""
        assert response.status_code == 400, response.json()
        body = response.json()
        [reason] = body["issues"][field]
        assert f"is a {self.kind}" in reason and "OUTBOUND_ALLOWED_NETWORKS" in reason
        assert body["error"] == f"Invalid {field}: {reason}"
        return reason


@pytest.fixture(
    params=[
        RefusedUrl("http://169.254.169.254/latest/meta-data/", "link-local"),
        RefusedUrl("http://10.0.0.1/hook", "private"),
        RefusedUrl("http://127.0.0.1:9/hook", "loopback"),
        RefusedUrl("http://[::1]:9/hook", "loopback"),
        RefusedUrl("http://localhost:9/hook", "loopback"),  # a name is judged by the addresses it resolves to
    ],
    ids=lambda refused: refused.url,
)
def refused_url(request: Any) -> RefusedUrl:
    """Each address every request would be refused (metadata, private, loopback by address and by name)."""
    return request.param
