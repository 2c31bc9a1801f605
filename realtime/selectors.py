"""Reads of the realtime app."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from uuid import UUID

from agents.models import Agent, AgentTool, McpServerStatus, McpToolSelection
from knowledge.selectors import agent_knowledge_texts


def session_agent_get(*, organization_id: UUID, agent_id: UUID) -> Agent | None:
    """The agent a verified session token names, with what the engine reads (plan for ambient sound)."""
    return (
        Agent.objects.select_related("organization__plan").filter(pk=agent_id, organization_id=organization_id).first()
    )


def _schema_texts(schema: Any) -> Iterator[str]:
    """Property names, descriptions, titles and enum values of a JSON Schema, at any depth."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "properties" and isinstance(value, dict):
                yield from (str(name) for name in value)
            elif key in ("description", "title") and isinstance(value, str):
                yield value
            elif key == "enum" and isinstance(value, list):
                yield from (str(item) for item in value if isinstance(item, str | int | float))
            yield from _schema_texts(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from _schema_texts(item)


def agent_vocabulary_texts(*, agent_id: UUID) -> list[str]:
    """What a caller of the agent may say beyond its own prompt: its enabled tools (names,
    descriptions, parameters, enum values), its enabled MCP tools, then its knowledge text. The
    offline recognizer builds its language model from these."""
    texts: list[str] = []
    for name, description, schema in AgentTool.objects.filter(agent_id=agent_id, enabled=True).values_list(
        "name", "description", "parameter_schema"
    ):
        texts += [name, description, *_schema_texts(schema)]
    selections = McpToolSelection.objects.filter(
        agent_id=agent_id, enabled=True, server__status=McpServerStatus.ACTIVE
    ).select_related("server")
    for selection in selections:
        definition = next((t for t in selection.server.tools if t.get("name") == selection.tool_name), {})
        texts += [selection.tool_name, str(definition.get("description") or ""), *_schema_texts(definition)]
    texts += agent_knowledge_texts(agent_id=agent_id)
    return [text for text in texts if text]
