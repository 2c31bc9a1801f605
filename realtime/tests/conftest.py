"""Fixtures of the realtime tests: realtime configured, an active agent of the owner (testing/fixtures.py)."""

from testing.fixtures import active_agent, close_db_threads, greeting_agent, loopback_server, realtime_settings

__all__ = ["active_agent", "close_db_threads", "greeting_agent", "loopback_server", "realtime_settings"]
