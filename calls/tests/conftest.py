from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from calls import services
from calls.models import Call
from testing.fixtures import close_db_threads, realtime_settings  # noqa: F401 (fixtures of the end-to-end tests)


@pytest.fixture
def agent(owner: Any, make_agent: Any) -> Any:
    return make_agent(owner.organization, name="Support", status="active")


@pytest.fixture
def call_lasting(agent: Any):
    """call_finish on a call that started `seconds` (+0.3 s) ago: a call of that many whole seconds."""

    def finish(seconds: int, *, the_agent: Any = None, status: str = "completed") -> Call:
        call = services.call_start(agent=the_agent or agent, channel="phone", from_number="+14155550100")
        started = timezone.now() - timedelta(seconds=seconds, milliseconds=300)
        Call.objects.filter(pk=call.pk).update(started_at=started)
        call.started_at = started
        return services.call_finish(call=call, status=status)

    return finish


@pytest.fixture
async def thread_connections_closed():
    """Async tests reach the database from asgiref's worker thread: close its connections afterwards so
    the test database can be dropped."""
    yield
    from asgiref.sync import sync_to_async
    from django.db import connections

    await sync_to_async(connections.close_all)()
