"""Knowledge benchmark (not a test): ingestion throughput and knowledge.search latency.

Runs in-process against its own database: a fresh SQLite file var/bench-kbench.sqlite3, or the
PostgreSQL named by DATABASE_URL with `_kbench` appended to the database name (dropped at the end).

1. Ingestion: a Markdown document of --paragraphs paragraphs goes through the real pipeline
   (chunking, all-MiniLM-L6-v2 embeddings on CPU, storage); prints chunks/s and paragraphs/s.
2. Search: one agent with 10,000 and then 100,000 chunks. Embedding 100k texts would take ~12 minutes
   on 2 cores, so these chunks hold generated text (random words of a 3,000-word vocabulary, so the
   full-text side has realistic posting lists) and random unit vectors. Every search embeds its query
   with the real model. Cold = the first search after a change of the agent's documents (the process
   reloads the vectors); warm = later searches. Prints p50/p95 in ms.
3. Retrieval quality (real model, real full-text): the documents and questions of
   testing/documents.py, each set in an agent of its own: the help centre as four Markdown
   documents, the same text as one long plain-text file, and three short uploads (a hotel FAQ .txt,
   a menu .md, a policy .pdf). Prints the chunk counts, how often the chunk that answers is the best
   hit and among the best 3, and how often the embedded brain, given the search_knowledge tool's
   real result, speaks the answer (and how often it speaks a title or heading line).

Usage: .venv/bin/python bench/knowledge_bench.py [--paragraphs 300] [--sizes 10000,100000] [--queries 200]
(--sizes "" skips the search part)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from testing.figures import percentile  # noqa: E402 - after the repository root is put on sys.path
from testing.stores import bench_database, drop_bench_database  # noqa: E402 - after the repository root is put on sys.path

QUERIES = [
    "how long does delivery take to Spain",
    "what does error code E-37 mean",
    "can I return a used helmet",
    "battery storage over winter",
    "which payment methods do you accept",
    "reset the router to factory settings",
    "opening hours on Sunday",
    "warranty on the frame and components",
]


def vocabulary(rng: np.random.Generator, size: int = 3000) -> list[str]:
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "por", "len", "dax", "qui", "bre", "tor", "ful"]
    words: set[str] = {w for q in QUERIES for w in q.split()}
    while len(words) < size:
        words.add("".join(rng.choice(syllables, size=int(rng.integers(2, 4)))))
    return sorted(words)


def bench_ingestion(organization, agent, paragraphs: int) -> None:
    from knowledge import services
    from knowledge.models import KnowledgeDocument

    topics = ["shipping", "returns", "battery", "warranty", "payments", "servicing", "frames", "tracking"]
    parts = []
    for i in range(paragraphs):
        if i % 10 == 0:
            parts.append(f"## Section {i // 10}: {topics[(i // 10) % len(topics)]}")
        topic = topics[i % len(topics)]
        parts.append(
            f"Paragraph {i} explains {topic} for order type {i % 17}. Customers in region {i % 23} "
            f"usually ask about {topic} after their first purchase, and our team answers within {i % 5 + 1} days. "
            f"Keep reference code R-{1000 + i} when you contact us about it."
        )
    content = "# Help centre\n\n" + "\n\n".join(parts)
    started = time.perf_counter()
    document = services.document_create(organization=organization, agent_id=str(agent.id), content=content)
    elapsed = time.perf_counter() - started
    document = KnowledgeDocument.objects.get(pk=document.pk)
    print(
        f"ingestion: {paragraphs} paragraphs ({len(content.encode()) / 1024:.0f} KiB) -> {document.chunk_count} chunks "
        f"in {elapsed:.1f} s (upload incl. name/description suggestion, chunking, embedding, storage): "
        f"{document.chunk_count / elapsed:.1f} chunks/s, {paragraphs / elapsed:.1f} paragraphs/s"
    )


def grow_to(organization, agent, size: int, rng: np.random.Generator, words: list[str]) -> None:
    from django.db import connection, transaction

    from knowledge.embeddings import DIMENSIONS
    from knowledge.ingestion import index_changed
    from knowledge.models import DocumentStatus, KnowledgeChunk, KnowledgeDocument

    have = KnowledgeChunk.objects.filter(agent=agent).count()
    started = time.perf_counter()
    batch = 5000
    while have < size:
        n = min(batch, size - have)
        vectors = rng.standard_normal((n, DIMENSIONS)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        lengths = rng.integers(60, 120, size=n)
        with transaction.atomic():
            document = KnowledgeDocument.objects.create(
                organization=organization,
                agent=agent,
                name=f"generated {have}",
                type="text",
                size_bytes=0,
                status=DocumentStatus.READY,
                chunk_count=n,
            )
            KnowledgeChunk.objects.bulk_create(
                [
                    KnowledgeChunk(
                        document=document,
                        agent=agent,
                        position=i,
                        text=" ".join(rng.choice(words, size=int(lengths[i]))),
                        heading_path=[],
                        token_count=int(lengths[i]),
                        embedding=vectors[i].astype("<f4").tobytes(),
                    )
                    for i in range(n)
                ],
                batch_size=1000,
            )
            index_changed(agent_id=agent.pk)
        have += n
    if connection.vendor == "postgresql":
        # What autovacuum does a little later anyway; done now, it does not run during the measurements.
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE knowledge_chunk")
    print(f"  (stored {size} chunks in {time.perf_counter() - started:.0f} s)")


def bench_search(agent, size: int, queries: int, cold_runs: int) -> None:
    from knowledge.embeddings import embed
    from knowledge.models import AgentKnowledgeIndex
    from knowledge.search import search

    cold = []
    for _ in range(cold_runs):
        # A change of the agent's documents, as any process's upload or delete makes it.
        AgentKnowledgeIndex.objects.filter(agent=agent).update(version=uuid.uuid4())
        started = time.perf_counter()
        search(agent, QUERIES[0], k=5)
        cold.append((time.perf_counter() - started) * 1000)
    warm = []
    for i in range(queries):
        started = time.perf_counter()
        hits = search(agent, QUERIES[i % len(QUERIES)], k=5)
        warm.append((time.perf_counter() - started) * 1000)
        assert len(hits) == 5
    embed_ms = []
    for i in range(min(queries, 100)):
        started = time.perf_counter()
        embed([QUERIES[i % len(QUERIES)]])
        embed_ms.append((time.perf_counter() - started) * 1000)
    print(
        f"search, {size:>7,} chunks: cold p50 {percentile(cold, 50):7.1f} ms p95 {percentile(cold, 95):7.1f} ms "
        f"(n={cold_runs}) | warm p50 {percentile(warm, 50):5.1f} ms p95 {percentile(warm, 95):5.1f} ms "
        f"(n={queries}; of which query embedding p50 {statistics.median(embed_ms):.1f} ms)"
    )


def spoken_answer(agent, question: str) -> str:
    """What the embedded brain says to `question` after its search_knowledge call."""
    import asyncio
    import json

    from realtime.engine.brain.embedded.responder import EmbeddedBrain
    from realtime.engine.contracts import BrainContext, TextPiece, ToolCall, ToolSpec, Turn
    from realtime.engine.tools import search_knowledge
    from realtime.engine.tools.base import CallContext

    tool = search_knowledge.SearchKnowledgeTool(agent_id=agent.pk)
    call = ToolCall(id="call_1", name="search_knowledge", arguments={"query": question})
    result = asyncio.run(tool.invoke(call.arguments, tool_call_id=call.id, context=CallContext(None, str(agent.pk))))
    spec = ToolSpec("search_knowledge", search_knowledge.DESCRIPTION, search_knowledge.PARAMETERS)
    context = BrainContext(agent_name=agent.name, language="en-US", tools=(spec,))
    history = (
        Turn(role="user", text=question),
        Turn(role="assistant", tool_calls=(call,)),
        Turn(role="tool", text=json.dumps(result), tool_call_id=call.id, name=call.name),
    )
    return " ".join(
        o.text for o in EmbeddedBrain(language="en-US").answer(context, history) if isinstance(o, TextPiece)
    )


def bench_quality(organization) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.utils import timezone

    from agents.models import Agent
    from knowledge import services
    from knowledge.models import KnowledgeDocument
    from testing import documents

    sets = [
        (
            "help centre, 4 Markdown documents",
            [(None, text) for text in documents.HELP_CENTRE],
            documents.HELP_QUESTIONS,
        ),
        (
            "help centre as one plain-text file",
            [("help-centre.txt", documents.help_centre_as_one_text().encode())],
            documents.HELP_QUESTIONS,
        ),
        ("hotel FAQ .txt, menu .md, policy .pdf", documents.uploads(), documents.SHORT_QUESTIONS),
    ]
    for title, files, questions in sets:
        agent = Agent.objects.create(organization=organization, name=title[:60], updated_at=timezone.now())
        for name, data in files:
            if name is None:
                services.document_create(organization=organization, agent_id=str(agent.id), content=data)
            else:
                upload = SimpleUploadedFile(name, data)
                services.document_create(organization=organization, agent_id=str(agent.id), upload=upload)
        counts = list(
            KnowledgeDocument.objects.filter(agent=agent).order_by("created_at").values_list("chunk_count", flat=True)
        )
        ranks = documents.answer_ranks(agent, questions, k=3)
        top1 = sum(rank == 1 for rank in ranks)
        top3 = sum(rank is not None for rank in ranks)
        spoken = [spoken_answer(agent, question) for question, _ in questions]
        answered = sum(documents.says(said, answer) for (_, answer), said in zip(questions, spoken, strict=True))
        headed = sum(documents.speaks_a_heading(said) for said in spoken)
        unanswered = [
            f"{question} -> {said}"
            for (question, answer), said in zip(questions, spoken, strict=True)
            if not documents.says(said, answer)
        ]
        n = len(questions)
        print(
            f"quality, {title}: chunks {'+'.join(map(str, counts))}; answering chunk first for {top1}/{n} "
            f"({top1 / n:.0%}), in the top 3 for {top3}/{n} ({top3 / n:.0%}); embedded brain speaks the answer "
            f"for {answered}/{n} ({answered / n:.0%}), a title or heading for {headed}/{n}"
        )
        for line in unanswered:
            print(f"  not answered: {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paragraphs", type=int, default=300)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--cold-runs", type=int, default=5)
    args = parser.parse_args()

    handle = bench_database("kbench", ROOT / "var")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "voiceagent.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    from accounts.services import organization_create
    from agents.models import Agent

    settings.BACKGROUND_WORK = "inline"  # measure the ingestion itself, inside the upload's call
    try:
        call_command("migrate", verbosity=0)
        print(f"database: {connection.vendor}; cores: {os.cpu_count()}; model: all-MiniLM-L6-v2 (CPU)")
        organization, _ = organization_create(name="Bench", plan_code="agency")
        from django.utils import timezone

        agent = Agent.objects.create(organization=organization, name="Ingest", updated_at=timezone.now())
        from knowledge.embeddings import embed

        embed(["warm up the model"])
        bench_ingestion(organization, agent, args.paragraphs)

        bench_quality(organization)

        rng = np.random.default_rng(7)
        words = vocabulary(rng)
        big = Agent.objects.create(organization=organization, name="Search", updated_at=timezone.now())
        for size in (int(s) for s in args.sizes.split(",") if s.strip()):
            grow_to(organization, big, size, rng, words)
            bench_search(big, size, args.queries, args.cold_runs)
    finally:
        drop_bench_database(handle)


if __name__ == "__main__":
    main()
