import re

import pytest
from django.contrib.auth.models import User

from accounts.models import ApiKey, Organization, Plan


@pytest.fixture
def staff_client(client, db):
    User.objects.create_superuser("staff", "staff@example.com", "pw-staff-123")
    client.login(username="staff", password="pw-staff-123")
    return client


def test_admin_creates_a_key_and_shows_it_once(staff_client, owner):
    response = staff_client.post(
        "/admin/accounts/apikey/add/", {"organization": owner.organization.pk, "name": "ci"}, follow=True
    )
    page = response.content.decode()
    shown = re.search(r"copy it\): (va_[A-Za-z0-9_\-]+)", page)
    assert shown, "the new key is shown on the page after creation"
    raw = shown.group(1)
    key = ApiKey.objects.get(name="ci")
    assert raw.startswith(key.prefix) and raw not in key.key_hash
    again = staff_client.get(f"/admin/accounts/apikey/{key.pk}/change/").content.decode()
    assert raw not in again
    staff_client.logout()
    assert staff_client.get("/public/v1/agents", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200


def test_admin_revoke_action(staff_client, owner):
    key = ApiKey.objects.get(organization=owner.organization)
    staff_client.post("/admin/accounts/apikey/", {"action": "revoke", "_selected_action": [key.pk]})
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert owner.client.get("/public/v1/agents").status_code == 401


@pytest.mark.parametrize(
    "path",
    [
        "/admin/accounts/organization/?q=Acme&plan__id__exact=1",
        "/admin/accounts/plan/",
        "/admin/accounts/apikey/?q=va_",
        "/admin/agents/agent/?status__exact=draft&q=x",
        "/admin/telephony/phonenumber/?status__exact=claimed&q=%2B1",
    ],
)
def test_dashboard_pages_are_searchable_and_filterable(staff_client, owner, path):
    assert staff_client.get(path).status_code == 200


def test_a_new_organization_gets_an_api_key_shown_once_and_its_trial_follows_the_plan(staff_client):
    trial = Plan.objects.get(code="trial")
    response = staff_client.post(
        "/admin/accounts/organization/add/",
        {"name": "Globex", "plan": trial.pk, "api_keys-TOTAL_FORMS": "0", "api_keys-INITIAL_FORMS": "0"},
        follow=True,
    )

    organization = Organization.objects.get(name="Globex")
    assert organization.on_trial  # organization_create's rule: the trial plan puts it on trial
    raw = re.search(r"copy it\): (va_[A-Za-z0-9_\-]+)", response.content.decode()).group(1)
    assert ApiKey.objects.get(organization=organization).prefix == raw[:10]
    assert staff_client.get("/public/v1/agents", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200
    page = staff_client.get(f"/admin/accounts/organization/{organization.pk}/change/").content.decode()
    assert raw not in page
    assert 'name="on_trial"' not in page  # shown, not edited: it follows the plan


def test_the_dashboard_sets_the_organizations_destination_countries(staff_client, owner):
    organization = owner.organization
    url = f"/admin/accounts/organization/{organization.pk}/change/"
    form = {
        "name": organization.name,
        "plan": organization.plan_id,
        "billing_period_start_0": "2026-11-01",
        "billing_period_start_1": "00:00:00",
        "api_keys-TOTAL_FORMS": "1",
        "api_keys-INITIAL_FORMS": "1",
        "api_keys-0-id": str(ApiKey.objects.get(organization=organization).pk),
        "api_keys-0-organization": str(organization.pk),
    }

    refused = staff_client.post(url, {**form, "outbound_countries": "US, Narnia"})
    assert refused.status_code == 200  # the form again, with the error
    assert "is not an ISO 3166-1 alpha-2 country code" in refused.content.decode()
    organization.refresh_from_db()
    assert organization.outbound_countries is None

    assert staff_client.post(url, {**form, "outbound_countries": "us gb,CA"}).status_code == 302
    assert owner.client.get("/public/v1/organization").json()["outboundCountriesInEffect"] == ["CA", "GB", "US"]
    assert 'value="CA, GB, US"' in staff_client.get(url).content.decode()

    assert staff_client.post(url, {**form, "outbound_countries": ""}).status_code == 302
    assert owner.client.get("/public/v1/organization").json()["outboundCountries"] is None
