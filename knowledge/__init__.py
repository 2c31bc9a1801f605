"""Knowledge base of agents: documents, chunks, embeddings and hybrid search.

`knowledge.search(agent, query, k)` is re-exported lazily so that importing this package while Django
loads its apps does not import the models.
"""

from typing import Any

__all__ = ["search"]


def __getattr__(name: str) -> Any:
    if name == "search":
        from knowledge.search import search

        return search
    raise AttributeError(f"module 'knowledge' has no attribute {name!r}")
