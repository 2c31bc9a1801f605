"""A call's cost ledger: measured quantities priced by a book (docs/costs.md).

A quantity is what a call used of one product from one provider and model, in the unit it is measured in
(telephony and recognition in seconds, a voice in characters, models in tokens, a recording in
gigabyte-months). `ledger_lines` prices them: one line per product, provider, model and unit, each
`{product, provider, model, quantity, unit, unitPrice, amount}`, in the unit of the price that applies (a
price per minute turns seconds into minutes); a quantity nobody priced costs 0. Pure: no database.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from calls.costs.pricing import PLACES, PRODUCT_UNITS, SECONDS_PER_UNIT, Book
from calls.models import CostProduct, CostUnit

PRODUCT_ORDER = list(PRODUCT_UNITS)
UNIT_ORDER = list(CostUnit.values)


@dataclass(frozen=True)
class Quantity:
    product: str
    provider: str
    model: str | None
    unit: str
    quantity: Decimal

    @property
    def key(self) -> tuple[str, str, str | None, str]:
        return (self.product, self.provider, self.model, self.unit)


def quantity(product: str, provider: str, model: str | None, unit: str, amount: Any) -> Quantity:
    """A measured quantity; a product or unit it cannot be measured in is a programming error."""
    if unit not in PRODUCT_UNITS.get(product, ()):
        raise ValueError(f"{product} is not measured in {unit}")
    return Quantity(product, provider or "unknown", model or None, unit, Decimal(str(amount)))


def combined(quantities: Iterable[Quantity]) -> list[Quantity]:
    """One quantity per product, provider, model and unit, in the ledger's order; zeros left out."""
    sums: dict[tuple[str, str, str | None, str], Decimal] = {}
    for each in quantities:
        sums[each.key] = sums.get(each.key, Decimal(0)) + each.quantity
    kept = [Quantity(*key, quantity=value) for key, value in sums.items() if value > 0]
    return sorted(
        kept, key=lambda q: (PRODUCT_ORDER.index(q.product), q.provider, q.model or "", UNIT_ORDER.index(q.unit))
    )


def _places(value: Decimal) -> Decimal:
    return value.quantize(PLACES, rounding=ROUND_HALF_UP)


def line(book: Book, measured: Quantity) -> dict[str, Any]:
    price = book.price_of(
        product=measured.product, provider=measured.provider, model=measured.model, unit=measured.unit
    )
    unit, amount_of = measured.unit, measured.quantity
    unit_price = Decimal(0)
    if price is not None:
        unit_price = price.unit_price
        if price.unit in SECONDS_PER_UNIT and measured.unit in SECONDS_PER_UNIT:
            amount_of = measured.quantity * SECONDS_PER_UNIT[measured.unit] / SECONDS_PER_UNIT[price.unit]
            unit = price.unit
    return {
        "product": measured.product,
        "provider": measured.provider,
        "model": measured.model,
        "quantity": float(_places(amount_of)),
        "unit": unit,
        "unitPrice": float(unit_price),
        "amount": float(_places(amount_of * unit_price)),
    }


def ledger_lines(book: Book, quantities: Iterable[Quantity]) -> list[dict[str, Any]]:
    return [line(book, each) for each in combined(quantities)]


def ledger_total(lines: Iterable[dict[str, Any]]) -> Decimal:
    return _places(sum((Decimal(str(each["amount"])) for each in lines), Decimal(0)))


def quantities_of_lines(lines: Iterable[dict[str, Any]]) -> list[Quantity]:
    """The measured quantities back from stored lines (a line priced per minute holds minutes), so that a
    later quantity of the same kind (a second analysis) joins its line."""
    found = []
    for each in lines:
        unit, amount = each["unit"], Decimal(str(each["quantity"]))
        if unit == CostUnit.MINUTE:
            unit, amount = CostUnit.SECOND, amount * SECONDS_PER_UNIT[CostUnit.MINUTE]
        found.append(Quantity(each["product"], each["provider"], each.get("model"), unit, amount))
    return found


def token_quantities(
    product: str,
    provider: str,
    model: str | None,
    *,
    input_tokens: int,
    output_tokens: int,
    cached_input_tokens: int = 0,
    input_audio_tokens: int = 0,
    output_audio_tokens: int = 0,
) -> list[Quantity]:
    """A model's reported tokens as quantities: input (text, not cached), cached input, output (text), and
    for a speech-to-speech provider its audio tokens apart. A figure a provider did not report is 0."""
    audio = product == CostProduct.SPEECH_TO_SPEECH
    audio_in = input_audio_tokens if audio else 0
    audio_out = output_audio_tokens if audio else 0
    cached = min(cached_input_tokens, max(0, input_tokens - audio_in))
    figures = {
        CostUnit.INPUT_TOKEN: max(0, input_tokens - audio_in - cached),
        CostUnit.CACHED_INPUT_TOKEN: cached,
        CostUnit.OUTPUT_TOKEN: max(0, output_tokens - audio_out),
        CostUnit.AUDIO_INPUT_TOKEN: audio_in,
        CostUnit.AUDIO_OUTPUT_TOKEN: audio_out,
    }
    return [quantity(product, provider, model, unit, value) for unit, value in figures.items() if value > 0]
