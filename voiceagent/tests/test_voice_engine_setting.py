"""VOICE_ENGINE: `cascade` unless set, or `speech-to-speech`; the former names `embedded` and `realtime` are
still accepted and read as the new ones when the settings load (what the engine reports says the new name);
any other value fails at start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
READ = (
    "import django; django.setup(); from django.conf import settings; "
    "from realtime.engine.registry import pipeline_class; "
    "pipeline = pipeline_class(); print(settings.VOICE_ENGINE, pipeline.__name__, pipeline.name)"
)


def start(value: str | None) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "voiceagent.settings",
        "REALTIME_PROVIDER_URL": "ws://127.0.0.1:9/v1/realtime",
        "REALTIME_PROVIDER_MODEL": "scripted",
    }
    env.pop("VOICE_ENGINE", None)
    if value is not None:
        env["VOICE_ENGINE"] = value
    return subprocess.run([sys.executable, "-c", READ], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)


def test_the_engine_is_the_cascade_unless_set_and_the_former_names_still_work():
    cascade = "cascade CascadePipeline cascade"
    speech_to_speech = "speech-to-speech SpeechToSpeechPipeline speech-to-speech"
    assert start(None).stdout.strip() == cascade
    assert start("cascade").stdout.strip() == cascade
    assert start("speech-to-speech").stdout.strip() == speech_to_speech
    # The former names: accepted, and read as the new ones.
    assert start("embedded").stdout.strip() == cascade
    assert start("realtime").stdout.strip() == speech_to_speech


def test_an_unknown_engine_fails_loudly_naming_the_accepted_values():
    refused = start("speech_to_speech")
    assert refused.returncode != 0
    assert "VOICE_ENGINE must be one of cascade, speech-to-speech, embedded, realtime" in refused.stderr
