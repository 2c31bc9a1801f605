"""Agent runtime logs for the engine: `agent_log(session, severity, message, **fields)`.

Lines are buffered in memory and written in batches (`bulk_create`) by one writer thread per
process (a loop of kit/background.py, in every BACKGROUND_WORK mode but `inline`), started lazily: every
AGENT_LOG_FLUSH_SECONDS, or at once when AGENT_LOG_BATCH_SIZE lines are waiting. `agent_log` only appends to the buffer, so it never blocks the event loop and never
raises. `flush_agent_logs()` writes what is buffered now (tests, end of a session). When the buffer
holds AGENT_LOG_MAX_BUFFER lines (the database is unreachable), the oldest are dropped and counted.
With AGENT_LOG_FLUSH_SECONDS = 0 (or BACKGROUND_WORK=inline) no writer thread runs and lines wait for `flush_agent_logs()`.
"""

from __future__ import annotations

import json
import logging
import secrets
import string
import threading
from collections import deque
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents.models import Agent
from calls.models import AgentLog, Severity
from calls.sequence import next_sequence
from kit import background
from kit.redaction import redact_for_agent

logger = logging.getLogger(__name__)

SESSION_ID_ALPHABET = string.ascii_lowercase + string.digits
SESSION_ID_LENGTH = 6
MAX_MESSAGE_CHARS = 4000
MAX_FIELDS_CHARS = 8000
_SEVERITY_ALIASES = {"warning": "warn", "critical": "error", "fatal": "error", "exception": "error"}


@dataclass(frozen=True)
class LogSession:
    organization_id: UUID
    agent_id: UUID
    session_id: str


def new_session_id() -> str:
    """Six lowercase letters and digits (36^6, about 2.2 billion values)."""
    return "".join(secrets.choice(SESSION_ID_ALPHABET) for _ in range(SESSION_ID_LENGTH))


@dataclass(frozen=True)
class _Entry:
    organization_id: UUID
    agent_id: UUID
    session_id: str
    timestamp: datetime
    severity: str
    content: dict[str, Any]
    sequence: int


class _Buffer:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: deque[_Entry] = deque()
        self.dropped = 0
        self.flush_lock = threading.Lock()  # one batch at a time, so rows land in order


_buffer = _Buffer()


def _content(message: Any, fields: dict[str, Any]) -> dict[str, Any]:
    text = message if isinstance(message, str) else str(message)
    content: dict[str, Any] = {}
    if fields:
        extra = json.loads(json.dumps(fields, default=str))
        if len(json.dumps(extra)) > MAX_FIELDS_CHARS:
            extra = {"truncated": True}
        content.update(extra)
    content["message"] = text[:MAX_MESSAGE_CHARS]  # always present, never overridden by a field
    return content


def agent_log(session: LogSession, severity: str, message: str, **fields: Any) -> None:
    """Buffer one log line of an agent session. Never raises, never touches the database itself."""
    try:
        level = _SEVERITY_ALIASES.get(str(severity).lower(), str(severity).lower())
        if level not in Severity.values:
            fields = {**fields, "severity": str(severity)[:20]}
            level = Severity.INFO
        entry = _Entry(
            organization_id=session.organization_id,
            agent_id=session.agent_id,
            session_id=str(session.session_id)[:SESSION_ID_LENGTH],
            timestamp=timezone.now(),
            severity=level,
            content=_content(message, fields),
            sequence=next_sequence(),
        )
        limit = max(1, int(getattr(settings, "AGENT_LOG_MAX_BUFFER", 10_000)))
        with _buffer.lock:
            _buffer.entries.append(entry)
            while len(_buffer.entries) > limit:
                _buffer.entries.popleft()
                _buffer.dropped += 1
            waiting = len(_buffer.entries)
        if _writer.start() and waiting >= int(settings.AGENT_LOG_BATCH_SIZE):
            _writer.wake()
    except Exception:  # a log line must never break a call
        logger.warning("agent_log failed", exc_info=True)


def flush_agent_logs() -> None:
    """Write every buffered line now. Safe from threads; from async code use sync_to_async."""
    with _buffer.flush_lock:
        with _buffer.lock:
            batch = list(_buffer.entries)
            _buffer.entries.clear()
            dropped, _buffer.dropped = _buffer.dropped, 0
        if dropped:
            logger.warning("agent log buffer was full: %d line(s) dropped", dropped)
        if batch:
            _write(batch)


def _write(batch: list[_Entry]) -> None:
    try:
        # Lines of agents deleted in the meantime are dropped instead of failing the whole batch.
        # An agent's redactPii applies to its lines (string values at any depth), here in the writer
        # thread, off the event loop.
        existing = {
            row["pk"]: row
            for row in Agent.objects.filter(pk__in={e.agent_id for e in batch}).values("pk", "redact_pii", "language")
        }
        rows = [
            AgentLog(
                organization_id=e.organization_id,
                agent_id=e.agent_id,
                session_id=e.session_id,
                timestamp=e.timestamp,
                severity=e.severity,
                content=redact_for_agent(existing[e.agent_id], e.content),
                sequence=e.sequence,
            )
            for e in batch
            if e.agent_id in existing
        ]
        with transaction.atomic():
            AgentLog.objects.bulk_create(rows, batch_size=500)
    except Exception:
        logger.warning("could not write %d agent log line(s)", len(batch), exc_info=True)


def stop_agent_log_writer() -> None:
    """Stop the writer thread (if any) and write what is buffered: for process shutdown and tests."""
    _writer.stop()
    flush_agent_logs()


# This process's own loop (kit/background.py): it runs whatever BACKGROUND_WORK says but `inline`.
_writer = background.Loop(
    "agent-log-writer",
    flush_agent_logs,
    every=lambda: float(settings.AGENT_LOG_FLUSH_SECONDS),
    own=True,
    first=False,
    failure="agent log writer failed",
    keep_connection=True,
)
