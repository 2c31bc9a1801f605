"""Reads of the price books (docs/costs.md): the book in force at a moment, the next one scheduled."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.utils import timezone

from calls.costs.pricing import Book, book_from_setting, book_parse
from calls.models import PriceBook


@lru_cache(maxsize=4)
def _default(value: str) -> Book:
    return book_from_setting(value)


def default_book() -> Book:
    """The service's book (PRICE_BOOK), for organizations without their own."""
    return _default(settings.PRICE_BOOK)


def _book(row: PriceBook) -> Book:
    return book_parse({"currency": row.currency, "items": row.items}, effective_from=row.effective_from)


def book_in_force(*, organization_id: Any, at: datetime | None = None) -> Book:
    """The organization's book in force at `at` (now by default): its latest one taken effect by then,
    else the service's default."""
    at = at or timezone.now()
    row = PriceBook.objects.filter(organization_id=organization_id, effective_from__lte=at).first()
    return _book(row) if row is not None else default_book()


def book_scheduled(*, organization_id: Any) -> Book | None:
    """The organization's next book, when one is to take effect later."""
    row = (
        PriceBook.objects.filter(organization_id=organization_id, effective_from__gt=timezone.now())
        .order_by("effective_from", "created_at")
        .first()
    )
    return _book(row) if row is not None else None


def currency_for(*, organization_id: Any) -> str:
    """The currency the organization is priced in today."""
    return book_in_force(organization_id=organization_id).currency
