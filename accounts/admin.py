"""Dashboard: organizations, plans and API keys (a key is shown once, when it is created)."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest

from accounts.models import ApiKey, Organization, Plan
from accounts.services import (
    apikey_create,
    apikey_revoke,
    organization_create,
    organization_outbound_countries_set,
    organization_set_plan,
    outbound_countries_clean,
)
from kit.errors import ApiError


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    list_display = (
        "code",
        "name",
        "max_active_agents",
        "ambient_sounds_allowed",
        "included_minutes",
        "api_requests_per_second",
        "api_burst",
        "max_concurrent_calls",
    )
    list_editable = ("included_minutes", "api_requests_per_second", "api_burst", "max_concurrent_calls")
    search_fields = ("code", "name")
    list_filter = ("ambient_sounds_allowed",)

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        kwargs["labels"] = {"api_requests_per_second": "API requests per second", "api_burst": "API burst"}
        return super().get_form(request, obj, change=change, **kwargs)


class ApiKeyInline(admin.TabularInline):
    model = ApiKey
    fields = ("prefix", "name", "created_at", "last_used_at", "revoked_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # keys are created from the API key page, which shows the key once


def _show_new_key(model_admin: admin.ModelAdmin, request: HttpRequest, raw_key: str) -> None:
    model_admin.message_user(request, f"New API key (shown only now, copy it): {raw_key}", level=messages.WARNING)


class OrganizationForm(forms.ModelForm):
    """The destination countries as a line of codes ("US, CA"); empty for the countries of the numbers."""

    outbound_countries = forms.CharField(
        required=False,
        label="Outbound countries",
        help_text="Countries outbound calls may go to, as ISO codes separated by commas or spaces (US, CA, GB). "
        "Empty: the countries of the organization's claimed phone numbers.",
    )

    class Meta:
        model = Organization
        fields = ("name", "plan", "billing_period_start", "outbound_countries")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "outbound_countries" in self.fields:
            self.initial["outbound_countries"] = ", ".join(self.instance.outbound_countries or [])

    def clean_outbound_countries(self) -> list[str] | None:
        codes = [code for code in re.split(r"[\s,;]+", self.cleaned_data.get("outbound_countries") or "") if code]
        try:
            return outbound_countries_clean(codes or None, field="outbound_countries")
        except ApiError as error:
            raise forms.ValidationError(next(iter((error.issues or {}).values()), [error.message])[0]) from None


@admin.register(Organization)
class OrganizationAdmin(admin.ModelAdmin):
    list_display = ("name", "id", "plan", "on_trial", "active_agents", "billing_period_start", "created_at")
    list_filter = ("plan", "on_trial")
    search_fields = ("name", "id")
    # on_trial follows the plan (accounts.services.organization_set_plan); a new organization gets an API key.
    # The calls app adds its usage chart to this page (calls/admin.py): calls depend on accounts.
    readonly_fields: ClassVar[tuple[str, ...]] = ("id", "on_trial", "created_at")
    add_fields = ("name", "plan")
    form = OrganizationForm
    inlines = [ApiKeyInline]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.add_fields if obj is None else super().get_fields(request, obj)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return () if obj is None else self.readonly_fields

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return (
            super()
            .get_queryset(request)
            .select_related("plan")
            .annotate(active_agent_count=Count("agents", filter=Q(agents__status="active")))
        )

    @admin.display(description="Active agents", ordering="active_agent_count")
    def active_agents(self, obj: Organization) -> int:
        return obj.active_agent_count  # type: ignore[attr-defined]  # annotated by get_queryset

    def save_model(self, request: HttpRequest, obj: Organization, form: Any, change: bool) -> None:
        if not change:
            organization, issued = organization_create(name=obj.name, plan_code=obj.plan.code)
            obj.pk = organization.pk
            obj.refresh_from_db()
            _show_new_key(self, request, issued.raw_key)
            return
        super().save_model(request, obj, form, change)
        if "plan" in form.changed_data:
            organization_set_plan(organization=obj, plan_code=obj.plan.code)  # the one rule for on_trial
        if "outbound_countries" in form.changed_data:
            organization_outbound_countries_set(organization=obj, countries=obj.outbound_countries)


class ApiKeyCreateForm(forms.ModelForm):
    class Meta:
        model = ApiKey
        fields = ("organization", "name")


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("prefix", "name", "organization", "created_at", "last_used_at", "revoked_at")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter), "organization__plan")
    search_fields = ("prefix", "name", "organization__name", "organization__id")
    readonly_fields = ("id", "prefix", "organization", "created_at", "last_used_at", "revoked_at")
    fields = ("id", "organization", "name", "prefix", "created_at", "last_used_at", "revoked_at")
    actions = ["revoke"]
    list_select_related = ("organization",)
    autocomplete_fields = ("organization",)

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        if obj is None:
            kwargs["form"] = ApiKeyCreateForm
            kwargs["fields"] = ("organization", "name")
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ("organization", "name") if obj is None else self.fields

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return () if obj is None else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        issued = apikey_create(organization=obj.organization, name=obj.name)
        obj.pk = issued.api_key.pk
        obj.refresh_from_db()
        _show_new_key(self, request, issued.raw_key)

    @admin.action(description="Revoke selected keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet) -> None:
        for key in queryset:
            apikey_revoke(api_key=key)
        self.message_user(request, f"Revoked {queryset.count()} key(s).")
