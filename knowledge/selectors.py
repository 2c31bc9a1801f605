"""Reads of knowledge documents. Every query is scoped to the caller's organization (through an agent
the caller has already resolved within it)."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Expression, IntegerField, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce

from agents.models import Agent
from kit.db import IsoUtc
from knowledge.models import DocumentStatus, KnowledgeChunk, KnowledgeDocument


def document_count_subquery() -> Expression:
    """Per-agent knowledge document count (all statuses), for the agent list: one correlated subquery
    on OuterRef('pk'), so no query per agent."""
    counts = (
        KnowledgeDocument.objects.filter(agent=OuterRef("pk"))
        .order_by()
        .values("agent")
        .annotate(count=Count("pk"))
        .values("count")
    )
    return Coalesce(Subquery(counts, output_field=IntegerField()), Value(0), output_field=IntegerField())


def document_list(*, agent: Agent) -> list[dict[str, Any]]:
    """The agent's documents as list items, oldest first. The caller has resolved the agent within its
    organization (agents.selectors.agent_get); this app sits above agents, and the agent list that reads
    this app's document count sits above it (api/agents/selectors.py)."""
    rows = (
        KnowledgeDocument.objects.filter(agent=agent)
        .annotate(created_at_iso=IsoUtc("created_at"))
        .order_by("created_at", "id")
        .values("id", "name", "description", "type", "size_bytes", "status", "error", "chunk_count", "created_at_iso")
    )
    return [
        {
            "id": str(row["id"]),
            "name": row["name"],
            "description": row["description"],
            "type": row["type"],
            "sizeBytes": row["size_bytes"],
            "status": row["status"],
            "error": row["error"],
            "chunkCount": row["chunk_count"],
            "createdAt": row["created_at_iso"],
        }
        for row in rows
    ]


def agent_knowledge_texts(*, agent_id: Any) -> list[str]:
    """The chunk texts of the agent's ready documents, in document and reading order."""
    return list(
        KnowledgeChunk.objects.filter(agent_id=agent_id, document__status=DocumentStatus.READY)
        .order_by("document__created_at", "document_id", "position")
        .values_list("text", flat=True)
    )


def agent_has_ready_documents(*, agent_id: Any) -> bool:
    """Whether the agent has at least one `ready` knowledge document (search_knowledge is offered)."""
    return KnowledgeDocument.objects.filter(agent_id=agent_id, status=DocumentStatus.READY).exists()


def document_processing_count(*, organization_id: Any) -> int:
    """The organization's documents still `processing` (uploaded, not yet indexed), every agent's."""
    return KnowledgeDocument.objects.filter(organization_id=organization_id, status=DocumentStatus.PROCESSING).count()
