"""The realtime fixtures the phone-call tests share (realtime configured, an active agent, database
threads closed)."""

from typing import Any

import pytest

from testing.fixtures import active_agent, close_db_threads, realtime_settings
from testing.twilio_webhooks import make_account, public_settings

__all__ = ["active_agent", "close_db_threads", "outbound_ready", "public_settings", "realtime_settings"]


@pytest.fixture
def outbound_ready(owner: Any, public_settings: Any) -> Any:
    """The owner's organization can place calls: this service's public URL and stream secret are set and
    the organization has a Twilio account."""
    make_account(owner.organization)
    return owner
