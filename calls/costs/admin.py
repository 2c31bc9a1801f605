"""Dashboard pages of price books (docs/costs.md): each organization's books, newest first, and a form
that adds one as PUT /public/v1/pricing does (the same service: its rules, its refusals on the form). A
book is never edited once saved (calls priced by it keep their amounts); one still waiting to take
effect may be deleted."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html_join
from django.utils.safestring import SafeString

from agents.dashboard import ServiceModelForm
from calls.costs import services
from calls.models import PriceBook
from kit.fields import iso

EXAMPLE_ITEMS = [
    {"product": "telephony", "provider": "twilio", "unit": "minute", "unitPrice": 0.0085},
    {"product": "llm", "provider": "openai", "model": "gpt-4o-mini", "unit": "input_token", "unitPrice": 1.5e-7},
]


class PriceBookAddForm(ServiceModelForm):
    items = forms.JSONField(
        initial=EXAMPLE_ITEMS,
        widget=forms.Textarea(attrs={"rows": 14, "cols": 100}),
        help_text="The prices, as PUT /public/v1/pricing takes them: [{product, provider, model?, unit, unitPrice}].",
    )
    effective_from = forms.DateTimeField(
        required=False, help_text="When it takes effect (empty: now). Never in the past."
    )
    issue_fields = {"currency": "currency", "items": "items", "effectiveFrom": "effective_from"}

    class Meta:
        model = PriceBook
        fields = ("organization", "currency", "items", "effective_from")

    def save_through_service(self) -> PriceBook:
        data = self.cleaned_data
        body: dict[str, Any] = {"currency": data.get("currency"), "items": data.get("items")}
        if data.get("effective_from"):
            body["effectiveFrom"] = iso(data["effective_from"])
        return services.price_book_put(organization=data["organization"], body=body)


@admin.register(PriceBook)
class PriceBookAdmin(admin.ModelAdmin):
    list_display = ("organization", "currency", "effective_from", "price_count", "created_at")
    list_filter = ("currency",)
    search_fields = ("organization__name",)
    list_select_related = ("organization",)
    autocomplete_fields = ("organization",)
    ordering = ("organization__name", "-effective_from")
    readonly_fields = ("organization", "currency", "effective_from", "created_at", "prices")
    fields = readonly_fields

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        if obj is None:
            kwargs["form"] = PriceBookAddForm
            kwargs["fields"] = PriceBookAddForm.Meta.fields
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return PriceBookAddForm.Meta.fields if obj is None else self.fields

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return () if obj is None else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        pass  # saved by the form's service call

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False if obj is not None and request.method == "POST" else super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and obj.effective_from <= timezone.now():
            return False  # in force or past: calls were priced by it
        return super().has_delete_permission(request, obj)

    @admin.display(description="prices")
    def price_count(self, obj: PriceBook) -> int:
        return len(obj.items or [])

    @admin.display(description="prices")
    def prices(self, obj: PriceBook) -> SafeString:
        rows = [
            (item["product"], item["provider"], item.get("model") or "any", item["unit"], json.dumps(item["unitPrice"]))
            for item in obj.items or []
        ]
        header = SafeString("<tr><th>product</th><th>provider</th><th>model</th><th>unit</th><th>unit price</th></tr>")
        body = format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", rows)
        return SafeString(f"<table>{header}{body}</table>")
