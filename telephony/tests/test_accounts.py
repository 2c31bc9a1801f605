"""Telephony accounts: the ops command, the dashboard page, and credentials that never come back out
(encrypted at rest, not rendered by the dashboard, not in logs, not in any API)."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client

from telephony.models import PhoneNumber, SetupStatus, TelephonyAccount
from testing.commands import settelephony
from testing.twilio_webhooks import ACCOUNT_SID, AUTH_TOKEN, make_account

API_KEY_SID, API_KEY_SECRET = "SK" + "7a" * 16, "api-key-secret-0123456789abcdef"


def _raw_columns() -> list[tuple[str, str | None]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT auth_token, api_key_secret FROM telephony_telephonyaccount")
        return cursor.fetchall()


def test_settelephony_prints_the_organization_and_stores_the_token_encrypted(owner: Any, caplog: Any) -> None:
    caplog.set_level(logging.DEBUG)
    org = str(owner.organization.pk)
    result = settelephony(
        "--org", org, "--provider", "twilio", "--account-sid", ACCOUNT_SID, "--auth-token", AUTH_TOKEN,
        "--api-key-sid", API_KEY_SID, "--api-key-secret", API_KEY_SECRET,
    )  # fmt: skip

    assert result == {"organizationId": org, "provider": "twilio"}
    account = TelephonyAccount.objects.get(organization=owner.organization)
    assert (account.account_sid, account.auth_token) == (ACCOUNT_SID, AUTH_TOKEN)
    assert (account.api_key_sid, account.api_key_secret) == (API_KEY_SID, API_KEY_SECRET)
    ((token_column, secret_column),) = _raw_columns()
    assert AUTH_TOKEN not in token_column and API_KEY_SECRET not in secret_column
    assert AUTH_TOKEN not in caplog.text and API_KEY_SECRET not in caplog.text


def test_settelephony_again_replaces_the_account_and_keeps_a_token_not_given(owner: Any) -> None:
    org = str(owner.organization.pk)
    settelephony("--org", org, "--account-sid", ACCOUNT_SID, "--auth-token", AUTH_TOKEN)
    settelephony("--org", org, "--account-sid", ACCOUNT_SID)
    assert TelephonyAccount.objects.get().auth_token == AUTH_TOKEN
    settelephony("--org", org, "--account-sid", ACCOUNT_SID, "--auth-token", "e" * 32)
    assert TelephonyAccount.objects.count() == 1 and TelephonyAccount.objects.get().auth_token == "e" * 32
    with pytest.raises(CommandError, match="Another Account SID needs its own auth token"):
        settelephony("--org", org, "--account-sid", "AC" + "d" * 32)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--account-sid", "AC123", "--auth-token", "x" * 32], "Invalid accountSid: Must be a Twilio Account SID"),
        (["--account-sid", ACCOUNT_SID], "Invalid authToken: The account's auth token is required."),
        (["--account-sid", ACCOUNT_SID, "--auth-token", "a b"], "Invalid authToken: Must be the secret exactly"),
        (
            ["--account-sid", ACCOUNT_SID, "--auth-token", AUTH_TOKEN, "--api-key-sid", API_KEY_SID],
            "Invalid apiKeySecret: An API key SID needs its secret.",
        ),
        (
            ["--account-sid", ACCOUNT_SID, "--auth-token", AUTH_TOKEN, "--api-key-sid", "SK1", "--api-key-secret", "s"],
            "Invalid apiKeySid: Must be a Twilio API key SID",
        ),
    ],
)
def test_settelephony_refuses_bad_input_with_a_clear_message(owner: Any, args: list[str], message: str) -> None:
    with pytest.raises(CommandError) as caught:
        settelephony("--org", str(owner.organization.pk), *args)
    assert str(caught.value).startswith(message)
    assert TelephonyAccount.objects.count() == 0


def test_settelephony_refuses_an_account_of_another_organization_and_an_unknown_organization(
    owner: Any, outsider: Any
) -> None:
    make_account(outsider.organization)
    with pytest.raises(CommandError, match=f"Account {ACCOUNT_SID} belongs to another organization"):
        settelephony("--org", str(owner.organization.pk), "--account-sid", ACCOUNT_SID, "--auth-token", AUTH_TOKEN)
    with pytest.raises(CommandError, match="not found"):
        settelephony("--org", "7d5c7d51-3c2a-4a53-9d0e-5b5f1b7d1f00", "--account-sid", ACCOUNT_SID)


def test_settelephony_exits_non_zero_from_the_shell() -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", "settelephony", "--org", "not-a-uuid", "--account-sid", ACCOUNT_SID],
        cwd=django_settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=300,  # a bound: the command starts Django (slow on a loaded machine)
    )
    assert done.returncode != 0
    assert "Invalid organization ID" in done.stderr and done.stdout == ""


def test_the_dashboard_creates_an_account_and_never_shows_its_secrets(dashboard: Client, owner: Any) -> None:
    response = dashboard.post(
        "/admin/telephony/telephonyaccount/add/",
        {
            "organization": str(owner.organization.pk),
            "provider": "twilio",
            "account_sid": ACCOUNT_SID,
            "auth_token": AUTH_TOKEN,
            "api_key_sid": API_KEY_SID,
            "api_key_secret": API_KEY_SECRET,
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    account = TelephonyAccount.objects.get()
    assert (account.auth_token, account.api_key_secret) == (AUTH_TOKEN, API_KEY_SECRET)

    for url in ("/admin/telephony/telephonyaccount/", f"/admin/telephony/telephonyaccount/{account.pk}/change/"):
        page = dashboard.get(url).content.decode()
        assert ACCOUNT_SID in page
        assert AUTH_TOKEN not in page and API_KEY_SECRET not in page
        for column in _raw_columns()[0]:
            assert column not in page  # nor the ciphertext


def test_a_dashboard_edit_with_blank_secrets_keeps_them(dashboard: Client, owner: Any) -> None:
    account = make_account(owner.organization, api_key_sid=API_KEY_SID, api_key_secret=API_KEY_SECRET)
    response = dashboard.post(
        f"/admin/telephony/telephonyaccount/{account.pk}/change/",
        {"provider": "twilio", "account_sid": ACCOUNT_SID, "auth_token": "", "api_key_sid": API_KEY_SID},
    )
    assert response.status_code == 302
    account.refresh_from_db()
    assert (account.auth_token, account.api_key_secret) == (AUTH_TOKEN, API_KEY_SECRET)

    # Removing the API key SID removes the key: REST calls go back to the auth token.
    dashboard.post(
        f"/admin/telephony/telephonyaccount/{account.pk}/change/",
        {"provider": "twilio", "account_sid": ACCOUNT_SID, "auth_token": "", "api_key_sid": ""},
    )
    account.refresh_from_db()
    assert (account.auth_token, account.api_key_sid, account.api_key_secret) == (AUTH_TOKEN, "", None)


def test_the_dashboard_shows_a_bad_account_sid_on_the_form(dashboard: Client, owner: Any) -> None:
    response = dashboard.post(
        "/admin/telephony/telephonyaccount/add/",
        {"organization": str(owner.organization.pk), "provider": "twilio", "account_sid": "AC1", "auth_token": "t"},
    )
    assert response.status_code == 200
    assert "Must be a Twilio Account SID" in response.content.decode()
    assert TelephonyAccount.objects.count() == 0


def test_no_public_api_returns_the_credentials(owner: Any) -> None:
    make_account(owner.organization)
    from telephony.services.numbers import phone_number_claim

    phone_number_claim(organization=owner.organization, number="+14155550123")
    body = owner.client.get("/public/v1/phone-numbers").content.decode()
    assert AUTH_TOKEN not in body and ACCOUNT_SID not in body


def test_the_system_check_warns_when_an_account_exists_without_public_base_url(owner: Any, settings: Any) -> None:
    def warnings() -> str:
        err = io.StringIO()
        call_command("check", "--database", "default", stderr=err, stdout=io.StringIO())
        return err.getvalue()

    settings.PUBLIC_BASE_URL = ""
    settings.REALTIME_TOKEN_SECRET = "a-token-secret-of-at-least-32-bytes-for-the-check"
    assert "telephony.W001" not in warnings()
    make_account(owner.organization)
    assert "telephony.W001" in warnings() and "PUBLIC_BASE_URL is not set" in warnings()
    settings.PUBLIC_BASE_URL = "https://voice.example.com"
    assert "telephony.W001" not in warnings()


# --- claimnumber ------------------------------------------------------------------------------------


def test_claimnumber_records_a_ready_number_by_default_and_pending_on_request(owner: Any) -> None:
    org = str(owner.organization.pk)
    out = io.StringIO()
    call_command("claimnumber", "--org", org, "--number", "+14155550123", stdout=out)
    assert PhoneNumber.objects.get(pk=json.loads(out.getvalue())["id"]).setup_status == SetupStatus.READY
    out = io.StringIO()
    call_command("claimnumber", "--org", org, "--number", "+14155550124", "--setup-status", "pending", stdout=out)
    number = PhoneNumber.objects.get(pk=json.loads(out.getvalue())["id"])
    assert (number.setup_status, number.setup_error) == (SetupStatus.PENDING, "")
    listed = {n["phoneNumber"]: n["setupStatus"] for n in owner.client.get("/public/v1/phone-numbers").json()}
    assert listed == {"+14155550123": "ready", "+14155550124": "pending"}
