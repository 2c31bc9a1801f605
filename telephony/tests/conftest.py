"""The realtime fixtures the phone-call tests share (realtime configured, database threads closed)."""

from realtime.tests.conftest import close_db_threads, realtime_settings

__all__ = ["close_db_threads", "realtime_settings"]
