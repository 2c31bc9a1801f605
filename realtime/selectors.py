"""Reads of the realtime app."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from agents.models import Agent, AgentStatus, AgentTool, AgentType, McpServer, McpServerStatus, McpToolSelection
from agents.selectors import handoff_targets
from agents.tools.selectors import agent_enabled_tools, agent_mcp_tools
from knowledge.selectors import agent_has_ready_documents, agent_knowledge_texts
from telephony.selectors import assigned_number_handoff


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
    descriptions, parameters, enum values), its enabled MCP tools, its handoffs' descriptions, then its
    knowledge text. The
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
        definition: dict[str, Any] = next(
            (t for t in selection.server.tools if t.get("name") == selection.tool_name), {}
        )
        texts += [selection.tool_name, str(definition.get("description") or ""), *_schema_texts(definition)]
    handoffs = Agent.objects.filter(pk=agent_id).values_list("handoffs", flat=True).first() or []
    texts += [str(entry.get("description") or "") for entry in handoffs if isinstance(entry, dict)]
    texts += agent_knowledge_texts(agent_id=agent_id)
    return [text for text in texts if text]


def handoff_destination(*, agent: Agent, to_number: str | None) -> str | None:
    """Where transfer_call sends a call of `agent`: the per-number handoff of the number the call came
    in on (`to_number`, when it is one of the agent's numbers), else the agent's own, else None."""
    per_number = assigned_number_handoff(agent_id=agent.pk, phone_number=to_number) if to_number else None
    return per_number or agent.handoff_phone_number or None


@dataclass(frozen=True)
class SessionTools:
    """Everything the tool dispatcher of one conversation reads, in one place (read once per session)."""

    custom_tools: list[AgentTool]  # enabled, oldest first; none for static agents
    mcp_tools: list[tuple[McpServer, dict[str, Any]]]  # (active server with credentials, cached definition)
    has_knowledge: bool
    handoff_phone_number: str | None
    handoffs: list[tuple[dict[str, Any], Agent]]  # (the `handoffs` entry, its target: active, same organization)
    flow_handoffs: list[Agent]  # the targets of the flow's handoff steps that are active agents of the organization


def handoff_agent_get(*, organization_id: Any, agent_id: str) -> Agent | None:
    """The agent a call is handed to: active, in the organization (None otherwise), with what a session reads."""
    return (
        Agent.objects.select_related("organization__plan")
        .filter(organization_id=organization_id, pk=agent_id, status=AgentStatus.ACTIVE)
        .first()
    )


def session_tools_get(
    *, agent: Agent, to_number: str | None, handoffs: bool = True, flow_handoffs: Sequence[str] = ()
) -> SessionTools:
    """`handoffs`: False once the call has had its last allowed handoff (no handoff tool is offered);
    `flow_handoffs`: the agent ids of the flow's handoff steps."""
    custom = [] if agent.agent_type == AgentType.STATIC else agent_enabled_tools(agent=agent)
    return SessionTools(
        custom_tools=custom,
        mcp_tools=agent_mcp_tools(agent=agent),
        has_knowledge=agent_has_ready_documents(agent_id=agent.pk),
        handoff_phone_number=handoff_destination(agent=agent, to_number=to_number),
        handoffs=handoff_targets(agent=agent) if handoffs else [],
        flow_handoffs=_active_others(agent, flow_handoffs) if handoffs and flow_handoffs else [],
    )


def _active_others(agent: Agent, ids: Sequence[str]) -> list[Agent]:
    """The active agents of the agent's organization among `ids`, other than the agent."""
    return list(
        Agent.objects.filter(organization_id=agent.organization_id, status=AgentStatus.ACTIVE, pk__in=ids).exclude(
            pk=agent.pk
        )
    )
