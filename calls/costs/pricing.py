"""The price book: what each product costs per unit (docs/costs.md).

A book is a currency and a list of prices `{product, provider, model?, unit, unitPrice}`; an organization
may keep its own (dated: `PriceBook`, GET/PUT /public/v1/pricing), the service's default comes from
PRICE_BOOK. This module holds the book's rules: which units a product is priced in, how a request body or
the setting is checked and normalized (`book_parse`), and which price applies to a measured quantity
(`Book.price_of`). Pure: no database.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from calls.models import CostProduct, CostUnit
from kit.errors import ApiError, validation_error

# The units each product may be priced in; the first is the one its quantity is measured in.
PRODUCT_UNITS: dict[str, tuple[str, ...]] = {
    CostProduct.TELEPHONY: (CostUnit.SECOND, CostUnit.MINUTE),
    CostProduct.ASR: (CostUnit.SECOND, CostUnit.MINUTE),
    CostProduct.TTS: (CostUnit.CHARACTER,),
    CostProduct.LLM: (CostUnit.INPUT_TOKEN, CostUnit.CACHED_INPUT_TOKEN, CostUnit.OUTPUT_TOKEN),
    CostProduct.SPEECH_TO_SPEECH: (
        CostUnit.INPUT_TOKEN,
        CostUnit.CACHED_INPUT_TOKEN,
        CostUnit.OUTPUT_TOKEN,
        CostUnit.AUDIO_INPUT_TOKEN,
        CostUnit.AUDIO_OUTPUT_TOKEN,
    ),
    CostProduct.ANALYSIS: (CostUnit.INPUT_TOKEN, CostUnit.CACHED_INPUT_TOKEN, CostUnit.OUTPUT_TOKEN),
    CostProduct.RECORDING_STORAGE: (CostUnit.GB_MONTH,),
}
# Units that measure the same thing: a quantity measured in seconds is priced per minute as seconds / 60.
SECONDS_PER_UNIT: dict[str, Decimal] = {CostUnit.SECOND: Decimal(1), CostUnit.MINUTE: Decimal(60)}
# A cached input token without a price of its own costs what an input token costs.
FALLBACK_UNIT: dict[str, str] = {CostUnit.CACHED_INPUT_TOKEN: CostUnit.INPUT_TOKEN}

ANY_PROVIDER = "*"
MAX_ITEMS = 200
MAX_UNIT_PRICE = Decimal(1_000_000)
PLACES = Decimal("0.000001")  # amounts and quantities keep 6 decimal places
PRICE_PLACES = Decimal("0.000000001")  # unit prices keep 9 (a token costs millionths of a dollar)
CURRENCY = re.compile(r"^[A-Z]{3}$")
NAME = re.compile(r"^[A-Za-z0-9*][A-Za-z0-9._:/@+*-]{0,127}$")
DEFAULT_CURRENCY = "USD"


@dataclass(frozen=True)
class Price:
    product: str
    provider: str  # a provider's name, or "*": any provider of the product
    model: str | None  # None: any model of the provider
    unit: str
    unit_price: Decimal

    def item(self) -> dict[str, Any]:
        return {
            "product": self.product,
            "provider": self.provider,
            "model": self.model,
            "unit": self.unit,
            "unitPrice": float(self.unit_price),
        }


@dataclass(frozen=True)
class Book:
    currency: str
    prices: tuple[Price, ...] = ()
    effective_from: datetime | None = None  # None: the service's default

    def price_of(self, *, product: str, provider: str, model: str | None, unit: str) -> Price | None:
        """The price of a quantity measured in `unit`: the most specific item of the product (its provider
        before "*", its model before any model), in that unit or one that measures the same thing (seconds
        and minutes), else a cached input token's fallback to the input token's price. None: not priced."""
        best: tuple[int, Price] | None = None
        for candidate_unit in (unit, FALLBACK_UNIT.get(unit)):
            for price in self.prices:
                if price.product != product or price.provider not in (provider, ANY_PROVIDER):
                    continue
                if price.model is not None and price.model != (model or None):
                    continue
                if price.unit != candidate_unit and not (
                    price.unit in SECONDS_PER_UNIT and candidate_unit in SECONDS_PER_UNIT
                ):
                    continue
                rank = (price.provider == provider) * 4 + (price.model is not None) * 2 + (price.unit == candidate_unit)
                if best is None or rank > best[0]:
                    best = (rank, price)
            if best is not None:
                return best[1]
        return None

    def items(self) -> list[dict[str, Any]]:
        return [price.item() for price in self.prices]


def _problem_of_name(value: Any, what: str, *, required: bool) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        return f"{what} must be a non-empty string"
    if not NAME.match(value):
        return f"{what} must be 1 to 128 letters, digits or . _ : / @ + * - (not {value[:40]!r})"
    return None


def _unit_price(value: Any) -> Decimal | str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "unitPrice must be a number"
    try:
        price = Decimal(str(value))
    except InvalidOperation:
        return "unitPrice must be a number"
    if not price.is_finite():
        return "unitPrice must be a finite number"
    if price < 0:
        return "unitPrice must not be negative"
    if price > MAX_UNIT_PRICE:
        return f"unitPrice must be at most {MAX_UNIT_PRICE}"
    return price.quantize(PRICE_PLACES)


def _item(index: int, value: Any, issues: dict[str, list[str]]) -> Price | None:
    where = f"items.{index}"
    if not isinstance(value, dict):
        issues[where] = ["must be an object {product, provider, model?, unit, unitPrice}"]
        return None
    product, unit = value.get("product"), value.get("unit")
    if not isinstance(product, str) or product not in PRODUCT_UNITS:
        issues[f"{where}.product"] = [f"must be one of {', '.join(PRODUCT_UNITS)} (not {str(product)[:40]!r})"]
    elif unit not in PRODUCT_UNITS[product]:
        issues[f"{where}.unit"] = [
            f"Not a unit of {product}, which is priced per {' or '.join(PRODUCT_UNITS[product])} (not {str(unit)[:40]!r})"
        ]
    for field, required in (("provider", True), ("model", False)):
        problem = _problem_of_name(value.get(field), field, required=required)
        if problem:
            issues[f"{where}.{field}"] = [problem]
    price = _unit_price(value.get("unitPrice"))
    if isinstance(price, str):
        issues[f"{where}.unitPrice"] = [price]
    if any(key.startswith(f"{where}.") or key == where for key in issues):
        return None
    assert isinstance(price, Decimal) and isinstance(product, str) and isinstance(unit, str)
    return Price(product=product, provider=value["provider"], model=value.get("model"), unit=unit, unit_price=price)


def book_parse(body: Any, *, effective_from: datetime | None = None) -> Book:
    """A price book from a request body or the PRICE_BOOK setting: `{currency, items}`, every problem a
    400 naming its field (`items.2.unitPrice`); two prices of one product, provider, model and unit are
    refused."""
    if not isinstance(body, dict):
        raise validation_error({"body": ["must be an object {currency, items, effectiveFrom?}"]})
    issues: dict[str, list[str]] = {}  # other fields are ignored, as everywhere in the API
    currency = body.get("currency")
    if not isinstance(currency, str) or not CURRENCY.match(currency):
        issues["currency"] = ["must be a three-letter ISO 4217 code in capitals, such as USD or EUR"]
    items = body.get("items")
    prices: list[Price] = []
    if not isinstance(items, list):
        issues["items"] = ["must be a list of prices"]
    elif len(items) > MAX_ITEMS:
        issues["items"] = [f"at most {MAX_ITEMS} prices"]
    else:
        seen: dict[tuple[str, str, str | None, str], int] = {}
        for index, value in enumerate(items):
            price = _item(index, value, issues)
            if price is None:
                continue
            key = (price.product, price.provider, price.model, price.unit)
            if key in seen:
                issues[f"items.{index}"] = [f"repeats items.{seen[key]} (the same product, provider, model and unit)"]
            seen.setdefault(key, index)
            prices.append(price)
    if issues:
        raise validation_error(issues)
    assert isinstance(currency, str)
    return Book(currency=currency, prices=tuple(prices), effective_from=effective_from)


def book_from_setting(value: str) -> Book:
    """The service's default book (PRICE_BOOK: the JSON of a book; empty: USD, nothing priced). A
    configuration error is a ValueError naming the problem."""
    if not value.strip():
        return Book(currency=DEFAULT_CURRENCY)
    try:
        return book_parse(json.loads(value))
    except json.JSONDecodeError as exc:
        raise ValueError(f"PRICE_BOOK is not JSON: {exc}") from None
    except ApiError as exc:
        raise ValueError(f"PRICE_BOOK: {exc.message}") from None
