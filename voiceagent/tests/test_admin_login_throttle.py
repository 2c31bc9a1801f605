"""Admin login throttling (django-axes) through the dashboard's login form: after
ADMIN_LOGIN_FAILURE_LIMIT wrong passwords, the right one is refused too, and the lockout is logged."""

from __future__ import annotations

import logging

import pytest
from axes.models import AccessLog
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db

PASSWORD = "pw-root-7Hq2vLx9"


@pytest.fixture
def staff(db):
    return User.objects.create_superuser("root", "root@example.com", PASSWORD)


def _login(client: Client, password: str, address: str = "203.0.113.7", **headers: str):
    form = {"username": "root", "password": password}
    return client.post("/admin/login/?next=/admin/", form, REMOTE_ADDR=address, **headers)


def test_wrong_passwords_lock_the_login_and_the_lockout_is_logged(staff, settings, caplog):
    assert settings.AXES_FAILURE_LIMIT == 5
    client = Client()
    with caplog.at_level(logging.INFO):
        for _ in range(4):
            assert _login(client, "wrong-password").status_code == 200  # the form again, with its error
        locked = _login(client, "wrong-password")
        assert locked.status_code == 429
        lockouts = [r for r in caplog.records if r.levelno == logging.WARNING and "Locking out" in r.getMessage()]
        refused = _login(client, PASSWORD)

    assert refused.status_code == 429 and "locked" in refused.content.decode().lower()
    assert client.get("/admin/").status_code == 302  # not logged in
    assert len(lockouts) == 1  # logged when the limit is reached
    assert 'username: "root"' in lockouts[0].getMessage() and "203.0.113.7" in lockouts[0].getMessage()
    assert not any(PASSWORD in r.getMessage() or "wrong-password" in r.getMessage() for r in caplog.records)

    # The lock is on this username from this address: the same admin elsewhere still logs in.
    elsewhere = Client()
    assert _login(elsewhere, PASSWORD, address="198.51.100.20").status_code == 302
    assert elsewhere.get("/admin/").status_code == 200


def test_a_right_password_before_the_limit_resets_the_count(staff):
    client = Client()
    for _ in range(4):
        _login(client, "wrong-password")
    assert _login(client, PASSWORD).status_code == 302
    client.logout()
    for _ in range(4):
        assert _login(client, "wrong-password").status_code == 200
    assert _login(client, PASSWORD).status_code == 302


def test_behind_a_trusted_proxy_the_lockout_is_on_the_right_most_hop_it_does_not_trust(staff, settings, caplog):
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]  # the load balancer and nginx
    client = Client()
    with caplog.at_level(logging.WARNING):
        statuses = [
            # What the client wrote, the address the balancer saw, the balancer as nginx saw it.
            _login(client, "wrong-password", "10.0.0.7", HTTP_X_FORWARDED_FOR=f"198.51.100.{n}, 203.0.113.9, 10.0.0.2")
            for n in range(5)
        ]
    assert [s.status_code for s in statuses] == [200] * 4 + [429]
    (lockout,) = [r.getMessage() for r in caplog.records if "Locking out" in r.getMessage()]
    assert _login(client, PASSWORD, "10.0.0.7", HTTP_X_FORWARDED_FOR="192.0.2.1, 203.0.113.9").status_code == 429
    assert "203.0.113.9" in lockout and "198.51.100" not in lockout and "10.0.0" not in lockout

    # Another client behind the same proxies still logs in; so does one that is not behind a trusted proxy
    # and claims the locked address (its own header is not believed).
    assert _login(Client(), PASSWORD, "10.0.0.7", HTTP_X_FORWARDED_FOR="198.51.100.20").status_code == 302
    assert _login(Client(), PASSWORD, "192.0.2.5", HTTP_X_FORWARDED_FOR="203.0.113.9").status_code == 302


def test_a_login_without_a_client_address_is_logged_with_none(staff):
    # force_login's request has no REMOTE_ADDR: axes stores no address (an `inet` on PostgreSQL refuses
    # the "unknown" of the log lines).
    Client().force_login(staff)
    assert list(AccessLog.objects.values_list("ip_address", flat=True)) == [None]
