"""The agent page of the dashboard shows what a call gets now: the ambient sound the plan lets play, and
the exact AI-identity disclosure sentence with its version."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils.html import escape


@pytest.fixture
def staff_client(client: Any, db: Any) -> Any:
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


def _field(client: Any, agent: Any, name: str) -> str:
    response = client.get(f"/admin/agents/agent/{agent.pk}/change/")
    assert response.status_code == 200
    page = response.content.decode()
    row = page[page.index(f"field-{name}") :]
    return row[row.index('<div class="readonly">') + len('<div class="readonly">') : row.index("</div>")]


def test_a_studio_agent_plays_its_ambient_sound(staff_client, owner, make_agent):
    agent = make_agent(owner.organization, ambient_sound="office2", ambient_sound_volume=0.25)

    assert _field(staff_client, agent, "ambient_sound_now") == "office2 at 25 %, ducked"


def test_a_quiet_sound_without_ducking_says_so(staff_client, owner, make_agent):
    agent = make_agent(
        owner.organization, ambient_sound="office1", ambient_sound_volume=0.1, ambient_sound_ducking=False
    )

    assert _field(staff_client, agent, "ambient_sound_now") == "office1 at 10 %, not ducked"


def test_after_a_downgrade_to_launch_the_sound_stays_saved_but_silent(staff_client, make_persona, make_agent):
    launch = make_persona("Tiny", "launch")
    agent = make_agent(launch.organization, ambient_sound="office2")

    assert _field(staff_client, agent, "ambient_sound_now") == (
        "office2 saved but not played: the plan (Launch) has no ambient sounds"
    )


def test_no_ambient_sound_reads_none(staff_client, make_persona, make_agent):
    agent = make_agent(make_persona("Tiny", "launch").organization)

    assert _field(staff_client, agent, "ambient_sound_now") == "none"


def test_the_disclosure_is_the_exact_sentence_in_the_agents_language_with_its_version(staff_client, owner, make_agent):
    agent = make_agent(
        owner.organization, name="Lucía", language="es-ES", ai_identity_disclosure_template_id="named_agent"
    )

    assert _field(staff_client, agent, "disclosure_spoken") == escape(
        "\u201cHola, soy Lucía, un agente de inteligencia artificial.\u201d (version es-ES.named_agent.1)"
    )


def test_a_language_without_templates_speaks_the_english_disclosure(staff_client, owner, make_agent):
    agent = make_agent(owner.organization, language="de-DE")

    assert _field(staff_client, agent, "disclosure_spoken") == escape(
        "\u201cJust so you know, you are speaking with an AI, not a person.\u201d "
        "(version en-US.standard.1; no de-DE templates, English is spoken)"
    )
