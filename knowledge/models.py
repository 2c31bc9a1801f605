"""Knowledge documents of an agent, their chunks (text + embedding) and a per-agent index version.

The database is the source of truth for chunks and vectors; search keeps a per-process NumPy copy and
checks it against `AgentKnowledgeIndex.version` before each use (see knowledge/search.py).
"""

import uuid

from django.db import models

from accounts.models import Organization
from agents.models import Agent


class DocumentType(models.TextChoices):
    MARKDOWN = "markdown"
    TEXT = "text"
    PDF = "pdf"


class DocumentStatus(models.TextChoices):
    PROCESSING = "processing"
    READY = "ready"
    FAILED = "failed"


class KnowledgeDocument(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="knowledge_documents")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="knowledge_documents")
    name = models.CharField(max_length=200)
    description = models.TextField(null=True, blank=True)
    type = models.CharField(max_length=10, choices=DocumentType.choices)
    size_bytes = models.BigIntegerField(help_text="Size of the original upload in bytes.")
    status = models.CharField(max_length=12, choices=DocumentStatus.choices, default=DocumentStatus.PROCESSING)
    error = models.TextField(null=True, blank=True)
    chunk_count = models.PositiveIntegerField(default=0)
    # Extracted text, one string per PDF page (a single string for text and Markdown); ingestion
    # chunks it, and keeping it allows re-ingestion when chunking or the model changes.
    pages = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Written by the process ingesting (or queueing) the document (kit/liveness.py).
    heartbeat_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        db_table = "knowledge_document"
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["agent", "created_at"], name="knowledge_doc_agent_created")]

    def __str__(self) -> str:
        return self.name


class KnowledgeChunk(models.Model):
    id = models.BigAutoField(primary_key=True)
    document = models.ForeignKey(KnowledgeDocument, on_delete=models.CASCADE, related_name="chunks")
    # Denormalized from the document so that search loads one agent's vectors with one index range.
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    position = models.PositiveIntegerField()
    text = models.TextField()
    heading_path = models.JSONField(default=list, blank=True)
    page = models.PositiveIntegerField(null=True, blank=True)
    token_count = models.PositiveIntegerField()
    # float32 little-endian, L2-normalized, 384 values (all-MiniLM-L6-v2).
    embedding = models.BinaryField()

    class Meta:
        db_table = "knowledge_chunk"
        ordering = ["document", "position"]
        indexes = [models.Index(fields=["agent", "id"], name="knowledge_chunk_agent_id")]

    def __str__(self) -> str:
        return f"{self.document_id} #{self.position}"


class AgentKnowledgeIndex(models.Model):
    """A token that changes in the same transaction as any change of the agent's chunks: every process
    compares it with the version of its cached vectors before searching."""

    agent = models.OneToOneField(Agent, on_delete=models.CASCADE, primary_key=True, related_name="+")
    version = models.UUIDField(default=uuid.uuid4)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "knowledge_agent_index"
        verbose_name_plural = "agent knowledge indexes"

    def __str__(self) -> str:
        return f"{self.agent_id} @ {self.version}"
