"""Every add and change form of the dashboard refuses what the API refuses: posted with an invalid value, the
form comes back (200) with the error on the field, and nothing in the database changed.

The invalid values come from each form's own fields (a required field left blank, text over its length, a
word in a number box, a choice that is not offered, a date that is not one, a phone number that is not
E.164) and from the rules the services keep (FORM_RULES). The agent-building pages (agents.Agent, the MCP
server, tool and tool-selection pages of agents/tools, and the knowledge upload) write through the API's
serializers and services: their refusals are tested in agents/tests/test_dashboard_*.py.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django import forms
from django.contrib import admin
from django.contrib.admin.widgets import AutocompleteSelect
from django.contrib.auth.models import User
from django.db import models
from django.db.models import Model
from django.test import Client, RequestFactory
from django.urls import reverse

from accounts.models import Organization, Plan
from kit.admin_forms import PhoneNumberFormField
from telephony.models import PhoneNumber
from testing.dashboard import DashboardWorld

pytestmark = pytest.mark.django_db

LEFT_OUT = {
    "agents.agent",
    "agents.mcpserver",
    "agents.agenttool",
    "agents.mcptoolselection",
    "knowledge.knowledgedocument",
    # Agent tests are written through the API's services (realtime/agent_tests), runs only by the runner:
    # tested in realtime/tests/test_agent_tests_dashboard.py.
    "realtime.agenttest",
    "realtime.testrun",
    # Campaigns are added through the API's serializer and service (the CSV, the window, the retries):
    # tested in telephony/tests/test_batches_admin_create.py.
    "telephony.callbatch",
}
REGISTERED = sorted(
    (
        (model, model_admin)
        for model, model_admin in admin.site._registry.items()
        if model._meta.label_lower not in LEFT_OUT
    ),
    key=lambda item: item[0]._meta.label_lower,
)


@dataclass(frozen=True)
class Refused:
    """Values posted together, and the field whose error says why they are refused ("__all__": above the form)."""

    values: dict[str, Any]
    field: str
    says: str = ""


@dataclass
class FormRules:
    add: Callable[[DashboardWorld], dict[str, Any]] | None  # a valid add form; None: no add can be valid
    on_add: Callable[[DashboardWorld], list[Refused]] = lambda world: []
    on_change: Callable[[DashboardWorld], list[Refused]] = lambda world: []
    row: Callable[[DashboardWorld], Model] | None = None  # the row whose change form is posted (default: first)


AC = "AC" + "0a" * 16
PRICES = [{"product": "telephony", "provider": "twilio", "unit": "minute", "unitPrice": 0.0085}]
PASSWORD = "pw-new-Vb7Qx2Lk"

FORM_RULES: dict[str, FormRules] = {
    "auth.user": FormRules(
        add=lambda w: {
            "username": "new-staff",
            "usable_password": "true",
            "password1": PASSWORD,
            "password2": PASSWORD,
        },
        on_add=lambda w: [
            Refused({"username": "two words!"}, "username", "Enter a valid username"),
            Refused({"password2": PASSWORD + "x"}, "password2", "match"),
        ],
        on_change=lambda w: [
            Refused({"username": "two words!"}, "username", "Enter a valid username"),
            Refused({"email": "not-an-email"}, "email"),
        ],
    ),
    "auth.group": FormRules(add=lambda w: {"name": "Billing staff"}),
    "accounts.plan": FormRules(
        add=None,  # the four plan codes exist already (seeded); a fifth cannot be valid
        on_add=lambda w: [
            Refused({"included_minutes": "-5"}, "included_minutes", "greater than or equal to 0"),
            Refused({"api_requests_per_second": "0"}, "api_requests_per_second", "greater than or equal to 0.001"),
        ],
        on_change=lambda w: [
            Refused({"included_minutes": "-5"}, "included_minutes", "greater than or equal to 0"),
            Refused({"api_requests_per_second": "0"}, "api_requests_per_second", "greater than or equal to 0.001"),
        ],
    ),
    "accounts.organization": FormRules(
        add=lambda w: {"name": "Globex", "plan": Plan.objects.get(code="launch").pk},
        row=lambda w: w.organization,
    ),
    "accounts.apikey": FormRules(
        add=lambda w: {"organization": w.organization.pk, "name": "ci"},
        on_add=lambda w: [Refused({"organization": str(uuid.uuid4())}, "organization", "Select a valid choice")],
    ),
    "telephony.telephonyaccount": FormRules(
        add=lambda w: {
            "organization": w.other_organization.pk,
            "provider": "twilio",
            "account_sid": AC,
            "auth_token": "a-fresh-auth-token",
        },
        on_add=lambda w: [
            Refused({"account_sid": "AC123"}, "account_sid", "Account SID"),
            Refused({"api_key_sid": "SKbad"}, "api_key_sid", "API key SID"),
            Refused({"api_key_sid": "SK" + "1" * 32}, "api_key_secret", "needs its secret"),
            Refused({"organization": w.organization.pk}, "organization", "already exists"),
            Refused({"auth_token": "has spaces in it"}, "auth_token", "no spaces"),
        ],
        on_change=lambda w: [
            Refused({"account_sid": "not-a-sid"}, "account_sid", "Account SID"),
            Refused({"account_sid": "AC" + "0b" * 16}, "auth_token", "needs its own auth token"),
        ],
    ),
    "telephony.phonenumber": FormRules(
        add=lambda w: {
            "organization": w.organization.pk,
            "phone_number": "+14155550199",
            "friendly_name": "Second line",
            "status": "claimed",
            "setup_status": "pending",
        },
        on_add=lambda w: [
            Refused({"phone_number": "hello"}, "phone_number", "E.164"),
            Refused({"phone_number": "415 555 0124"}, "phone_number", "E.164"),
            Refused({"phone_number": "+1415555012"}, "phone_number", "Not a valid phone number"),
            Refused({"phone_number": "+14155550123"}, "phone_number", "already"),
            Refused({"setup_status": "error"}, "setup_status", "Select a valid choice"),
        ],
        on_change=lambda w: [
            Refused({"assigned_agent": w.other_agent.pk}, "assigned_agent", "Select a valid choice"),
            Refused({"handoff_phone_number": "hello"}, "handoff_phone_number", "E.164"),
            Refused({"handoff_phone_number": "+14155550100", "assigned_agent": ""}, "handoff_phone_number", "agent"),
            Refused(
                {"status": "released", "handoff_phone_number": "+14155550100"},
                "assigned_agent",
                "only claimed numbers can be assigned",
            ),
        ],
        row=lambda w: PhoneNumber.objects.get(phone_number="+14155550123"),
    ),
    # Added through the API's service on a page of its own (its secret shown once: tested in
    # calls/tests/test_webhooks_admin_create.py); the change page turns it on or off.
    "calls.webhookendpoint": FormRules(add=None),
    # Added through PUT /pricing's service; a book is never changed once saved (calls were priced by it).
    "calls.pricebook": FormRules(
        add=lambda w: {"organization": w.other_organization.pk, "currency": "EUR", "items": json.dumps(PRICES)},
        on_add=lambda w: [
            Refused({"currency": "eur"}, "currency", "three-letter ISO 4217 code"),
            Refused({"items": json.dumps([{**PRICES[0], "unitPrice": -1}])}, "items", "must not be negative"),
            Refused({"items": json.dumps([{**PRICES[0], "unit": "character"}])}, "items", "Not a unit of telephony"),
            Refused({"effective_from": "2001-01-01 00:00:00"}, "effective_from", "must not be in the past"),
        ],
    ),
}


def _not_offered(field: forms.Field) -> Any:
    if isinstance(field, forms.ModelMultipleChoiceField):
        return ["987654321"]
    if isinstance(field, forms.ModelChoiceField):
        return str(uuid.uuid4()) if isinstance(field.queryset.model._meta.pk, models.UUIDField) else "987654321"
    if isinstance(field, forms.MultipleChoiceField):
        return ["no-such-choice"]
    return "no-such-choice"


def invalid_values(field: forms.Field) -> list[Any]:
    """Values the field itself must refuse (none for a check box or free optional text)."""
    values: list[Any] = []
    if field.required and not isinstance(field, forms.BooleanField):
        values.append("")
    if getattr(field, "max_length", None):
        values.append("x" * (field.max_length + 1))
    if isinstance(field, (forms.IntegerField, forms.FloatField, forms.DecimalField)):
        values.append("many")
    if isinstance(field, forms.ChoiceField | forms.ModelChoiceField):
        values.append(_not_offered(field))
    if isinstance(field, forms.SplitDateTimeField):
        values.append(["yesterday", "noon"])
    elif isinstance(field, forms.DateTimeField | forms.DateField):
        values.append("yesterday")
    if isinstance(field, forms.EmailField):
        values.append("not-an-email")
    if isinstance(field, PhoneNumberFormField):
        values += ["hello", "415 555 0124"]
    return values


def _post_value(field: forms.Field, name: str, value: Any) -> dict[str, Any]:
    """How a browser posts `value` for a field (a split date and time is two boxes)."""
    if isinstance(field.widget, forms.MultiWidget):
        parts = value if isinstance(value, list) else field.widget.decompress(value)
        return {
            f"{name}_{i}": ("" if part is None else field.widget.widgets[i].format_value(part) or "")
            for i, part in enumerate(parts)
        }
    if isinstance(field, forms.BooleanField):
        return {name: "on"} if value else {}
    if isinstance(value, (list, tuple)) or isinstance(
        field, forms.MultipleChoiceField | forms.ModelMultipleChoiceField
    ):
        return {name: [str(v) for v in value or ()]}
    if value is None:
        return {name: ""}
    formatted = field.widget.format_value(value) if not isinstance(value, str) else value
    return {name: "" if formatted is None else formatted}


def _as_posted(form: forms.BaseForm) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for name, form_field in form.fields.items():
        if form_field.disabled:
            continue
        # A password box is shown empty (write-only secrets): the browser posts it blank.
        hidden = isinstance(form_field.widget, forms.PasswordInput) and not form_field.widget.render_value
        data.update(_post_value(form_field, form.add_prefix(name), "" if hidden else form[name].value()))
    return data


def page_data(response: Any) -> dict[str, Any]:
    """What the browser would post back for an add or change page as it is shown (inlines included)."""
    data = _as_posted(response.context["adminform"].form)
    for inline in response.context["inline_admin_formsets"]:
        formset = inline.formset
        data.update(_as_posted(formset.management_form))
        for form in formset.forms:
            data.update(_as_posted(form))
    return data


def snapshot() -> dict[str, list[dict[str, Any]]]:
    return {model._meta.label: list(model._default_manager.order_by("pk").values()) for model in admin.site._registry}


def _errors(response: Any) -> dict[str, list[str]]:
    assert response.status_code == 200, f"expected the form again, got {response.status_code}"
    errors = {name: [str(e) for e in messages] for name, messages in response.context["adminform"].form.errors.items()}
    assert errors, "the form came back without an error"
    return errors


def _refuses(client: Client, url: str, data: dict[str, Any], refused: Refused) -> None:
    before = snapshot()
    errors = _errors(client.post(url, data))
    assert refused.field in errors, f"{refused.values}: errors on {list(errors)}, not on {refused.field}"
    assert any(refused.says in message for message in errors[refused.field]), errors[refused.field]
    assert snapshot() == before, f"{refused.values} changed the database"


def _generic_refusals(form: forms.BaseForm) -> list[Refused]:
    refusals = []
    for name, form_field in form.fields.items():
        if form_field.disabled or isinstance(form_field.widget, forms.HiddenInput):
            continue
        for value in invalid_values(form_field):
            refusals.append(Refused(_post_value(form_field, name, value), name))
    return refusals


def assert_pickers_are_lists(page: Any) -> None:
    """No form asks for a row's raw id; organizations are picked from a list that searches as one types."""
    assert "vForeignKeyRawIdAdminField" not in page.content.decode()
    for name, form_field in page.context["adminform"].form.fields.items():
        if isinstance(form_field, forms.ModelChoiceField) and form_field.queryset.model is Organization:
            assert isinstance(form_field.widget.widget, AutocompleteSelect), name


@pytest.fixture
def staff(client: Client, dashboard_world: DashboardWorld) -> Client:
    client.force_login(User.objects.get(username="staff"))
    return client


def _can(model_admin: admin.ModelAdmin, permission: str, obj: Any = None) -> bool:
    request = RequestFactory().get("/admin/")
    request.user = User.objects.get(username="staff")
    return getattr(model_admin, f"has_{permission}_permission")(request, *([obj] if permission == "change" else []))


@pytest.mark.parametrize(("model", "model_admin"), REGISTERED, ids=[m._meta.label_lower for m, _ in REGISTERED])
def test_every_dashboard_form_refuses_invalid_values_and_saves_nothing(
    model: type[Model], model_admin: admin.ModelAdmin, staff: Client, dashboard_world: DashboardWorld
) -> None:
    label, info = model._meta.label_lower, (model._meta.app_label, model._meta.model_name)
    rules = FORM_RULES.get(label)
    row = rules.row(dashboard_world) if rules and rules.row else model._default_manager.order_by("pk").first()
    assert row is not None, f"the world has no {label} row"
    add_url = reverse("admin:{}_{}_add".format(*info))
    change_url = reverse("admin:{}_{}_change".format(*info), args=[row.pk])
    garbage = {f.name: "x" * 300 for f in model._meta.concrete_fields}

    if _can(model_admin, "add"):
        assert rules is not None, f"{label} has an add form: FORM_RULES needs its valid values and its rules"
        page = staff.get(add_url)
        assert_pickers_are_lists(page)
        valid = {k: str(v) for k, v in (rules.add(dashboard_world) if rules.add else {}).items()}
        data = {**page_data(page), **valid}
        for refused in [*_generic_refusals(page.context["adminform"].form), *rules.on_add(dashboard_world)]:
            _refuses(staff, add_url, {**data, **refused.values}, refused)
        if rules.add:  # the same form with valid values is saved: the refusals came from the values
            response = staff.post(add_url, data)
            assert response.status_code == 302, response.context and response.context["adminform"].form.errors
    else:
        before = snapshot()
        assert staff.post(add_url, garbage).status_code == 403
        assert snapshot() == before

    page = staff.get(change_url)
    assert page.status_code == 200
    assert_pickers_are_lists(page)
    form = page.context["adminform"].form
    if _can(model_admin, "change", row) and form.fields:
        assert rules is not None, f"{label} has a change form: FORM_RULES needs its rules"
        data = page_data(page)
        for refused in [*_generic_refusals(form), *rules.on_change(dashboard_world)]:
            _refuses(staff, change_url, {**data, **refused.values}, refused)
        response = staff.post(change_url, data)  # unchanged, as shown: saved
        assert response.status_code == 302, response.context and response.context["adminform"].form.errors
    else:  # a page that shows a record without a single box: a post changes nothing
        before = snapshot()
        assert staff.post(change_url, garbage).status_code in (302, 403)
        assert snapshot() == before
