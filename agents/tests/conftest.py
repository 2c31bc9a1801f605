"""What the dashboard tests of agents, tools and knowledge share: a logged-in staff client and the agent
form's fields as the page posts them."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from agents.models import Agent
from kit.fields import iso

# Every field of the new-agent form, as the browser posts it.
NEW_AGENT = {
    "name": "Ava",
    "agent_type": "webhook",
    "prompt_type": "static",
    "identity": "",
    "instructions": "You take table reservations for the Acme restaurant.",
    "greeting_type": "none",
    "static_greeting": "",
    "language": "en-US",
    "voice_name": "eve",
    "ai_identity_disclosure_template_id": "standard",
    "background_sound": "none",
    "ambient_sound": "none",
    "ambient_sound_volume": "0.25",
    "ambient_sound_ducking": "on",
    "server_url": "",
    "new_server_headers": "",
    "new_server_secret": "",
    "handoff_phone_number": "",
    "expected_updated_at": "",
}
SETTINGS = [name for name in NEW_AGENT if name in {f.name for f in Agent._meta.fields}]


@pytest.fixture
def staff_client(client: Client, db: Any) -> Client:
    client.force_login(User.objects.create_superuser("staff", "staff@example.com", "pw-staff-Xq4Lm8Tz"))
    return client


def edit_form(agent: Agent, **changes: Any) -> dict[str, Any]:
    """The agent's edit form as the page shows it (with its updatedAt), with `changes` typed in."""
    data: dict[str, Any] = {name: getattr(agent, name) for name in SETTINGS}
    data = {name: "" if value is None else value for name, value in data.items()}
    data.update(
        status=agent.status, new_server_headers="", new_server_secret="", expected_updated_at=iso(agent.updated_at)
    )
    data.update(changes)
    if data.pop("ambient_sound_ducking") is True:
        data["ambient_sound_ducking"] = "on"
    return {name: value for name, value in data.items() if value is not False}


def hidden_value(page: str, name: str) -> str:
    match = re.search(rf'name="{name}" value="([^"]*)"', page)
    assert match, f"no {name} on the page"
    return match.group(1)


def errors(page: str) -> list[str]:
    """The error messages the form shows (field errors and the errors on top), as text."""
    found = re.findall(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', page, re.S)
    return [
        html.unescape(re.sub(r"<[^>]+>", "", item)).strip()
        for block in found
        for item in re.findall(r"<li>(.*?)</li>", block, re.S)
    ]
