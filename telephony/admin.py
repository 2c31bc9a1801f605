"""Dashboard: telephony accounts (credentials write-only) and phone numbers, with the action that
points numbers at this service through the provider's API. Numbers are claimed and assigned through
telephony.services, so the dashboard refuses what the API refuses (E.164 numbers, claimed numbers only,
an agent of the number's organization, at most 25 numbers per agent).

The agent page is registered here, the highest app it needs (AgentPageAdmin): the agents app's page
(agents/admin.py) with the agent's phone numbers, knowledge documents and latest calls, the pages that
assign and unassign its numbers."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import path
from django.views.decorators.http import require_POST

from agents.admin import AgentAdmin
from agents.dashboard import through_service
from agents.models import Agent
from calls.selectors import call_list
from kit.admin_forms import PhoneNumberFormField, add_api_error, check_with_service
from kit.errors import ApiError
from kit.fields import parse
from knowledge.selectors import document_list
from realtime.widget.selectors import widget_key_list
from telephony.models import PhoneNumber, PhoneNumberStatus, SetupStatus, TelephonyAccount
from telephony.selectors import agent_phone_numbers
from telephony.serializers import AssignRequestSerializer
from telephony.services.accounts import phone_number_point, telephony_account_clean, telephony_account_set
from telephony.services.numbers import phone_number_assign, phone_number_claim, phone_number_unassign

_FIELD_NAMES = {"accountSid": "account_sid", "authToken": "auth_token", "apiKeySid": "api_key_sid"}
_FIELD_NAMES |= {"apiKeySecret": "api_key_secret", "provider": "provider", "apiBaseUrl": "api_base_url"}
_FIELD_NAMES |= {"webhookPublicKey": "webhook_public_key", "allowedNetworks": "allowed_networks"}
_FIELD_NAMES |= {"sipUsername": "sip_username"}


class TelephonyAccountForm(forms.ModelForm):
    """Secrets are write-only: never rendered back; left blank on an edit, the stored ones are kept."""

    auth_token = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Twilio Auth Token, Telnyx API key, or SIP digest password (encrypted, never shown again). Leave"
        " blank to keep the stored one.",
    )
    allowed_networks = forms.CharField(
        required=False,
        label="Allowed networks",
        help_text="Only for SIP: the networks (CIDR, comma-separated) the trunk's or PBX's calls come from.",
    )
    api_key_secret = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Optional: the API key's secret (encrypted, never shown again). Leave blank to keep it.",
    )

    class Meta:
        model = TelephonyAccount
        fields = (
            "organization",
            "provider",
            "account_sid",
            "api_key_sid",
            "api_base_url",
            "webhook_public_key",
            "sip_username",
        )
        labels = {
            "account_sid": "Account SID / connection ID",
            "api_key_sid": "API key SID",
            "api_base_url": "API base URL",
            "webhook_public_key": "Webhook public key",
        }
        help_texts = {
            "account_sid": "Twilio: the Account SID (AC...). Telnyx: the Call Control application's connection ID.",
            "webhook_public_key": "Only for Telnyx: the public key that signs its webhooks (Mission Control, Keys &"
            " Credentials), base64.",
            "api_base_url": "Only for a Twilio-compatible provider, e.g. https://example.signalwire.com (SignalWire's"
            " compatibility API); empty for Twilio itself.",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:  # a SIP account's networks, as typed (comma-separated)
            self.initial["allowed_networks"] = ", ".join(self.instance.allowed_networks or [])

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        assert data is not None  # ModelForm.clean returns cleaned_data (the stubs allow None for overrides)
        organization = data.get("organization") or getattr(self.instance, "organization", None)
        if organization is None or self.errors:
            return data
        try:
            telephony_account_clean(
                organization=organization,
                provider=data.get("provider") or "",
                account_sid=(data.get("account_sid") or "").strip(),
                auth_token=data.get("auth_token") or None,
                api_key_sid=(data.get("api_key_sid") or "").strip(),
                api_key_secret=data.get("api_key_secret") or None,
                api_base_url=(data.get("api_base_url") or "").strip(),
                webhook_public_key=(data.get("webhook_public_key") or "").strip(),
                allowed_networks=(data.get("allowed_networks") or "").strip() or None,
                sip_username=(data.get("sip_username") or "").strip(),
            )
        except ApiError as error:
            add_api_error(self, error, _FIELD_NAMES)
        return data


@admin.register(TelephonyAccount)
class TelephonyAccountAdmin(admin.ModelAdmin):
    form = TelephonyAccountForm
    list_display = ("organization", "provider", "account_sid", "api_key_sid", "updated_at")
    list_filter = ("provider",)
    search_fields = ("organization__name", "organization__id", "account_sid")
    list_select_related = ("organization",)
    autocomplete_fields = ("organization",)
    readonly_fields = ("created_at", "updated_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet[TelephonyAccount]:
        return super().get_queryset(request).defer("auth_token", "api_key_secret")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        # One account per organization: an existing account stays with its organization.
        return (*self.readonly_fields, "organization") if obj is not None else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: TelephonyAccount, form: TelephonyAccountForm, change: bool) -> None:
        data = form.cleaned_data
        account = telephony_account_set(
            organization=obj.organization if change else data["organization"],
            provider=data["provider"],
            account_sid=data["account_sid"].strip(),
            auth_token=data.get("auth_token") or None,
            api_key_sid=(data.get("api_key_sid") or "").strip(),
            api_key_secret=data.get("api_key_secret") or None,
            api_base_url=(data.get("api_base_url") or "").strip(),
            webhook_public_key=(data.get("webhook_public_key") or "").strip(),
            allowed_networks=(data.get("allowed_networks") or "").strip() or None,
            sip_username=(data.get("sip_username") or "").strip(),
        )
        obj.pk, obj.created_at, obj.updated_at = account.pk, account.created_at, account.updated_at


# The API's field names in telephony.services' errors, and the form fields they belong to.
_NUMBER_FIELDS = {
    "number": "phone_number",
    "status": "status",
    "setupStatus": "setup_status",
    "country": "phone_number",
}


class PhoneNumberAddForm(forms.ModelForm):
    """Claim a number (telephony.services.numbers.phone_number_claim). Its voice webhook does not point at this
    service yet unless staff set it by hand: the setup status starts `pending`."""

    phone_number = PhoneNumberFormField(label="Phone number")
    setup_status = forms.ChoiceField(
        choices=[
            (SetupStatus.PENDING, "pending: point it at this service with the list's action"),
            (SetupStatus.READY, "ready: its voice webhook already points at this service"),
        ],
        initial=SetupStatus.PENDING,
        label="Setup status",
    )

    class Meta:
        model = PhoneNumber
        fields = ("organization", "phone_number", "friendly_name", "status", "setup_status")
        help_texts = {"friendly_name": "Shown in lists; the number itself when left blank."}

    def claim(self) -> PhoneNumber:
        data = self.cleaned_data
        return phone_number_claim(
            organization=data["organization"],
            number=data["phone_number"],
            status=data["status"],
            friendly_name=data.get("friendly_name") or "",
            setup_status=data["setup_status"],
        )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        assert data is not None  # ModelForm.clean returns cleaned_data (the stubs allow None for overrides)
        if not self.errors:
            check_with_service(self, self.claim, _NUMBER_FIELDS, fallback="phone_number")
        return data


class PhoneNumberChangeForm(forms.ModelForm):
    """Name, status and assignment of a claimed number. The agent is one of the number's organization's
    agents; assignment goes through telephony.services (claimed numbers only, 25 numbers per agent)."""

    assigned_agent = forms.ModelChoiceField(
        queryset=Agent.objects.none(),
        required=False,
        label="Assigned agent",
        help_text="Calls to this number reach this agent (one of the organization's agents).",
    )
    handoff_phone_number = PhoneNumberFormField(
        required=False,
        label="Handoff number",
        help_text="Where transfer_call sends callers of this number (E.164, e.g. +14155550123); optional.",
    )

    class Meta:
        model = PhoneNumber
        fields = ("friendly_name", "status", "assigned_agent", "handoff_phone_number")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        agents = Agent.objects.filter(organization_id=self.instance.organization_id).order_by("name", "pk")
        assigned_agent = self.fields["assigned_agent"]
        assert isinstance(assigned_agent, forms.ModelChoiceField)  # declared above
        assigned_agent.queryset = agents
        assigned_agent.label_from_instance = lambda agent: f"{agent.name} ({agent.status})"  # type: ignore[method-assign, assignment]  # Django documents replacing label_from_instance per field

    def apply(self) -> PhoneNumber:
        """Save the name and status, then the assignment through the services (the admin's transaction
        holds both)."""
        number, data = self.instance, self.cleaned_data
        stored = PhoneNumber.objects.select_related("assigned_agent").get(pk=number.pk)
        PhoneNumber.objects.filter(pk=number.pk).update(
            friendly_name=data.get("friendly_name") or stored.phone_number, status=data["status"]
        )
        agent, handoff = data.get("assigned_agent"), data.get("handoff_phone_number") or None
        if agent is None and stored.assigned_agent is not None:
            phone_number_unassign(
                organization=stored.organization, agent=stored.assigned_agent, phone_number_id=number.pk
            )
        elif agent is not None and (agent.pk, handoff) != (stored.assigned_agent_id, stored.handoff_phone_number):
            phone_number_assign(
                organization=stored.organization, agent=agent, phone_number_id=number.pk, handoff_phone_number=handoff
            )
        return PhoneNumber.objects.get(pk=number.pk)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        assert data is not None  # ModelForm.clean returns cleaned_data (the stubs allow None for overrides)
        if data.get("handoff_phone_number") and not data.get("assigned_agent"):
            self.add_error("handoff_phone_number", "A handoff number belongs to an assignment: choose an agent.")
        if not self.errors:
            check_with_service(self, self.apply, {}, fallback="assigned_agent")
        return data


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
    list_select_related = ("organization", "assigned_agent")
    autocomplete_fields = ("organization",)
    actions = ("point_at_this_service",)
    # An existing number keeps its organization and number; its setup status changes through the action.
    change_readonly: tuple[str, ...]
    change_readonly = ("id", "organization", "phone_number", "source", "provider", "country_code", "setup_status")
    change_readonly += ("setup_error", "created_at", "assigned_at")

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        kwargs["form"] = PhoneNumberAddForm if obj is None else PhoneNumberChangeForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return PhoneNumberAddForm._meta.fields  # type: ignore[misc]  # the stubs type ModelForm._meta per instance; the metaclass sets it on the class
        return (*self.change_readonly[:3], *PhoneNumberChangeForm._meta.fields, *self.change_readonly[3:])  # type: ignore[misc]  # the stubs type ModelForm._meta per instance; the metaclass sets it on the class

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return () if obj is None else self.change_readonly

    def save_model(self, request: HttpRequest, obj: PhoneNumber, form: Any, change: bool) -> None:
        saved = form.apply() if change else form.claim()
        obj.pk = saved.pk
        obj.refresh_from_db()

    @admin.action(description="Point at this service (set the numbers' voice webhook at the provider)")
    def point_at_this_service(self, request: HttpRequest, queryset: QuerySet[PhoneNumber]) -> None:
        for number in PhoneNumber.objects.filter(pk__in=queryset.values("pk")).order_by("phone_number"):
            phone_number_point(number=number)
            if number.setup_status == SetupStatus.READY:
                self.message_user(request, f"{number.phone_number}: ready (calls reach this service)", messages.SUCCESS)
            else:
                self.message_user(request, f"{number.phone_number}: error: {number.setup_error}", messages.ERROR)


# --- the agent page ---------------------------------------------------------------------------------

LATEST_CALLS = 10


class AssignNumberForm(forms.Form):
    phone_number = forms.ModelChoiceField(
        queryset=PhoneNumber.objects.none(),
        label="Phone number",
        help_text="A claimed number of the organization; a number held by another agent moves to this one.",
    )
    handoff_phone_number = forms.CharField(
        label="Handoff phone number",
        required=False,
        help_text="Optional, E.164 (for example +14155550123): where transfer_call sends callers of this number.",
    )

    def __init__(self, *args: Any, agent: Agent, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        numbers = PhoneNumber.objects.filter(organization_id=agent.organization_id, status=PhoneNumberStatus.CLAIMED)
        field = self.fields["phone_number"]
        assert isinstance(field, forms.ModelChoiceField)  # declared above
        field.queryset = numbers.select_related("assigned_agent").order_by("phone_number")
        field.label_from_instance = lambda number: " ".join(  # type: ignore[method-assign, assignment]  # Django documents replacing label_from_instance per field
            part
            for part in (
                number.phone_number,
                f"({number.friendly_name})" if number.friendly_name else "",
                f"- now on {number.assigned_agent.name}" if number.assigned_agent else "",
            )
            if part
        )


class AgentPageAdmin(AgentAdmin):
    """The agent page: the agents app's page with the agent's phone numbers, knowledge documents and
    latest calls, and the pages that assign and unassign its numbers (telephony services)."""

    def _related(self, agent: Agent) -> dict[str, Any]:
        return {
            **super()._related(agent),
            "documents": document_list(agent=agent),
            "numbers": agent_phone_numbers(agent=agent),
            "latest_calls": call_list(organization=agent.organization, agent_id=agent.pk, limit=LATEST_CALLS),
            "widget_keys": widget_key_list(agent=agent),  # realtime/widget/admin.py adds and deletes them
        }

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view
        return [
            path("<path:object_id>/numbers/assign/", view(self.assign_number_view), name="agents_agent_assign_number"),
            path(
                "<path:object_id>/numbers/<uuid:number_id>/unassign/",
                view(require_POST(self.unassign_number_view)),
                name="agents_agent_unassign_number",
            ),
            *super().get_urls(),
        ]

    def assign_number_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Assign a claimed number with its own handoff number (POST .../phone-numbers of the API)."""
        agent = self._editable_agent(request, object_id)
        form = AssignNumberForm(request.POST or None, agent=agent)
        if request.method == "POST" and form.is_valid():
            number = form.cleaned_data["phone_number"]
            body = {
                "phoneNumberId": str(number.pk),
                "handoffPhoneNumber": form.cleaned_data["handoff_phone_number"] or None,
            }
            assigned = through_service(
                form,
                lambda: phone_number_assign(
                    organization=agent.organization, agent=agent, **parse(AssignRequestSerializer, body)
                ),
                fields={"phoneNumberId": "phone_number", "handoffPhoneNumber": "handoff_phone_number"},
                codes={"PHONE_NUMBER_NOT_CLAIMED": "phone_number", "PHONE_NUMBER_NOT_FOUND": "phone_number"},
            )
            if assigned is not None:
                self.message_user(
                    request, f"{assigned.phone_number} is now assigned to {agent.name}.", messages.SUCCESS
                )
                return HttpResponseRedirect(self._agent_url(agent))
        intro = "Calls to the number reach this agent. Claim numbers on the phone numbers page first."
        return self._form_page(request, agent, title="Assign a phone number", form=form, intro=intro)

    def unassign_number_view(self, request: HttpRequest, object_id: str, number_id: Any) -> HttpResponse:
        agent = self._editable_agent(request, object_id)
        try:
            number = phone_number_unassign(organization=agent.organization, agent=agent, phone_number_id=number_id)
        except ApiError as error:
            self.message_user(request, error.message, messages.ERROR)
        else:
            self.message_user(
                request, f"{number.phone_number} is no longer assigned to {agent.name}.", messages.SUCCESS
            )
        return HttpResponseRedirect(self._agent_url(agent))


admin.site.register(Agent, AgentPageAdmin)

# Call batches (campaigns): their pages live in telephony/campaigns/admin.py.
from telephony.campaigns import admin as _campaigns_admin  # noqa: E402, F401 - registers the call batch pages
