"""The metrics endpoint's protection, the weak-token check, multi-process collection, and the
per-call latency summary."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from calls.latency import latency_summary
from kit import metrics

REPO = Path(__file__).resolve().parents[2]


def value(text: str, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and all(found.labels.get(key) == label for key, label in labels.items()):
                return found.value
    return None


def test_without_a_token_only_loopback_clients_are_answered(settings):
    settings.METRICS_TOKEN = ""
    refused = Client(REMOTE_ADDR="10.0.0.7").get("/metrics")
    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
    for address in ("127.0.0.1", "::1"):
        answered = Client(REMOTE_ADDR=address).get("/metrics")
        assert answered.status_code == 200 and answered["Content-Type"].startswith("text/plain")


def test_a_forwarded_loopback_address_is_believed_only_from_a_trusted_proxy(settings):
    settings.METRICS_TOKEN = ""
    spoofed = {"HTTP_X_FORWARDED_FOR": "127.0.0.1"}
    assert Client(REMOTE_ADDR="10.0.0.7").get("/metrics", **spoofed).status_code == 403  # no trusted proxy
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    # The proxy appended the address it saw to what the client wrote: that one is the client.
    relayed = {"HTTP_X_FORWARDED_FOR": "127.0.0.1, 203.0.113.9"}
    assert Client(REMOTE_ADDR="10.0.0.7").get("/metrics", **relayed).status_code == 403
    assert Client(REMOTE_ADDR="10.0.0.7").get("/metrics", HTTP_X_FORWARDED_FOR="::1").status_code == 200


def test_behind_a_tls_proxy_metrics_need_the_token_even_from_loopback(settings):
    settings.METRICS_TOKEN = ""
    settings.BEHIND_TLS_PROXY = True
    refused = Client(REMOTE_ADDR="127.0.0.1").get("/metrics", HTTP_X_FORWARDED_PROTO="https")
    assert refused.status_code == 401 and refused.json()["code"] == "unauthorized"
    settings.DEBUG = False
    (warning,) = metrics.check_metrics_token()
    assert warning.id == "voiceagent.W101"


def test_with_a_token_a_bearer_is_required_from_any_address(settings):
    settings.METRICS_TOKEN = "a-long-random-metrics-token-9f3k"
    for headers in ({}, {"HTTP_AUTHORIZATION": "Bearer wrong"}, {"HTTP_AUTHORIZATION": "Basic a-long-random"}):
        response = Client(REMOTE_ADDR="127.0.0.1").get("/metrics", **headers)
        assert response.status_code == 401 and response["WWW-Authenticate"].startswith("Bearer")
    good = {"HTTP_AUTHORIZATION": "Bearer a-long-random-metrics-token-9f3k"}
    assert Client(REMOTE_ADDR="10.0.0.7").get("/metrics", **good).status_code == 200
    assert Client(REMOTE_ADDR="10.0.0.7").post("/metrics", **good).status_code == 405


def test_a_rate_limit_refusal_is_counted_by_limit(settings):
    settings.METRICS_TOKEN = ""
    before = value(Client().get("/metrics").content.decode(), "voiceagent_rate_limit_refusals_total", limit="api_key")
    metrics.record_rate_limit_refusal("api_key")
    after = value(Client().get("/metrics").content.decode(), "voiceagent_rate_limit_refusals_total", limit="api_key")
    assert after == (before or 0) + 1


def test_interruptions_are_counted_by_kind_and_engine_and_response_timeouts_by_engine(settings):
    settings.METRICS_TOKEN = ""

    def scrape() -> str:
        return Client().get("/metrics").content.decode()

    kinds = ("real", "false", "backchannel", "ignored")
    before = {kind: value(scrape(), "voiceagent_interruptions_total", kind=kind, engine="cascade") for kind in kinds}
    for kind, times in zip(kinds, (1, 2, 3, 4), strict=True):
        for _ in range(times):
            metrics.record_interruption(kind, "cascade")
    after = scrape()
    for kind, times in zip(kinds, (1, 2, 3, 4), strict=True):
        assert (
            value(after, "voiceagent_interruptions_total", kind=kind, engine="cascade") == (before[kind] or 0) + times
        )
    with pytest.raises(ValueError, match="Unknown interruption kind 'cough'"):
        metrics.record_interruption("cough", "embedded")

    timeouts = value(after, "voiceagent_response_timeouts_total", engine="realtime")
    metrics.record_response_timeout("realtime")
    assert value(scrape(), "voiceagent_response_timeouts_total", engine="realtime") == (timeouts or 0) + 1


@pytest.mark.parametrize("token", ["short-token", "change-me", "CHANGEME", "m" * 40])
def test_a_weak_token_is_refused_with_debug_off(settings, token):
    settings.DEBUG = False
    settings.METRICS_TOKEN = token
    (error,) = metrics.check_metrics_token()
    assert error.id == "voiceagent.E101"


def test_a_strong_token_or_none_passes_the_check(settings):
    settings.DEBUG = False
    for token in ("", "a-long-random-metrics-token-9f3k"):
        settings.METRICS_TOKEN = token
        assert metrics.check_metrics_token() == []


_PROCESS = """
import os, sys, django
os.environ["DJANGO_SETTINGS_MODULE"] = "voiceagent.settings"
django.setup()
from kit import metrics
if sys.argv[1] == "scrape":
    sys.stdout.write(metrics.exposition().decode())
else:
    for _ in range(int(sys.argv[1])):
        metrics.record_rate_limit_refusal("sessions")
    metrics.QUEUE_DEPTH.labels(queue="webhooks").inc()  # a process that is still alive
"""


def test_several_processes_are_collected_together_in_multiprocess_mode(tmp_path):
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    writers = [subprocess.Popen([sys.executable, "-c", _PROCESS, count], cwd=REPO, env=env) for count in ("2", "3")]
    assert [writer.wait(timeout=60) for writer in writers] == [0, 0]
    scraped = subprocess.run(
        [sys.executable, "-c", _PROCESS, "scrape"], cwd=REPO, env=env, check=True, timeout=60, capture_output=True
    ).stdout.decode()
    assert value(scraped, "voiceagent_rate_limit_refusals_total", limit="sessions") == 5
    # Live gauges (livesum) count live processes only: both writers have exited (mark_process_dead at exit).
    assert not value(scraped, "voiceagent_queue_depth", queue="webhooks")
    assert not list(tmp_path.glob("gauge_live*"))


def test_the_call_latency_summary_has_p50_and_p95_per_stage():
    turns = [{"end_of_turn": float(ms), "recognition": None, "total": float(ms) * 2} for ms in range(100, 1100, 100)]
    summary = latency_summary(turns)
    assert summary == {
        "turns": 10,
        "endOfTurnMs": {"p50": 550, "p95": 955},
        "recognitionMs": None,
        "firstTokenMs": None,
        "firstAudioMs": None,
        "totalMs": {"p50": 1100, "p95": 1910},
    }
    assert latency_summary([]) is None
