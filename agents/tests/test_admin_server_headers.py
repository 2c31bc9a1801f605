"""The agent page of the dashboard names the agent's serverHeaders but never shows their values
(credentials of the customer's server), as the tool pages do with tool headers."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User


@pytest.fixture
def staff_client(client: Any, db: Any) -> Any:
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


def test_the_agent_page_hides_server_header_values(staff_client, owner, make_agent):
    agent = make_agent(
        owner.organization,
        server_url="https://hooks.example.com/agent",
        server_headers={"Authorization": "Bearer sk-live-Zq8LmT3vX9", "X-Api-Key": "key-4Rt7Wp2Nc6"},
    )

    response = staff_client.get(f"/admin/agents/agent/{agent.pk}/change/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "sk-live-Zq8LmT3vX9" not in page and "key-4Rt7Wp2Nc6" not in page
    assert "Authorization: (hidden)" in page and "X-Api-Key: (hidden)" in page
