"""The realtime fixtures the phone-call tests share (realtime configured, an active agent, database
threads closed)."""

from testing.fixtures import active_agent, close_db_threads, realtime_settings

__all__ = ["active_agent", "close_db_threads", "realtime_settings"]
