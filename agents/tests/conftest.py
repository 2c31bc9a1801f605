"""What the dashboard tests of agents, tools and knowledge share: a logged-in staff client (the agent form
and the page readers are testing/dashboard.py's)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from testing.dashboard import STAFF_PASSWORD


@pytest.fixture
def staff_client(client: Client, db: Any) -> Client:
    client.force_login(User.objects.create_superuser("staff", "staff@example.com", STAFF_PASSWORD))
    return client
