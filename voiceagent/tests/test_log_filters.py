"""401s are logged at most once per client address per interval, with the count left out."""

from __future__ import annotations

import logging

import pytest

from kit import log_filters


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(log_filters.time, "monotonic", lambda: now[0])
    # A fresh throttle (the configured one remembers earlier tests' addresses).
    throttle = log_filters.UnauthorizedLogThrottle(interval_seconds=60)
    logger = logging.getLogger("django.request")
    monkeypatch.setattr(logger, "filters", [throttle])
    return now


def _unauthorized_lines(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "django.request" and r.status_code == 401]


def test_the_next_line_after_the_interval_counts_what_was_left_out(client, db, caplog, clock):
    bad = {"HTTP_AUTHORIZATION": "Bearer sk_not_a_key_aaaaaaaaaaaaaaaa"}
    with caplog.at_level(logging.WARNING, logger="django.request"):
        for _ in range(50):
            assert client.get("/public/v1/agents", **bad).status_code == 401
        assert client.get("/public/v1/agents", REMOTE_ADDR="10.9.8.7").status_code == 401  # another address
        clock[0] += 61
        assert client.get("/public/v1/agents", **bad).status_code == 401

    lines = _unauthorized_lines(caplog)
    assert lines == [
        "Unauthorized: /public/v1/agents from 127.0.0.1",
        "Unauthorized: /public/v1/agents from 10.9.8.7",
        "Unauthorized: /public/v1/agents from 127.0.0.1 (49 more 401s from there not logged since the previous line)",
    ]


def test_other_statuses_are_not_throttled(client, db, caplog, clock):
    with caplog.at_level(logging.WARNING, logger="django.request"):
        for _ in range(3):
            assert client.get("/public/v1/no-such-thing").status_code == 404
    assert len([r for r in caplog.records if r.name == "django.request" and r.status_code == 404]) == 3
