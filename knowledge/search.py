"""Hybrid retrieval over one agent's knowledge: exact cosine similarity with NumPy, fused with a
database full-text score (PostgreSQL tsvector / SQLite FTS5) so that exact codes and names are found.

Vectors live in the database; each process keeps a copy per agent (an LRU of a few agents) and checks
it against the agent's index version (one primary-key read) before every search, so a document added
or deleted by any process is seen by the next search of every process.
"""

from __future__ import annotations

import re
import sys
import threading
import types
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection

from knowledge.embeddings import embed_and_score, from_bytes
from knowledge.models import AgentKnowledgeIndex, KnowledgeChunk

MAX_K = 50
# A query term found in more of the agent's chunks than this carries no keyword signal (the vector side
# covers its meaning); skipping it keeps the keyword side cheap at 100k chunks.
COMMON_TERM_LIMIT = 100
# How much the keyword score (0..1, the best keyword match of a query gets 1) adds to the cosine
# similarity: enough to lift a chunk holding an exact code above paraphrases, small next to a good
# meaning match.
KEYWORD_WEIGHT = 0.25
_TERM = re.compile(r"\w+")
_STOPWORDS = frozenset(
    "a an and are as at be by can do does for from had has have how i if in is it its me my of on or our "
    "should so than that the their them then there these they this to us was we were what when where which "
    "who why will with would you your".split()
)


@dataclass(frozen=True)
class SearchHit:
    document_id: str
    document_name: str
    chunk_id: int
    text: str
    heading_path: list[str]
    page: int | None
    score: float


@dataclass(frozen=True)
class _Vectors:
    version: uuid.UUID
    ids: np.ndarray  # int64, ascending
    matrix: np.ndarray  # float32 (n, 384), L2-normalized rows


_cache: OrderedDict[Any, _Vectors] = OrderedDict()
_cache_lock = threading.Lock()
_agent_locks: dict[Any, threading.Lock] = {}


def _agent_lock(agent_pk: Any) -> threading.Lock:
    with _cache_lock:
        return _agent_locks.setdefault(agent_pk, threading.Lock())


def _current_version(agent_pk: Any) -> uuid.UUID | None:
    return AgentKnowledgeIndex.objects.filter(agent_id=agent_pk).values_list("version", flat=True).first()


def _agent_param(agent_pk: Any) -> Any:
    """The agent id as a raw SQL parameter of this database."""
    return KnowledgeChunk._meta.get_field("agent").get_db_prep_value(agent_pk, connection)


def _stored_vectors(agent_pk: Any) -> list[tuple[int, bytes]]:
    """(chunk id, embedding bytes) of the agent's chunks in id order."""
    if connection.vendor == "postgresql":
        # psycopg's binary format sends bytea as it is, not as hex text: 100,000 vectors load in about
        # 0.55 s instead of 1.3 s. (Django's cursors bind parameters client-side and cannot ask for it.)
        import psycopg

        connection.ensure_connection()
        with psycopg.Cursor(connection.connection) as cursor:
            cursor.execute(
                "SELECT id, embedding FROM knowledge_chunk WHERE agent_id = %s ORDER BY id",
                [_agent_param(agent_pk)],
                binary=True,
            )
            return cursor.fetchall()
    return list(KnowledgeChunk.objects.filter(agent_id=agent_pk).order_by("id").values_list("id", "embedding"))


def _vectors(agent_pk: Any) -> _Vectors | None:
    version = _current_version(agent_pk)
    if version is None:
        return None
    with _cache_lock:
        entry = _cache.get(agent_pk)
        if entry is not None and entry.version == version:
            _cache.move_to_end(agent_pk)
            return entry
    with _agent_lock(agent_pk):
        with _cache_lock:
            entry = _cache.get(agent_pk)
        if entry is not None and entry.version == version:
            return entry
        # The version was read before the rows: a change in between makes this copy newer than its
        # label, never older, and the next search reloads it.
        rows = _stored_vectors(agent_pk)
        entry = _Vectors(
            version=version,
            ids=np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)),
            matrix=from_bytes([r[1] for r in rows]),
        )
        with _cache_lock:
            _cache[agent_pk] = entry
            _cache.move_to_end(agent_pk)
            while len(_cache) > settings.KNOWLEDGE_SEARCH_CACHE_AGENTS:
                _cache.popitem(last=False)
        return entry


def query_terms(query: str) -> list[str]:
    terms: list[str] = []
    for term in _TERM.findall(query.lower()):
        if term not in _STOPWORDS and term not in terms:
            terms.append(term)
    return terms[:32]


def _term_matches(agent_pk: Any, terms: list[str]) -> dict[str, list[int]]:
    """For each term, the ids of the agent's chunks that contain it (database full-text, stemmed), at
    most COMMON_TERM_LIMIT + 1 of them: a term found more often is too common to tell chunks apart."""
    agent_param = _agent_param(agent_pk)
    limit = COMMON_TERM_LIMIT + 1
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                # OFFSET 0 keeps the GIN index as the way in (the agent index would scan every chunk).
                "SELECT t.term, m.id FROM unnest(%s::text[]) AS t(term) CROSS JOIN LATERAL ("
                "SELECT s.id FROM (SELECT id, agent_id FROM knowledge_chunk "
                "WHERE search_vector @@ plainto_tsquery('english', t.term) OFFSET 0) AS s "
                "WHERE s.agent_id = %s LIMIT %s) AS m",
                [terms, agent_param, limit],
            )
        elif connection.vendor == "sqlite":
            one = (
                # CROSS JOIN makes SQLite start from the full-text matches, not from the agent's chunks.
                "SELECT * FROM (SELECT %s AS term, c.id FROM knowledge_chunk_fts "
                "CROSS JOIN knowledge_chunk c ON c.id = knowledge_chunk_fts.rowid "
                "WHERE knowledge_chunk_fts MATCH %s AND c.agent_id = %s LIMIT %s)"
            )
            params: list[Any] = []
            for term in terms:
                params += [term, f'"{term}"', agent_param, limit]
            cursor.execute(" UNION ALL ".join([one] * len(terms)), params)
        else:
            return {}
        matches: dict[str, list[int]] = {}
        for term, chunk_id in cursor.fetchall():
            matches.setdefault(term, []).append(int(chunk_id))
    return matches


def _keyword_scores(vectors: _Vectors, matches: dict[str, list[int]]) -> np.ndarray:
    """Per chunk, the summed inverse document frequency of the distinctive query terms it contains,
    scaled so that the best chunk gets 1 (all zeros when no distinctive term matched)."""
    scores = np.zeros(len(vectors.ids), dtype=np.float32)
    total = len(vectors.ids)
    for ids in matches.values():
        if len(ids) > COMMON_TERM_LIMIT:
            continue
        found = np.array(ids, dtype=np.int64)
        positions = np.searchsorted(vectors.ids, found)
        positions = positions[positions < total]
        positions = positions[np.isin(vectors.ids[positions], found)]  # ids newer than this copy drop out
        scores[positions] += np.log1p(total / len(ids))
    top = float(scores.max()) if total else 0.0
    return scores / top if top > 0 else scores


def search(agent: Any, query: str, k: int = 5) -> list[SearchHit]:
    """The agent's `k` best chunks for `query` (best first); `agent` is an Agent or its id."""
    agent_pk = getattr(agent, "pk", agent)
    query = (query or "").strip()
    k = max(0, min(int(k), MAX_K))
    if not query or k == 0:
        return []
    vectors = _vectors(agent_pk)
    if vectors is None or len(vectors.ids) == 0:
        return []
    # The keyword matches are read first: right after an ONNX Runtime call its worker thread still spins
    # for a moment and a database round trip waits for a core, so only the hits' read follows it.
    terms = query_terms(query)
    matches = _term_matches(agent_pk, terms) if terms else {}
    # One ONNX Runtime call embeds the query and multiplies the agent's matrix by it (exact cosine
    # similarity over every chunk). Measured: a second thread pool (BLAS) spinning beside ONNX Runtime's
    # doubles the time of both, and running this beside the keyword query is slower on 2 cores.
    scores = embed_and_score(query, vectors.matrix)
    if matches:
        scores += KEYWORD_WEIGHT * _keyword_scores(vectors, matches)

    count = min(k, len(scores))
    best = np.argpartition(scores, len(scores) - count)[len(scores) - count :]
    best = best[np.argsort(-scores[best], kind="stable")]
    chunk_ids = [int(vectors.ids[i]) for i in best]
    rows = {
        row["id"]: row
        for row in KnowledgeChunk.objects.filter(id__in=chunk_ids).values(
            "id", "text", "heading_path", "page", "document_id", "document__name"
        )
    }
    hits = []
    for index, chunk_id in zip(best, chunk_ids, strict=True):
        row = rows.get(chunk_id)
        if row is None:  # deleted since the vectors were read
            continue
        hits.append(
            SearchHit(
                document_id=str(row["document_id"]),
                document_name=row["document__name"],
                chunk_id=chunk_id,
                text=row["text"],
                heading_path=list(row["heading_path"] or []),
                page=row["page"],
                score=float(scores[index]),
            )
        )
    return hits


class _CallableModule(types.ModuleType):
    """`knowledge.search` is both this module and the function: once the submodule is imported, Python
    binds the package attribute to the module, so the module itself must answer a call."""

    def __call__(self, agent: Any, query: str, k: int = 5) -> list[SearchHit]:
        return search(agent, query, k)


sys.modules[__name__].__class__ = _CallableModule
