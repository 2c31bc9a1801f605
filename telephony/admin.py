"""Dashboard: telephony accounts (credentials write-only) and phone numbers, with the action that
points numbers at this service through the provider's API."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from telephony import services
from telephony.models import PhoneNumber, SetupStatus, TelephonyAccount
from voiceagent.errors import ApiError

_FIELD_NAMES = {"accountSid": "account_sid", "authToken": "auth_token", "apiKeySid": "api_key_sid"}
_FIELD_NAMES |= {"apiKeySecret": "api_key_secret", "provider": "provider"}


class TelephonyAccountForm(forms.ModelForm):
    """Secrets are write-only: never rendered back; left blank on an edit, the stored ones are kept."""

    auth_token = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Twilio Auth Token (encrypted, never shown again). Leave blank to keep the stored one.",
    )
    api_key_secret = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Optional: the API key's secret (encrypted, never shown again). Leave blank to keep it.",
    )

    class Meta:
        model = TelephonyAccount
        fields = ("organization", "provider", "account_sid", "api_key_sid")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        organization = data.get("organization") or getattr(self.instance, "organization", None)
        if organization is None or self.errors:
            return data
        try:
            services.telephony_account_clean(
                organization=organization,
                provider=data.get("provider") or "",
                account_sid=(data.get("account_sid") or "").strip(),
                auth_token=data.get("auth_token") or None,
                api_key_sid=(data.get("api_key_sid") or "").strip(),
                api_key_secret=data.get("api_key_secret") or None,
            )
        except ApiError as error:
            field = next(iter(error.issues or {}), None)
            if field in _FIELD_NAMES:
                self.add_error(_FIELD_NAMES[field], error.issues[field][0])
            else:
                raise forms.ValidationError(error.message) from None
        return data


@admin.register(TelephonyAccount)
class TelephonyAccountAdmin(admin.ModelAdmin):
    form = TelephonyAccountForm
    list_display = ("organization", "provider", "account_sid", "api_key_sid", "updated_at")
    list_filter = ("provider",)
    search_fields = ("organization__name", "organization__id", "account_sid")
    list_select_related = ("organization",)
    raw_id_fields = ("organization",)
    readonly_fields = ("created_at", "updated_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet[TelephonyAccount]:
        return super().get_queryset(request).defer("auth_token", "api_key_secret")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        # One account per organization: an existing account stays with its organization.
        return (*self.readonly_fields, "organization") if obj is not None else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: TelephonyAccount, form: TelephonyAccountForm, change: bool) -> None:
        data = form.cleaned_data
        account = services.telephony_account_set(
            organization=obj.organization if change else data["organization"],
            provider=data["provider"],
            account_sid=data["account_sid"].strip(),
            auth_token=data.get("auth_token") or None,
            api_key_sid=(data.get("api_key_sid") or "").strip(),
            api_key_secret=data.get("api_key_secret") or None,
        )
        obj.pk, obj.created_at, obj.updated_at = account.pk, account.created_at, account.updated_at


@admin.register(PhoneNumber)
class PhoneNumberAdmin(admin.ModelAdmin):
    list_display = (
        "phone_number",
        "friendly_name",
        "organization",
        "status",
        "assigned_agent",
        "setup_status",
        "country_code",
    )
    list_filter = ("status", "source", "provider", "setup_status", "country_code")
    search_fields = ("phone_number", "friendly_name", "organization__name", "assigned_agent__name")
    readonly_fields = ("id", "created_at", "assigned_at", "setup_error")
    list_select_related = ("organization", "assigned_agent")
    raw_id_fields = ("organization", "assigned_agent")
    actions = ("point_at_this_service",)

    @admin.action(description="Point at this service (set the numbers' voice webhook at the provider)")
    def point_at_this_service(self, request: HttpRequest, queryset: QuerySet[PhoneNumber]) -> None:
        for number in PhoneNumber.objects.filter(pk__in=queryset.values("pk")).order_by("phone_number"):
            services.phone_number_point(number=number)
            if number.setup_status == SetupStatus.READY:
                self.message_user(request, f"{number.phone_number}: ready (calls reach this service)", messages.SUCCESS)
            else:
                self.message_user(request, f"{number.phone_number}: error: {number.setup_error}", messages.ERROR)
