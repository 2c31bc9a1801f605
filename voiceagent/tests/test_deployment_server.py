"""The deployment's HTTP behaviour through a real Daphne server behind a (simulated) TLS proxy: the
documented production variables (BEHIND_TLS_PROXY=true), requests over real sockets."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from testing.daphne import DaphneServer, shared_test_server

pytestmark = pytest.mark.django_db(transaction=True)

HTTPS = {"X-Forwarded-Proto": "https"}  # what the TLS proxy adds
# One client for the module's requests (it is thread-safe): httpx.get() builds a client, and its TLS context
# (about 0.1 s of CPU), per request.
HTTP = httpx.Client(timeout=30, follow_redirects=False)


@pytest.fixture(scope="module")
def server(django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: Any) -> Iterator[DaphneServer]:
    with shared_test_server(
        django_db_blocker,
        tmp_path_factory,
        "behind-tls-proxy",
        {"BEHIND_TLS_PROXY": "true", "REALTIME_PRELOAD": "false"},
    ) as started:
        yield started


def _get(server: DaphneServer, path: str, **kwargs: Any) -> httpx.Response:
    return HTTP.get(f"{server.http_url}{path}", **kwargs)


def test_plain_http_is_redirected_to_https_but_health_checks_are_answered(server):
    redirected = _get(server, "/admin/login/")
    assert redirected.status_code == 301
    assert redirected.headers["Location"] == f"https://127.0.0.1:{server.port}/admin/login/"
    for path in ("/healthz", "/livez"):  # load balancers probe over http
        assert _get(server, path).status_code == 200


def test_https_responses_carry_hsts_csp_and_secure_cookies(server):
    page = _get(server, "/admin/login/", headers=HTTPS)
    assert page.status_code == 200
    assert page.headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"
    policy = page.headers["Content-Security-Policy"]
    assert "default-src 'self'" in policy and "script-src 'self' 'nonce-" in policy and "object-src 'none'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    csrf_cookie = next(c for c in page.headers.get_list("set-cookie") if c.startswith("csrftoken="))
    assert "Secure" in csrf_cookie

    api = _get(server, "/public/v1/agents", headers={**HTTPS, "Authorization": "Bearer nope-nope-nope-nope"})
    assert api.status_code == 401
    assert api.headers["Strict-Transport-Security"].startswith("max-age=31536000")
    assert api.headers["Content-Security-Policy"].startswith("default-src 'none'")


def test_a_flood_of_bad_api_keys_writes_a_few_log_lines(server):
    keys = [f"sk_flood_{n:04d}_aaaaaaaaaaaaaaaa" for n in range(200)]

    def attempt(key: str) -> int:
        headers = {**HTTPS, "Authorization": f"Bearer {key}"}
        return HTTP.get(f"{server.http_url}/public/v1/agents", headers=headers).status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(attempt, keys))
    assert statuses == [401] * 200
    assert _get(server, "/livez").status_code == 200  # the log has the lines of every request before it

    log = server.log_path.read_text()
    lines = [line for line in log.splitlines() if "Unauthorized" in line]
    assert 1 <= len(lines) <= 3, lines
    assert "127.0.0.1" in lines[0]
    assert not any(key in log for key in keys)
