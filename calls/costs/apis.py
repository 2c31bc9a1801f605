"""The organization's price book: thin REST views (`/public/v1/pricing`, docs/costs.md)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from calls.costs import selectors, services
from calls.costs.pricing import CURRENCY, MAX_ITEMS, MAX_UNIT_PRICE, NAME, Book
from calls.models import CostProduct, CostUnit
from kit.api import PublicApiView
from kit.fields import iso

TAGS = ["Costs"]


class PriceSchema(serializers.Serializer):
    product = serializers.ChoiceField(choices=CostProduct.choices)
    provider = serializers.RegexField(
        NAME.pattern,
        trim_whitespace=False,
        help_text='The provider\'s name (twilio, openai, embedded, ...), or "*": any.',
    )
    model = serializers.RegexField(
        NAME.pattern,
        trim_whitespace=False,
        required=False,
        allow_null=True,
        help_text="A model, voice or telephony leg; null or absent: any.",
    )
    unit = serializers.ChoiceField(
        choices=CostUnit.choices,
        help_text="One of the product's units (docs/costs.md: telephony per second or minute...).",
    )
    unitPrice = serializers.FloatField(
        min_value=0, max_value=float(MAX_UNIT_PRICE), help_text="The price of one unit, in the book's currency."
    )


class PriceBookRequestSchema(serializers.Serializer):
    currency = serializers.RegexField(
        CURRENCY.pattern, trim_whitespace=False, help_text="ISO 4217, three capital letters (USD, EUR)."
    )
    items = serializers.ListField(
        child=PriceSchema(),
        max_length=MAX_ITEMS,
        help_text=f"At most {MAX_ITEMS} prices; one per product, provider, model and unit.",
    )
    effectiveFrom = serializers.DateTimeField(
        required=False,
        allow_null=True,
        help_text="When the book takes effect (now when absent or null; never in the past, at most 5 years ahead).",
    )


class PriceBookSchema(serializers.Serializer):
    currency = serializers.CharField()
    items = PriceSchema(many=True)
    effectiveFrom = serializers.DateTimeField(allow_null=True, help_text="null: the service's default book.")
    source = serializers.ChoiceField(  # type: ignore[assignment]  # a field named source, as in the answer
        choices=[("organization", "organization"), ("service", "service")],
        help_text="organization: your own book; service: the service's default (PRICE_BOOK).",
    )
    scheduled = serializers.DictField(
        allow_null=True, help_text="The next book of yours that is to take effect later, or null."
    )


def _book_item(book: Book) -> dict[str, Any]:
    return {
        "currency": book.currency,
        "items": book.items(),
        "effectiveFrom": iso(book.effective_from),
        "source": "service" if book.effective_from is None else "organization",
    }


def pricing_item(organization_id: Any) -> dict[str, Any]:
    scheduled = selectors.book_scheduled(organization_id=organization_id)
    return {
        **_book_item(selectors.book_in_force(organization_id=organization_id)),
        "scheduled": _book_item(scheduled) if scheduled is not None else None,
    }


class PricingApi(PublicApiView):
    @extend_schema(
        operation_id="getPricing",
        tags=TAGS,
        summary="Get the price book",
        description="The price book in force now (yours, or the service's default) and the next one you "
        "scheduled. Calls are priced by the book in force when they started.",
        responses={200: PriceBookSchema},
    )
    def get(self, request: Request) -> Response:
        return Response(pricing_item(self.organization.pk))

    @extend_schema(
        operation_id="putPricing",
        tags=TAGS,
        summary="Set the price book",
        request=PriceBookRequestSchema,
        responses={
            200: PriceBookSchema,
            400: OpenApiResponse(
                description="Invalid book (`issues` names the field: an unknown product or unit, a unit the product "
                "is not priced in, a negative price, a repeated price, an effectiveFrom in the past)"
            ),
            409: OpenApiResponse(description="20 books already wait to take effect"),
        },
        description="Replaces your price book from effectiveFrom (now by default): calls that start from then on "
        "are priced by it; calls that started before keep their amounts.",
    )
    def put(self, request: Request) -> Response:
        services.price_book_put(organization=self.organization, body=request.data)
        return Response(pricing_item(self.organization.pk))
