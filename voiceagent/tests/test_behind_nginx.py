"""The service as deployed: Debian's nginx with the shipped deploy/nginx.conf in front of a real server
started with docker-compose's `web` options and the production variables that matter here
(BEHIND_TLS_PROXY, TRUSTED_PROXIES naming nginx, no METRICS_TOKEN). A client that writes its own
X-Forwarded-For neither dodges the admin lockout nor opens /metrics, and no access log keeps a signed
recording link's signature."""

from __future__ import annotations

import io
import re
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import yaml
from axes.models import AccessAttempt

from calls import services
from calls.recordings import recording_store
from testing.daphne import DaphneServer, shared_test_server
from testing.nginx import Nginx, nginx_in_front, nginx_or_skip
from testing.server_forker import REPO

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "pw-root-7Hq2vLx9"
HTTPS = {"X-Forwarded-Proto": "https"}  # what the load balancer that ends TLS adds
HTTP = httpx.Client(timeout=30, follow_redirects=False)


def shipped_server_options() -> list[str]:
    """The options docker-compose starts each `web` process with, but the address and port."""
    command = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]["web"]["command"]
    options = command[command.index("voiceagent.server") + 1 : -1]  # the last one is the application
    kept: list[str] = []
    skip = False
    for option in options:
        if skip:
            skip = False
        elif option in ("-b", "-p"):
            skip = True
        else:
            kept.append(option)
    return kept


@pytest.fixture(scope="module")
def server(django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: Any) -> Iterator[DaphneServer]:
    nginx_or_skip()
    env = {
        "BEHIND_TLS_PROXY": "true",
        "TRUSTED_PROXIES": "127.0.0.1/32",  # nginx's address, as deploy/env.example says to set it
        "METRICS_TOKEN": "",
        "REALTIME_PRELOAD": "false",
    }
    with shared_test_server(
        django_db_blocker, tmp_path_factory, "behind-nginx", env, args=shipped_server_options()
    ) as started:
        yield started


@pytest.fixture(scope="module")
def nginx(server: DaphneServer, tmp_path_factory: Any) -> Iterator[Nginx]:
    with nginx_in_front(server.port, tmp_path_factory.mktemp("nginx")) as started:
        yield started


def _csrf(nginx: Nginx) -> tuple[str, str]:
    """The login form's CSRF cookie and field (the cookie is Secure: sent by hand over this plain http)."""
    page = HTTP.get(f"{nginx.http_url}/admin/login/", headers=HTTPS)
    assert page.status_code == 200
    cookie = re.search(r"csrftoken=([^;]+)", page.headers["set-cookie"])
    field = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert cookie and field
    return cookie.group(1), field.group(1)


def test_spoofed_forwarded_addresses_do_not_dodge_the_admin_lockout(nginx, django_user_model):
    django_user_model.objects.create_superuser("root", "root@example.com", PASSWORD)
    cookie, field = _csrf(nginx)

    def login(password: str, spoofed: str) -> int:
        headers = {
            **HTTPS,
            "X-Forwarded-For": spoofed,
            "X-Real-IP": spoofed,
            "Cookie": f"csrftoken={cookie}",
            "Origin": "https://127.0.0.1",  # nginx passes the Host without the port
        }
        form = {"username": "root", "password": password, "csrfmiddlewaretoken": field}
        return HTTP.post(f"{nginx.http_url}/admin/login/?next=/admin/", data=form, headers=headers).status_code

    statuses = [login("wrong-password", f"198.51.100.{n}, 203.0.113.{n}") for n in range(1, 31)]
    assert statuses == [200] * 4 + [429] * 26  # locked at the 5th, whatever the client claimed
    assert login(PASSWORD, "192.0.2.99") == 429  # the right password is refused too

    # The lock is on the address nginx saw, never on one a client wrote.
    assert list(AccessAttempt.objects.values_list("ip_address", flat=True)) == ["127.0.0.1"]


def test_metrics_without_a_token_are_refused_to_a_spoofed_loopback_address(server, nginx):
    spoofed = {"X-Forwarded-For": "127.0.0.1", "X-Real-IP": "127.0.0.1"}
    # The public side never serves it (deploy/nginx.conf); a scrape straight to the process needs the token.
    assert HTTP.get(f"{nginx.http_url}/metrics", headers={**HTTPS, **spoofed}).status_code == 404
    direct = HTTP.get(f"{server.http_url}/metrics", headers={**HTTPS, **spoofed})
    assert direct.status_code == 401 and direct.json()["code"] == "unauthorized"
    assert "voiceagent_" not in direct.text


def test_a_fetched_recording_leaves_no_signature_in_any_access_log(server, nginx, owner, make_agent, settings):
    settings.STORAGES = {
        **settings.STORAGES,
        "recordings": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(server.log_path.parent / "recordings")},  # the server's (testing/daphne.py)
        },
    }
    call = services.call_finish(
        call=services.call_start(agent=make_agent(owner.organization), channel="web"), status="completed"
    )
    services.call_recording_attach(call_id=str(call.pk), key=recording_store(call=call, data=io.BytesIO(b"OggS-audio")))
    link = urlsplit(owner.client.get(f"/public/v1/calls/{call.pk}").json()["recordingUrl"])
    path, query = f"{link.path}?{link.query}", parse_qs(link.query)
    signature = query["signature"][0]
    assert int(query["expires"][0]) <= time.time() + 3600  # a link works for an hour by default

    # Through nginx, and straight to the process (nginx closes its upstream connection once it has the
    # body, before Daphne logs the request).
    for base in (nginx.http_url, server.http_url):
        fetched = HTTP.get(f"{base}{path}", headers=HTTPS)
        assert fetched.status_code == 200 and fetched.content == b"OggS-audio"
        # One more request: the recording's line is written by the time this one is answered.
        assert HTTP.get(f"{base}/livez").status_code == 200

    for log in (nginx.access_log.read_text(), server.log_path.read_text()):
        assert f"/public/v1/recordings/{call.pk}" in log
        assert "signature=" not in log and signature not in log
