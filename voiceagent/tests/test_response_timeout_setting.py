"""RESPONSE_TIMEOUT_SECONDS: the bound on every caller turn, 10 s unless set; a bad value fails at start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
READ = "import django; django.setup(); from django.conf import settings; print(settings.RESPONSE_TIMEOUT_SECONDS)"


def start(value: str | None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "voiceagent.settings"}
    env.pop("RESPONSE_TIMEOUT_SECONDS", None)
    if value is not None:
        env["RESPONSE_TIMEOUT_SECONDS"] = value
    return subprocess.run([sys.executable, "-c", READ], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)


def test_the_bound_is_ten_seconds_unless_set_and_a_bad_value_fails_loudly(settings):
    assert start(None).stdout.strip() == "10.0"
    assert start("4.5").stdout.strip() == "4.5"
    for bad in ("0", "500"):
        refused = start(bad)
        assert refused.returncode != 0
        assert "RESPONSE_TIMEOUT_SECONDS must be 1-120 seconds" in refused.stderr
