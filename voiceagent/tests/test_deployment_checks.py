"""`manage.py check --deploy` with the documented production variables (deploy/env.example), and the
system check that refuses weak or documented secrets; each run as the operator runs it, in a subprocess."""

from __future__ import annotations

import secrets

import pytest

from testing.commands import documented_production_env, manage
from voiceagent.checks import documented_examples


def test_check_deploy_is_clean_with_the_documented_production_variables():
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=documented_production_env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_check_deploy_warns_without_them(settings, db):
    # The embedded default (plain http on 127.0.0.1) keeps HTTPS off: --deploy says what production needs.
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    with pytest.raises(SystemCheckError) as caught:
        call_command("check", "--deploy", "--fail-level", "WARNING")
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in str(caught.value)


def test_weak_secrets_are_refused_before_the_service_starts():
    # migrate (the deployment's first step: docker-compose runs it before any web process) runs the check.
    env = {**documented_production_env(), "REALTIME_TOKEN_SECRET": "change-me-too", "SECRET_KEY": "short-key"}
    result = manage("migrate", "--plan", env=env)
    assert result.returncode != 0
    assert "voiceagent.E001" in result.stderr and "REALTIME_TOKEN_SECRET is an example value" in result.stderr
    assert "voiceagent.E002" in result.stderr and "SECRET_KEY is shorter than 32 bytes" in result.stderr
    assert "change-me-too" not in result.stderr and "short-key" not in result.stderr  # never the values


def _secret_errors(settings, monkeypatch, **values):
    from voiceagent.checks import check_secrets

    settings.DEBUG = values.pop("DEBUG", False)
    settings.SECRET_KEY = values.pop("SECRET_KEY", secrets.token_urlsafe(48))
    settings.REALTIME_TOKEN_SECRET = values.pop("REALTIME_TOKEN_SECRET", secrets.token_urlsafe(48))
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return [error.id for error in check_secrets()]


def test_the_secret_rules(settings, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert _secret_errors(settings, monkeypatch) == []
    assert _secret_errors(settings, monkeypatch, REALTIME_TOKEN_SECRET="x" * 31) == ["voiceagent.E001"]
    assert _secret_errors(settings, monkeypatch, REALTIME_TOKEN_SECRET=secrets.token_urlsafe(24)) == []  # 32 characters
    assert _secret_errors(settings, monkeypatch, REALTIME_TOKEN_SECRET="") == []  # sessions off, nothing to mint
    assert _secret_errors(settings, monkeypatch, SECRET_KEY="k" * 20) == ["voiceagent.E002"]
    assert _secret_errors(settings, monkeypatch, DEBUG=True, REALTIME_TOKEN_SECRET="change-me-too") == []
    monkeypatch.delenv("SECRET_KEY", raising=False)
    assert _secret_errors(settings, monkeypatch, DATABASE_URL="postgres://u@db/voiceagent") == []


def test_a_secret_of_one_repeated_character_is_refused_whatever_its_length(settings, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    for weak in ("x" * 32, "x" * 64, "ab" * 32, "abcd" * 16):
        assert _secret_errors(settings, monkeypatch, REALTIME_TOKEN_SECRET=weak) == ["voiceagent.E001"], weak
        assert _secret_errors(settings, monkeypatch, SECRET_KEY=weak) == ["voiceagent.E002"], weak
    for strong in (secrets.token_hex(16), secrets.token_urlsafe(32), secrets.token_urlsafe(48)):
        assert _secret_errors(settings, monkeypatch, REALTIME_TOKEN_SECRET=strong, SECRET_KEY=strong) == []


def test_a_repeated_secret_stops_migrate_with_the_reason_not_the_value():
    env = {**documented_production_env(), "REALTIME_TOKEN_SECRET": "Q" * 40}
    result = manage("migrate", "--plan", env=env)
    assert result.returncode != 0
    assert (
        "voiceagent.E001" in result.stderr and "REALTIME_TOKEN_SECRET has too few different characters" in result.stderr
    )
    assert "Q" * 40 not in result.stderr


def test_check_deploy_wants_one_secret_key_for_every_process(settings, monkeypatch):
    from voiceagent.checks import check_shared_secret_key

    settings.DEBUG = False
    monkeypatch.delenv("SECRET_KEY", raising=False)
    monkeypatch.setenv("DATABASE_URL", "postgres://u@db/voiceagent")
    assert [error.id for error in check_shared_secret_key()] == ["voiceagent.E003"]
    monkeypatch.setenv("SECRET_KEY", secrets.token_urlsafe(48))
    assert check_shared_secret_key() == []


def test_every_value_the_docs_show_is_refused(settings, monkeypatch):
    # Whatever a doc or deploy file assigns to REALTIME_TOKEN_SECRET or SECRET_KEY, padded or not, is refused.
    from voiceagent.checks import check_secrets

    monkeypatch.delenv("DATABASE_URL", raising=False)
    settings.DEBUG = False
    settings.SECRET_KEY = secrets.token_urlsafe(48)
    examples = documented_examples()
    assert "change-me-too" in examples
    for example in examples:
        settings.REALTIME_TOKEN_SECRET = example
        assert [e.id for e in check_secrets()] == ["voiceagent.E001"], example
    settings.REALTIME_TOKEN_SECRET = secrets.token_urlsafe(48)
    assert check_secrets() == []


def test_a_value_written_in_the_docs_later_is_refused_too(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("export REALTIME_TOKEN_SECRET='copy-this-value-0123456789abcdef'\n")
    assert "copy-this-value-0123456789abcdef" in documented_examples(tmp_path)
    # An empty assignment (deploy/env.example's) names no example: the next line is not taken for one.
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "env.example").write_text("SECRET_KEY=\nALLOWED_HOSTS=voice.example.com\n")
    assert not any("ALLOWED_HOSTS" in value for value in documented_examples(tmp_path))


@pytest.mark.parametrize("content", [None, "not a certificate\n"])
def test_an_unusable_outbound_ca_file_stops_the_start_with_the_reason(tmp_path, content):
    ca_file = tmp_path / "company-ca.pem"
    if content is not None:
        ca_file.write_text(content)
    result = manage("check", env={"OUTBOUND_CA_FILE": str(ca_file)})
    assert result.returncode != 0
    assert "OUTBOUND_CA_FILE must name a readable PEM file of certificates" in result.stderr
