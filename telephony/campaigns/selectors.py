"""Reads of call batches. Every query is scoped to the caller's organization."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, OuterRef, Subquery, UUIDField

from accounts.models import Organization
from calls.models import Call
from calls.selectors import CALL_SUMMARY_COLUMNS
from kit.db import row_get
from telephony.models import CallBatch, CallBatchRecipient, OutboundCall

COUNT_KEYS = ("pending", "calling", "completed", "voicemail", "noAnswer", "busy", "failed", "canceled")
# Outcomes as stored, and their key in `counts` (camelCase like every field of the API).
OUTCOME_KEYS = {
    "completed": "completed",
    "voicemail": "voicemail",
    "no-answer": "noAnswer",
    "busy": "busy",
    "failed": "failed",
    "canceled": "canceled",
}


def counts_item(rows: list[dict[str, Any]]) -> dict[str, int]:
    """`counts` from (state, outcome, n) rows of one batch's recipients."""
    counts = dict.fromkeys(("total", "done", *COUNT_KEYS), 0)
    for row in rows:
        counts["total"] += row["n"]
        if row["state"] == "done":
            counts["done"] += row["n"]
            counts[OUTCOME_KEYS[row["outcome"]]] += row["n"]
        else:
            counts[row["state"]] += row["n"]
    return counts


def batch_get(*, organization: Organization, batch_id: str) -> CallBatch:
    return row_get(
        CallBatch.objects.filter(organization=organization),
        batch_id,
        what="callBatch",
        missing="Call batch not found",
        code="CALL_BATCH_NOT_FOUND",
    )


def batch_counts(*, batch_ids: list[Any]) -> dict[Any, dict[str, int]]:
    """Per batch: its recipients by state and outcome (one query for all)."""
    rows = (
        CallBatchRecipient.objects.filter(batch_id__in=batch_ids)
        .order_by()
        .values("batch_id", "state", "outcome")
        .annotate(n=Count("pk"))
    )
    grouped: dict[Any, list[dict[str, Any]]] = {pk: [] for pk in batch_ids}
    for row in rows:
        grouped[row["batch_id"]].append(row)
    return {pk: counts_item(items) for pk, items in grouped.items()}


def batch_page(
    *, organization: Organization, limit: int, offset: int, status: str | None = None
) -> list[tuple[CallBatch, dict[str, int]]]:
    """Newest first, with their counts."""
    batches = CallBatch.objects.filter(organization=organization)
    if status:
        batches = batches.filter(status=status)
    page = list(batches.order_by("-created_at", "-id")[offset : offset + limit])
    counts = batch_counts(batch_ids=[b.pk for b in page])
    return [(batch, counts[batch.pk]) for batch in page]


def batch_calls(*, batch: CallBatch, limit: int, offset: int) -> list[dict[str, Any]]:
    """The batch's calls (every attempt), newest first, as calls.selectors' summary rows."""
    calls = Call.objects.filter(outbound__recipient__batch=batch).order_by("-started_at", "-id")
    return list(calls.values(*CALL_SUMMARY_COLUMNS)[offset : offset + limit])


def batch_recipients(
    *, batch: CallBatch, limit: int, offset: int, state: str | None = None, outcome: str | None = None
) -> list[CallBatchRecipient]:
    """In list order, each with `last_call_id` (its latest attempt's call, or None)."""
    latest = OutboundCall.objects.filter(recipient=OuterRef("pk")).order_by("-attempt").values("call_id")[:1]
    rows = CallBatchRecipient.objects.filter(batch=batch).annotate(
        last_call_id=Subquery(latest, output_field=UUIDField())
    )
    if state:
        rows = rows.filter(state=state)
    if outcome:
        rows = rows.filter(outcome=outcome)
    return list(rows.order_by("position")[offset : offset + limit])
