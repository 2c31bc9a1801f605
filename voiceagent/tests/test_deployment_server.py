"""The deployment's HTTP behaviour behind a (simulated) TLS proxy: the documented production variables
(BEHIND_TLS_PROXY=true and the settings it turns on), through the project's ASGI application in the
test's process (testing/inprocess.py). What is checked here is Django's and the application's (the
redirect, HSTS, the CSP, secure cookies, the 401 log lines); nginx in front of a real server is
test_behind_nginx.py."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from testing.inprocess import InProcessServer, serving

pytestmark = pytest.mark.django_db(transaction=True)

HTTPS = {"X-Forwarded-Proto": "https"}  # what the TLS proxy adds

# What BEHIND_TLS_PROXY=true turns on (voiceagent/settings.py, docs/operations/security.md), as Django
# settings: the environment a deployment sets is read once, when the settings are made.
BEHIND_TLS_PROXY = {
    "BEHIND_TLS_PROXY": True,
    "SECURE_PROXY_SSL_HEADER": ("HTTP_X_FORWARDED_PROTO", "https"),
    "SECURE_SSL_REDIRECT": True,
    "SECURE_HSTS_SECONDS": 31536000,
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
    "SESSION_COOKIE_SECURE": True,
    "CSRF_COOKIE_SECURE": True,
}


@pytest.fixture
def server(settings: Any) -> Iterator[InProcessServer]:
    # Before the application is made: Django's SecurityMiddleware reads its settings when it is built.
    for name, value in BEHIND_TLS_PROXY.items():
        setattr(settings, name, value)
    with serving(settings, {"REALTIME_PRELOAD": False}) as started:
        yield started


def test_the_settings_here_are_what_behind_tls_proxy_turns_on(monkeypatch):
    """The values above are the ones voiceagent/settings.py makes from BEHIND_TLS_PROXY=true (read in a
    fresh copy of the settings module with that environment)."""
    import importlib.util

    import voiceagent.settings as loaded

    monkeypatch.setenv("BEHIND_TLS_PROXY", "true")
    for name in BEHIND_TLS_PROXY:
        if name != "BEHIND_TLS_PROXY":
            monkeypatch.delenv(name, raising=False)
    spec = importlib.util.spec_from_file_location("deployment_settings_copy", loaded.__file__)
    assert spec is not None and spec.loader is not None
    fresh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fresh)
    assert {name: getattr(fresh, name) for name in BEHIND_TLS_PROXY} == BEHIND_TLS_PROXY


def test_plain_http_is_redirected_to_https_but_health_checks_are_answered(server):
    with server.http(follow_redirects=False) as http:
        redirected = http.get("/admin/login/")
        assert redirected.status_code == 301
        assert redirected.headers["Location"] == f"https://testserver:{server.port}/admin/login/"
        for path in ("/healthz", "/livez"):  # load balancers probe over http
            assert http.get(path).status_code == 200


def test_https_responses_carry_hsts_csp_and_secure_cookies(server):
    with server.http(follow_redirects=False) as http:
        page = http.get("/admin/login/", headers=HTTPS)
        assert page.status_code == 200
        assert page.headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"
        policy = page.headers["Content-Security-Policy"]
        assert "default-src 'self'" in policy and "script-src 'self' 'nonce-" in policy
        assert "object-src 'none'" in policy
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
        csrf_cookie = next(c for c in page.headers.get_list("set-cookie") if c.startswith("csrftoken="))
        assert "Secure" in csrf_cookie

        api = http.get("/public/v1/agents", headers={**HTTPS, "Authorization": "Bearer nope-nope-nope-nope"})
        assert api.status_code == 401
        assert api.headers["Strict-Transport-Security"].startswith("max-age=31536000")
        assert api.headers["Content-Security-Policy"].startswith("default-src 'none'")


@pytest.fixture
def fresh_unauthorized_throttle(monkeypatch: Any) -> Any:
    """The process's 401 log throttle (settings.LOGGING's filter on `django.request`), its memory of the
    addresses already logged emptied for the test: earlier tests of this process also got 401s from
    127.0.0.1 within the interval."""
    from kit.log_filters import UnauthorizedLogThrottle

    # One filter, or more once another test of this process applied settings.LOGGING again (dictConfig
    # adds a logger's filters anew): each forgets what it has seen.
    throttles = [f for f in logging.getLogger("django.request").filters if isinstance(f, UnauthorizedLogThrottle)]
    assert throttles
    for throttle in throttles:
        monkeypatch.setattr(throttle, "_seen", {})
    return throttles


async def test_a_flood_of_bad_api_keys_writes_a_few_log_lines(server, fresh_unauthorized_throttle, caplog):
    keys = [f"sk_flood_{n:04d}_aaaaaaaaaaaaaaaa" for n in range(200)]
    slots = asyncio.Semaphore(8)  # eight clients at a time, as a small flood does

    async def attempt(http: httpx.AsyncClient, key: str) -> int:
        async with slots:
            return (
                await http.get("/public/v1/agents", headers={**HTTPS, "Authorization": f"Bearer {key}"})
            ).status_code

    with caplog.at_level(logging.INFO):  # the server's level (LOG_LEVEL's default)
        async with server.ahttp() as http:
            statuses = await asyncio.gather(*(attempt(http, key) for key in keys))
            assert statuses == [401] * 200
            assert (await http.get("/livez")).status_code == 200

    lines = [record.getMessage() for record in caplog.records if "Unauthorized" in record.getMessage()]
    assert 1 <= len(lines) <= 3, lines
    assert "127.0.0.1" in lines[0]
    log = caplog.text
    assert not any(key in log for key in keys)
