import re

import pytest
from django.contrib.auth.models import User

from accounts.models import ApiKey


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
