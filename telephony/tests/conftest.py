"""The realtime fixtures the phone-call tests share (realtime configured, an active agent, database
threads closed, the SIP endpoint), and a staff member's dashboard client."""

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from telephony.sip.endpoint import SipAddress, SipEndpoint
from testing.baresip import BARESIP, free_udp_port
from testing.fixtures import active_agent, close_db_threads, realtime_settings
from testing.twilio_webhooks import make_account, public_settings

__all__ = [
    "active_agent",
    "close_db_threads",
    "engine_loaded",
    "outbound_ready",
    "public_settings",
    "realtime_settings",
    "sip_endpoint",
]


@pytest.fixture(scope="module")
def engine_loaded() -> None:
    """The voice engine's models loaded before a module's first in-process call (testing/inprocess.py), as
    a server loads them at its start (realtime/apps.py): in the test's process the first session would
    otherwise load them within the wait of a test (more than 30 s on a loaded machine)."""
    from realtime.apps import preload_in_background

    thread = preload_in_background()
    if thread is not None:
        thread.join(timeout=300)


@pytest.fixture(scope="module")
def sip_endpoint() -> Iterator[SipEndpoint]:
    """The SIP endpoint on loopback, once per module (Sippy's dispatcher is one per process: a module's
    endpoint stops before the next one starts, and nothing of it runs on through the rest of the suite);
    each test gives it its loop."""
    if not Path(BARESIP).exists():
        pytest.skip("baresip is not installed (make setup installs it as root; .ci/run does)")
    started = SipEndpoint(SipAddress("127.0.0.1", free_udp_port(), rtp_ports=(31000, 31999)), asyncio.new_event_loop())
    started.start()
    yield started
    started.stop()


@pytest.fixture
def outbound_ready(owner: Any, public_settings: Any) -> Any:
    """The owner's organization can place calls: this service's public URL and stream secret are set and
    the organization has a Twilio account."""
    make_account(owner.organization)
    return owner


@pytest.fixture
def dashboard(db: Any) -> Client:
    """A superuser's client, logged in to the dashboard."""
    user = get_user_model().objects.create_superuser("ops", "ops@example.com", "not-used-pw-1")
    client = Client()
    client.force_login(user)
    return client
