"""Shared test personas: an owner organization, a teammate key in it, and an outsider organization."""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from rest_framework.test import APIClient

from accounts.models import Organization, Plan
from accounts.services import apikey_create, organization_create
from agents.models import Agent
from testing.factories import AgentFactory


def pytest_configure() -> None:
    # Tasks run in-process in tests, also when REDIS_URL names a broker (no worker runs beside the
    # suite). A dedicated test proves the broker path with a real worker.
    from voiceagent.celery import app

    app.conf.task_always_eager = True
    app.conf.task_eager_propagates = True

    # Background work (kit/background.py) inline: no loop starts in the test process (no agent-log writer,
    # upkeep timer, batch scheduler, outbound dispatcher, event delivery or heartbeat: tests run what they
    # need themselves, e.g. flush_agent_logs(), batch_tick(now=...), outbound_dispatch(); calls and
    # documents keep heartbeat_at empty), and queued jobs (knowledge ingestion, post-call analyses, agent
    # test runs) run in the caller's thread (an ingestion inside the upload request, in the test's
    # transaction). The loops and pools of a serving process are proven through real servers
    # (testing/daphne.py) and by voiceagent/tests/test_background.py.
    from django.conf import settings

    settings.BACKGROUND_WORK = "inline"
    # Staff passwords: see QuickPasswordHasher.
    settings.PASSWORD_HASHERS = ["conftest.QuickPasswordHasher"]
    # The tests' Django clients (a new one per test and persona) each build the middleware at their first
    # request, and WhiteNoise then reads and stats every static file (176: about 10 ms, 30 CPU seconds over
    # the two suites). Here it finds a static file when one is asked for. The servers the tests start serve
    # static files as production does (their own settings: the list read once at start).
    settings.WHITENOISE_AUTOREFRESH = True

    _redis_of_this_worker(settings, app)


class QuickPasswordHasher(PBKDF2PasswordHasher):
    """Django's PBKDF2 (the production hasher, the same `pbkdf2_sha256$...` format) with 1,000 rounds
    instead of 1,000,000: a staff login or a superuser made in a test took over a second of CPU. A hash
    names its rounds, so the real servers a test starts (with the default hasher) check these too."""

    iterations = 1_000


def _redis_of_this_worker(settings: Any, app: Any) -> None:
    """Under pytest-xdist (`make test`) each worker has a database of its own (pytest-django names it
    after the worker) and, with REDIS_URL, a Redis database of its own: the next numbers after the one
    REDIS_URL names, gw0 keeping it. Nothing one worker's servers queue, cache or send on the channel
    layer reaches another's. The servers a test starts inherit it through the environment."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not settings.REDIS_URL or not worker.startswith("gw"):
        return
    parts = urlsplit(settings.REDIS_URL)
    number = (int(parts.path.strip("/") or 0) + int(worker[2:])) % 16  # redis-server has 16 by default
    url = parts._replace(path=f"/{number}").geturl()
    os.environ["REDIS_URL"] = settings.REDIS_URL = url
    # The settings made from REDIS_URL (voiceagent/settings.py); nothing has connected yet.
    settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"][0]["address"] = url
    settings.CACHES["default"]["LOCATION"] = url
    settings.CELERY_BROKER_URL = app.conf.broker_url = url


# The fixtures through which a test reaches the database (pytest-django's; a server a test starts needs
# django_db_setup, testing/daphne.py). django_db_blocker is not one: every test holds it.
DATABASE_FIXTURES = frozenset(
    {
        "db",
        "transactional_db",
        "django_db_setup",
        "django_db_reset_sequences",
        "django_db_serialized_rollback",
        "live_server",
    }
)


def uses_database(item: pytest.Item) -> bool:
    """Whether the test reaches the database (so also the cache, the channel layer and the servers of its suite)."""
    fixtures = set(getattr(item, "fixturenames", ()))
    return item.get_closest_marker("django_db") is not None or bool(DATABASE_FIXTURES & fixtures)


def depends_on_the_database(item: pytest.Item) -> bool:
    """Whether the test reaches the database and is fast, or is about processes sharing it."""
    kept = item.get_closest_marker("slow") is None or item.get_closest_marker("processes") is not None
    return uses_database(item) and kept


@pytest.hookimpl(trylast=True)  # after pytest-django's order (database tests, then transactional ones)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """DATABASE_TESTS_ONLY=true (.ci/run, in its PostgreSQL suite) keeps the tests whose outcome can
    depend on the database: the fast tests that reach it, and the slow ones of server processes sharing
    it (marked `processes`). The other slow tests (spoken conversations, Chromium, real models) reach the
    database through the same services as the fast ones; the other suite runs every test.

    Under pytest-xdist (`make test`: whole modules to a worker, `--dist loadfile`, in this order with
    `--no-loadscope-reorder`), the modules with the most slow tests come first, so that the longest runs
    start early."""
    if os.environ.get("DATABASE_TESTS_ONLY", "").lower() in ("1", "true", "yes"):
        elsewhere = [item for item in items if not depends_on_the_database(item)]
        if elsewhere:
            config.hook.pytest_deselected(items=elsewhere)
            items[:] = [item for item in items if depends_on_the_database(item)]
    if not hasattr(config, "workerinput"):  # a run without xdist, or its controller
        return
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(_module_of(item.nodeid), []).append(item)
    slow = {module: sum(1 for item in its if item.get_closest_marker("slow")) for module, its in modules.items()}
    items[:] = [item for module in sorted(modules, key=lambda m: -slow[m]) for item in modules[module]]


def _module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


@pytest.fixture(autouse=True)
def _seeded_plans(request: Any) -> None:
    """Plans come from data migrations, and a transactional test's flush removes them: every test that
    uses the database finds them (and its fixtures can reach the database from the start) as the
    migrations left them, since a test's own changes are rolled back with it or flushed. They are seeded
    here only when missing."""
    names = request.fixturenames
    marker = request.node.get_closest_marker("django_db")
    transactional = "transactional_db" in names or bool(marker and marker.kwargs.get("transaction"))
    if not (marker or "db" in names or transactional):
        return
    request.getfixturevalue("transactional_db" if transactional else "db")
    if not Plan.objects.exists():
        _seed_plans()


def _seed_plans() -> None:
    """The plans the data migrations make."""
    from django.apps import apps

    for migration in ("0002_seed_plans", "0004_seed_plan_limits", "0005_outbound_limit"):
        importlib.import_module(f"accounts.migrations.{migration}").seed(apps, None)


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
        return AgentFactory.create(organization=organization, **fields)

    return make


@dataclass(frozen=True)
class RefusedUrl:
    """A URL the egress guard refuses without OUTBOUND_ALLOWED_NETWORKS, and the kind its reason names."""

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
