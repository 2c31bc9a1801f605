import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.models import ApiKey, Organization, Plan
from accounts.services import apikey_revoke, hash_api_key


def test_plans_are_seeded_with_their_allowances(db):
    plans = {p.code: p for p in Plan.objects.all()}
    assert plans["trial"].max_active_agents == 1
    assert plans["launch"].max_active_agents == 2
    assert plans["studio"].max_active_agents == 10
    assert plans["agency"].max_active_agents is None
    assert [code for code, p in plans.items() if p.ambient_sounds_allowed] == ["studio", "agency"]
    assert all(p.included_minutes > 0 for p in plans.values())


def test_a_valid_key_reaches_the_api(owner):
    assert owner.client.get("/public/v1/agents").status_code == 200


def test_a_request_without_a_key_is_401_missing(anonymous, db):
    response = anonymous.get("/public/v1/agents")
    assert response.status_code == 401
    assert response["Content-Type"].startswith("application/json")
    assert response["WWW-Authenticate"] == 'Bearer realm="api"'
    assert response.json()["error"].startswith("Missing API key")


@pytest.mark.parametrize(
    "header",
    ["", "Bearer", "Bearer ", "Basic abc", "Token va_abcdefghijklmnopqrstuvwxyz", "Bearer a b c", "Bearer k€y"],
)
def test_a_malformed_authorization_header_is_401_malformed(anonymous, db, header):
    anonymous.credentials(HTTP_AUTHORIZATION=header)
    response = anonymous.get("/public/v1/agents")
    assert response.status_code == 401
    assert response["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert error.startswith("Missing API key" if header == "" else "Malformed Authorization header")


@pytest.mark.parametrize("key", ["va_nope", "short", "va_" + "x" * 43, "x" * 200, "dG9rZW4="])
def test_a_well_formed_bearer_header_with_an_unknown_key_is_401_invalid(anonymous, db, key):
    anonymous.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    response = anonymous.get("/public/v1/agents")
    assert response.status_code == 401
    assert response.json() == {"error": "Invalid API key"}


def test_the_bearer_scheme_is_case_insensitive(owner, anonymous):
    anonymous.credentials(HTTP_AUTHORIZATION=f"bearer {owner.api_key}")
    assert anonymous.get("/public/v1/agents").status_code == 200


def test_revoked_key_is_401_while_other_keys_of_the_org_still_work(owner, teammate):
    apikey_revoke(api_key=ApiKey.objects.get(key_hash=hash_api_key(owner.api_key)))
    response = owner.client.get("/public/v1/agents")
    assert response.status_code == 401
    assert response.json() == {"error": "Invalid API key"}
    assert teammate.client.get("/public/v1/agents").status_code == 200


def test_keys_are_stored_only_as_hashes(owner):
    key = ApiKey.objects.get(organization=owner.organization)
    assert owner.api_key not in {key.key_hash, key.prefix, key.name}
    assert key.key_hash == hash_api_key(owner.api_key)
    assert owner.api_key.startswith(key.prefix)


def test_use_of_a_key_is_recorded(owner):
    owner.client.get("/public/v1/agents")
    assert ApiKey.objects.get(organization=owner.organization).last_used_at is not None


def run(*args):
    out = StringIO()
    call_command(*args, stdout=out)
    return json.loads(out.getvalue())


def test_createorg_prints_the_org_and_a_working_key(db, client):
    result = run("createorg", "--name", "Ops Co", "--plan", "launch")
    assert set(result) == {"organizationId", "apiKey"}
    organization = Organization.objects.get(pk=result["organizationId"])
    assert organization.plan.code == "launch" and not organization.on_trial
    response = client.get("/public/v1/agents", HTTP_AUTHORIZATION=f"Bearer {result['apiKey']}")
    assert response.status_code == 200


def test_createorg_on_trial_marks_the_org_on_trial(db):
    result = run("createorg", "--name", "T", "--plan", "trial")
    assert Organization.objects.get(pk=result["organizationId"]).on_trial


def test_createapikey_and_setplan(owner, client):
    org_id = str(owner.organization.id)
    key = run("createapikey", "--org", org_id)["apiKey"]
    assert client.get("/public/v1/agents", HTTP_AUTHORIZATION=f"Bearer {key}").status_code == 200
    assert run("setplan", "--org", org_id, "--plan", "trial") == {"organizationId": org_id, "plan": "trial"}
    owner.organization.refresh_from_db()
    assert owner.organization.on_trial and owner.organization.plan.code == "trial"
    run("setplan", "--org", org_id, "--plan", "agency")
    owner.organization.refresh_from_db()
    assert not owner.organization.on_trial


def test_commands_reject_unknown_or_malformed_orgs(db):
    with pytest.raises(CommandError):
        run("createapikey", "--org", "not-a-uuid")
    with pytest.raises(CommandError):
        run("setplan", "--org", "00000000-0000-0000-0000-000000000000", "--plan", "studio")


def test_bootstrapdemo_creates_the_demo_org_once(db, tmp_path, monkeypatch):
    from accounts.management.commands import bootstrapdemo

    monkeypatch.setattr(bootstrapdemo, "DEMO_FILE", tmp_path / "demo.json")
    first = StringIO()
    call_command("bootstrapdemo", stdout=first)
    demo = json.loads((tmp_path / "demo.json").read_text())
    assert demo["apiKey"] in first.getvalue()
    second = StringIO()
    call_command("bootstrapdemo", stdout=second)
    assert demo["apiKey"] not in second.getvalue()
    assert Organization.objects.filter(name="Demo").count() == 1
