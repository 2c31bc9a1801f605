"""The native `search_knowledge` tool: the agent's knowledge documents, best passages first.

Result: {"passages": [{"document": <document name>, "section": <the heading the chunk is under, "" when
none but the document's title>, "text": <chunk text>, "score": <rounded to 3 decimals>}, ...]} with at
most PASSAGES items, best first; {"passages": []} when nothing is indexed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from django.db import connections

from knowledge.search import search
from realtime.engine.tools.base import CallContext, ToolError, ToolKind

logger = logging.getLogger(__name__)

PASSAGES = 3
DESCRIPTION = (
    "Search the agent's knowledge documents for passages that answer the caller's question. "
    "Use it before answering questions about facts you are not sure of."
)
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "What to look for, in a few words or a short question."}},
    "required": ["query"],
}


def _search(agent_id: Any, query: str, k: int) -> list[Any]:
    try:
        return search(agent_id, query, k)
    finally:
        # A worker thread of asyncio's pool: give its connection back (to the pool on PostgreSQL).
        connections.close_all()


def _section(path: list[str], document: str) -> str:
    """The heading a passage is under, unless it is only the document's title."""
    headings = [heading for heading in path if heading.strip()]
    if not headings or (len(headings) == 1 and headings[0].strip().lower() == document.strip().lower()):
        return ""
    return headings[-1].strip() if len(headings) > 1 else headings[0].strip()


class SearchKnowledgeTool(ToolKind):
    kind = "search_knowledge"

    def __init__(self, *, agent_id: Any, passages: int = PASSAGES) -> None:
        self.agent_id = agent_id
        self.passages = passages

    async def invoke(self, arguments: dict[str, Any], *, tool_call_id: str, context: CallContext) -> dict[str, Any]:
        try:
            hits = await asyncio.to_thread(_search, self.agent_id, str(arguments.get("query", "")), self.passages)
        except Exception:  # logged here; the brain gets plain words
            logger.exception("knowledge search failed (agent %s)", self.agent_id)
            raise ToolError("The knowledge search failed") from None
        return {
            "passages": [
                {
                    "document": hit.document_name,
                    "section": _section(hit.heading_path, hit.document_name),
                    "text": hit.text,
                    "score": round(hit.score, 3),
                }
                for hit in hits
            ]
        }
