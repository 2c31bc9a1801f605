"""The server's own settings are checked before it starts: a bad closing-handshake timeout is refused
with the reason, not served with."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize("value", ["soon", "0.5", "600"])
def test_a_bad_close_timeout_is_refused_with_the_reason(value: str) -> None:
    env = {**os.environ, "WEBSOCKET_CLOSE_TIMEOUT_SECONDS": value}
    finished = subprocess.run(
        [sys.executable, "-m", "voiceagent.server", "-b", "127.0.0.1", "-p", "0", "voiceagent.asgi:application"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert finished.returncode == 1
    assert f"WEBSOCKET_CLOSE_TIMEOUT_SECONDS must be a number of seconds from 1 to 60, got '{value}'" in finished.stderr


def test_proxy_headers_are_refused_with_the_setting_to_use_instead() -> None:
    # Daphne would believe the first X-Forwarded-For entry, which the client writes (docs/operations/security.md).
    finished = subprocess.run(
        [
            sys.executable,
            "-m",
            "voiceagent.server",
            "-b",
            "127.0.0.1",
            "-p",
            "0",
            "--proxy-headers",
            "voiceagent.asgi:application",
        ],
        env={**os.environ, "CALLS_MAINTENANCE_AT_START": "false", "REALTIME_PRELOAD": "false"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finished.returncode == 1
    assert "--proxy-headers is not supported" in finished.stderr and "TRUSTED_PROXIES" in finished.stderr
