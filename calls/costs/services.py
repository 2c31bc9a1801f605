"""Writes of costs (docs/costs.md): an organization's price book, and a call's ledger.

The ledger is written when the call ends (`call_costs_write`, inside calls.services' finishing
transaction) from what was measured; the analysis and the stored recording add their lines later
(`call_costs_add`). Either way the amounts come from the book in force when the call started, so a later
price change never rewrites a call's amounts; the caller checks the call's budgets in the same transaction, once the call is saved
(calls.budgets.services.budget_thresholds_record: its events carry the call as it now is).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from accounts.models import Organization
from calls.costs.ledger import Quantity, ledger_lines, ledger_total, quantities_of_lines, quantity, token_quantities
from calls.costs.pricing import book_parse
from calls.costs.selectors import book_in_force
from calls.models import Call, CallChannel, CostProduct, CostUnit, LlmUsage, PriceBook
from kit.errors import ApiError

# A book may say it took effect this long ago (the client's clock); earlier is refused: calls already
# ended keep their amounts, and a book must not claim to price calls that were priced by another.
CLOCK_SKEW = timedelta(minutes=5)
MAX_SCHEDULED_BOOKS = 20
MAX_SCHEDULE_AHEAD = timedelta(days=5 * 366)
BYTES_PER_GB = Decimal(1_000_000_000)
DAYS_PER_MONTH = Decimal(30)


def _effective_from(value: Any) -> datetime:
    now = timezone.now()
    if value is None:
        return now
    try:
        parsed = parse_datetime(value) if isinstance(value, str) else None
        parsed = parsed.astimezone(UTC) if parsed is not None and parsed.tzinfo is not None else None
    except (ValueError, OverflowError):
        parsed = None
    if parsed is None:
        raise ApiError.field("effectiveFrom", "must be an ISO 8601 date and time with its offset")
    if parsed > now + MAX_SCHEDULE_AHEAD:
        raise ApiError.field("effectiveFrom", "must be within 5 years from now")
    if parsed < now - CLOCK_SKEW:
        raise ApiError.field(
            "effectiveFrom", "must not be in the past: calls already priced keep their amounts (omit it: from now)"
        )
    return max(parsed, now)


def price_book_put(*, organization: Organization, body: Any) -> PriceBook:
    """A new book for the organization from `effectiveFrom` (now when omitted; a book scheduled for the
    same moment is replaced). Calls that started before it keep the book they started under."""
    book = book_parse(body)
    effective_from = _effective_from(body.get("effectiveFrom"))
    with transaction.atomic():
        Organization.objects.select_for_update().filter(pk=organization.pk).first()
        scheduled = PriceBook.objects.filter(organization=organization, effective_from__gt=timezone.now())
        scheduled.filter(effective_from=effective_from).delete()
        if scheduled.count() >= MAX_SCHEDULED_BOOKS:
            raise ApiError.conflict(f"At most {MAX_SCHEDULED_BOOKS} price books may wait to take effect.")
        return PriceBook.objects.create(
            organization=organization,
            currency=book.currency,
            items=book.items(),
            effective_from=effective_from,
            created_at=timezone.now(),
        )


def _model_quantities(call_id: Any) -> list[Quantity]:
    """What the call's models reported (one row per model turn: calls.services.call_llm_usage_add)."""
    rows = (
        LlmUsage.objects.filter(call_id=call_id)
        .values("product", "provider", "model")
        .annotate(
            input=Sum("input_tokens"),
            output=Sum("output_tokens"),
            cached=Sum("cached_input_tokens"),
            audio_in=Sum("input_audio_tokens"),
            audio_out=Sum("output_audio_tokens"),
        )
        .order_by()
    )
    found: list[Quantity] = []
    for row in rows:
        found += token_quantities(
            row["product"],
            row["provider"],
            row["model"],
            input_tokens=row["input"] or 0,
            output_tokens=row["output"] or 0,
            cached_input_tokens=row["cached"] or 0,
            input_audio_tokens=row["audio_in"] or 0,
            output_audio_tokens=row["audio_out"] or 0,
        )
    return found


def _telephony(row: Call) -> list[Quantity]:
    """The caller's leg of a phone call, its seconds on the line (inbound or outbound: the model)."""
    if row.channel != CallChannel.PHONE or not row.carrier or row.duration_seconds <= 0:
        return []
    return [quantity(CostProduct.TELEPHONY, row.carrier, row.direction, CostUnit.SECOND, row.duration_seconds)]


def measured_quantities(measured: Iterable[dict[str, Any]]) -> list[Quantity]:
    """The session's measurements (`{product, provider, model, unit, quantity}`: recognized seconds,
    synthesized characters, a transfer leg's seconds)."""
    return [
        quantity(each["product"], each["provider"], each.get("model"), each["unit"], each["quantity"])
        for each in measured
    ]


def _price(row: Call, quantities: list[Quantity]) -> list[str]:
    book = book_in_force(organization_id=row.organization_id, at=row.started_at)
    row.costs = ledger_lines(book, quantities)
    row.cost_total = ledger_total(row.costs)
    row.cost_currency = book.currency
    return ["costs", "cost_total", "cost_currency"]


def call_costs_write(*, row: Call, measured: Iterable[dict[str, Any]] = ()) -> list[str]:
    """Inside the transaction that ends the call (`row`, locked, its duration set): its ledger from the
    carrier's seconds, what the session measured and what its models reported. Returns the fields set."""
    return _price(row, _telephony(row) + measured_quantities(measured) + _model_quantities(row.pk))


def call_costs_add(*, row: Call, quantities: list[Quantity]) -> list[str]:
    """Inside a transaction holding the ended call's row: more lines (its analysis, its recording), priced
    by the book the call started under; the total grows with them. Returns the fields to save."""
    if row.cost_total is None or not quantities:
        return []
    return _price(row, quantities_of_lines(row.costs) + quantities)


def analysis_quantities(*, model: Any, usage: Any) -> list[Quantity]:
    """The post-call analysis' tokens (its result's `usage`: inputTokens, outputTokens, cachedInputTokens)."""
    if not isinstance(usage, dict) or not model:
        return []
    return token_quantities(
        CostProduct.ANALYSIS,
        settings.LLM_PROVIDER,
        str(model),
        input_tokens=int(usage.get("inputTokens") or 0),
        output_tokens=int(usage.get("outputTokens") or 0),
        cached_input_tokens=int(usage.get("cachedInputTokens") or 0),
    )


def recording_quantities(*, size_bytes: int) -> list[Quantity]:
    """A stored recording: its gigabytes for the months it is kept (RECORDING_RETENTION_DAYS / 30; one
    month when recordings are kept without limit)."""
    if size_bytes <= 0:
        return []
    days = settings.RECORDING_RETENTION_DAYS or int(DAYS_PER_MONTH)
    provider = "s3" if settings.RECORDINGS_STORAGE_URL.startswith("s3:") else "local"
    gb_months = Decimal(size_bytes) / BYTES_PER_GB * Decimal(days) / DAYS_PER_MONTH
    return [quantity(CostProduct.RECORDING_STORAGE, provider, None, CostUnit.GB_MONTH, gb_months)]
