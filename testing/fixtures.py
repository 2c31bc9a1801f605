"""The realtime fixtures the realtime and phone-call tests share: realtime configured, an active agent of
the owner, an in-process server that may reach loopback tools, database threads closed after an async test. A conftest.py registers them by importing them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from testing.daphne import SECRET

WS_BASE = "ws://voice.example.test:8443"


@pytest.fixture
def realtime_settings(settings: Any) -> Any:
    settings.REALTIME_WS_URL = WS_BASE
    settings.REALTIME_TOKEN_SECRET = SECRET
    return settings


@pytest.fixture
def active_agent(owner: Any, make_agent: Any) -> Any:
    return make_agent(owner.organization, name="Ava", status="active", language="en-US")


@pytest.fixture
def greeting_agent(active_agent: Any) -> Any:
    """The active agent with a static greeting (testing.pipeline.GREETING), as the engine harness's tests
    expect it: the disclosure (1.3 s) and the greeting (0.7 s) play first."""
    from testing.pipeline import GREETING

    active_agent.greeting_type = "static"
    active_agent.static_greeting = GREETING
    active_agent.save()
    return active_agent


@pytest.fixture
def loopback_server(settings: Any) -> Iterator[Any]:
    """An in-process server (testing/inprocess.py) whose application may reach tools on this machine."""
    from testing.inprocess import LOOPBACK, serving

    with serving(settings, LOOPBACK) as started:
        yield started


@pytest.fixture
async def close_db_threads() -> Any:
    """Async tests reach the database through asgiref's worker thread; close its connection after the
    test so that the PostgreSQL test database can be dropped at the end of the run."""
    yield
    from asgiref.sync import sync_to_async
    from django.db import connections

    await sync_to_async(connections.close_all)()
