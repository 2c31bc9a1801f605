"""The agent resource of the public API as the agent field tests call it, with one persona's API key:
create an agent (its id), read it, find it in the list, patch it with its current updatedAt."""

from __future__ import annotations

from typing import Any

AGENTS = "/public/v1/agents"


def created(persona: Any, body: dict[str, Any]) -> str:
    response = persona.client.post(AGENTS, body, format="json")
    assert response.status_code == 200, response.json()
    return str(response.json()["id"])


def read(persona: Any, agent_id: str) -> dict[str, Any]:
    response = persona.client.get(f"{AGENTS}/{agent_id}")
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


def listed(persona: Any, agent_id: str) -> dict[str, Any]:
    response = persona.client.get(AGENTS)
    assert response.status_code == 200
    return {item["id"]: item for item in response.json()}[agent_id]


def patched(persona: Any, agent_id: str, **fields: Any) -> Any:
    """The response to a PATCH of `fields` (with the agent's current updatedAt)."""
    expected = read(persona, agent_id)["updatedAt"]
    return persona.client.patch(f"{AGENTS}/{agent_id}", {"expectedUpdatedAt": expected, **fields}, format="json")
