"""Dashboard pages of campaigns (call batches, `/public/v1/call-batches`): the list with progress and
outcomes, a campaign's page with its recipients, the pause/resume/cancel actions, and the add page. Every
write goes through the same services as the API (telephony/campaigns/services.py).

The add page takes every field of POST /call-batches, the recipients as a CSV upload (the API's multipart
form: a header row with `to`, every other column a variable): the form's values are parsed by the API's
request serializer and `batch_create` makes the campaign, all or nothing; a refusal (the API's message)
is shown on the field it concerns, and nothing is saved. The dashboard calls the feature "campaigns"
(docs/guides/campaigns.md); the API's resource keeps its name, call batches.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.widgets import AdminSplitDateTime
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from agents.dashboard import ServiceModelForm
from agents.models import Agent
from calls.models import Call
from kit.errors import ApiError
from kit.fields import iso, parse
from kit.parsers import refuse_unstorable
from telephony.campaigns import services
from telephony.campaigns.serializers import BatchCreateSerializer
from telephony.models import CallBatch, CallBatchRecipient, PhoneNumber, RecipientOutcome, RecipientState

RECIPIENTS_SHOWN = 500
CALLS_SHOWN = 50


DAY_NAMES = {"mon": "Mon", "tue": "Tue", "wed": "Wed", "thu": "Thu", "fri": "Fri", "sat": "Sat", "sun": "Sun"}
# Wire name of an issue -> the add form's field.
FORM_FIELD_OF = {
    "name": "name",
    "agentId": "agent",
    "phoneNumberId": "phone_number",
    "recipients": "recipients_file",
    "file": "recipients_file",
    "startAt": "start_at",
    "concurrency": "concurrency",
    "window": "window_start",
    "window.days": "window_days",
    "window.start": "window_start",
    "window.end": "window_end",
    "window.timeZone": "window_time_zone",
    "retry": "retry_max_attempts",
    "retry.maxAttempts": "retry_max_attempts",
    "retry.backoffMinutes": "retry_backoff_minutes",
    "retry.retryOn": "retry_on",
}


class LabelledChoiceField(forms.ModelChoiceField):
    """A choice of an agent or number, named with its organization (the list spans organizations)."""

    def label_from_instance(self, obj: Any) -> str:
        return f"{obj} ({obj.organization.name})"


def _time_of_day_field(label: str, placeholder: str, help_text: str) -> forms.CharField:
    """An optional "HH:MM" of the calling window (the service validates it)."""
    widget = forms.TextInput(attrs={"size": 5, "placeholder": placeholder})
    return forms.CharField(label=label, required=False, max_length=5, widget=widget, help_text=help_text)


class CampaignAddForm(ServiceModelForm):
    """A new campaign, as POST /call-batches takes it with a CSV file: validating the form is the service
    call (a valid form is a saved campaign with its recipients; an invalid one saved nothing)."""

    agent = LabelledChoiceField(
        queryset=Agent.objects.select_related("organization").order_by("organization__name", "name"),
        help_text="The agent that talks: active, of the organization.",
    )
    phone_number = LabelledChoiceField(
        label="Phone number",
        queryset=PhoneNumber.objects.select_related("organization").order_by("organization__name", "phone_number"),
        help_text="The number the calls come from: a claimed number of the organization.",
    )
    recipients_file = forms.FileField(
        label="Recipients (CSV)",
        help_text="UTF-8, at most 10 MB: a header row with a `to` column (E.164, for example +14155550123); every "
        "other column is a variable of that row's call ({{firstName}}). Up to 10,000 rows, each number once.",
    )
    start_at = forms.SplitDateTimeField(
        label="Start at",
        required=False,
        widget=AdminSplitDateTime,
        help_text="No call before this time (blank: at once).",
    )
    window_days = forms.MultipleChoiceField(
        label="Calling days",
        choices=list(DAY_NAMES.items()),
        initial=list(DAY_NAMES),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Calls are placed only on these days (with a window below).",
    )
    window_start = _time_of_day_field(
        "Calling window from",
        "09:00",
        '"HH:MM" (24-hour). Blank, with the end and time zone blank and every day checked: any time.',
    )
    window_end = _time_of_day_field("Calling window until", "18:00", '"HH:MM", after the start, the same day.')
    window_time_zone = forms.CharField(
        label="Window time zone",
        required=False,
        max_length=64,
        help_text="An IANA name such as Europe/Madrid (blank: the agent's time zone).",
    )
    concurrency = forms.IntegerField(
        required=False,
        initial=1,
        help_text="At most this many of its calls queued, ringing or live at once (1 to the plan's outbound calls).",
    )
    retry_max_attempts = forms.IntegerField(
        label="Attempts per recipient",
        required=False,
        initial=services.DEFAULT_RETRY["maxAttempts"],
        help_text=f"Attempts in all, 1 to {services.MAX_ATTEMPTS} (1: no retry).",
    )
    retry_backoff_minutes = forms.IntegerField(
        label="Minutes before a retry",
        required=False,
        initial=services.DEFAULT_RETRY["backoffMinutes"],
        help_text=f"0 to {services.MAX_BACKOFF_MINUTES:,}, after the retried call ended.",
    )
    retry_on = forms.MultipleChoiceField(
        label="Retry on",
        choices=[(outcome, outcome) for outcome in services.RETRYABLE],
        initial=services.DEFAULT_RETRY["retryOn"],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="The outcomes that are tried again.",
    )
    issue_fields = FORM_FIELD_OF
    issue_codes = {"OUTBOUND_NOT_ALLOWED": "organization", "TELEPHONY_ACCOUNT_MISSING": "organization"}

    class Meta:
        model = CallBatch
        fields = ("organization", "name", "agent", "phone_number")

    def _window(self) -> dict[str, Any] | None:
        data = self.cleaned_data
        days = list(data.get("window_days") or [])
        given = {"start": data.get("window_start"), "end": data.get("window_end")}
        zone = data.get("window_time_zone")
        if not any(given.values()) and not zone and set(days) == set(DAY_NAMES):
            return None  # any time
        window: dict[str, Any] = {"days": days, **{key: value for key, value in given.items() if value}}
        if zone:
            window["timeZone"] = zone
        return window

    def _wire(self) -> dict[str, Any]:
        """The form's values as the API's request body (the CSV's rows as recipients)."""
        data = self.cleaned_data
        upload = data["recipients_file"]
        body: dict[str, Any] = {
            "name": data.get("name") or "",
            "agentId": str(data["agent"].pk),
            "phoneNumberId": str(data["phone_number"].pk),
            "recipients": services.recipients_from_csv(upload.read(services.MAX_CSV_BYTES + 1)),
            "window": self._window(),
        }
        if data.get("start_at"):
            body["startAt"] = iso(data["start_at"])
        if data.get("concurrency") is not None:
            body["concurrency"] = data["concurrency"]
        retry: dict[str, Any] = {"retryOn": list(data.get("retry_on") or [])}
        for key, field in (("maxAttempts", "retry_max_attempts"), ("backoffMinutes", "retry_backoff_minutes")):
            if data.get(field) is not None:
                retry[key] = data[field]
        body["retry"] = retry
        refuse_unstorable(body)  # the CSV's cells, as the API's multipart form checks them
        return body

    def save_through_service(self) -> CallBatch:
        try:
            return services.batch_create(
                organization=self.cleaned_data["organization"],
                data=parse(BatchCreateSerializer, self._wire()),
                from_csv=True,
            )
        except ApiError as error:
            raise _on_the_form(error) from None


def _on_the_form(error: ApiError) -> ApiError:
    """The API's refusal, placed for the form: the CSV's rows (issues `recipients.<row>.<field>`) under the
    file with their row numbers (1: the first row after the header) after the API's message; an agent of
    another organization (a 404 naming no field) on the agent; a file too large on the file."""
    issues = error.issues or {}
    rows = {key: messages for key, messages in issues.items() if key.startswith("recipients.")}
    if rows:
        listed = [error.message]
        for key, messages in rows.items():
            where = key.split(".")
            row = f"Row {int(where[1]) + 1}" + (f", {where[2]}" if len(where) > 2 else "")
            listed += [f"{row}: {message}" for message in messages]
        others = {key: messages for key, messages in issues.items() if key not in rows}
        return ApiError(error.message, status_code=error.status_code, issues={**others, "recipients": listed})
    if not issues and error.status_code == 404:
        return ApiError(error.message, status_code=404, issues={"agentId": [error.message]})
    if not issues and error.status_code == 413:
        limit = services.MAX_CSV_BYTES // (1024 * 1024)
        return ApiError(error.message, status_code=413, issues={"file": [f"{error.message} (at most {limit} MB)"]})
    return error


@admin.register(CallBatch)
class CallBatchAdmin(admin.ModelAdmin):
    list_display = ("name", "organization", "agent", "status", "progress", "outcomes", "concurrency", "created_at")
    list_filter = ("status", ("organization", admin.RelatedOnlyFieldListFilter))
    search_fields = ("name", "organization__name", "agent__name", "id")
    list_select_related = ("organization", "agent")
    show_full_result_count = False
    actions = ["pause", "resume", "cancel"]
    autocomplete_fields = ("organization",)
    add_form = CampaignAddForm
    add_fieldsets = (
        (None, {"fields": ("organization", "name", "agent", "phone_number", "recipients_file")}),
        ("When", {"fields": ("start_at", "window_days", "window_start", "window_end", "window_time_zone")}),
        (
            "How many at once, how often",
            {"fields": ("concurrency", "retry_max_attempts", "retry_backoff_minutes", "retry_on")},
        ),
    )
    fields = (
        "id",
        "organization",
        "name",
        "agent",
        "phone_number",
        "status",
        "progress",
        "outcomes",
        "start_at",
        "window",
        "concurrency",
        "retry",
        "created_at",
        "completed_at",
        "batch_calls",
        "recipient_table",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[CallBatch]:
        done = Q(recipients__state=RecipientState.DONE)
        outcomes = {
            f"n_{o.name.lower()}": Count("recipients", filter=done & Q(recipients__outcome=o.value))
            for o in RecipientOutcome
        }
        return (
            super()
            .get_queryset(request)
            .annotate(n_total=Count("recipients"), n_done=Count("recipients", filter=done), **outcomes)
        )

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        if obj is None:
            kwargs.update(form=self.add_form, fields=None)
        return super().get_form(request, obj, change, **kwargs)

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.add_fieldsets if obj is None else super().get_fieldsets(request, obj)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return () if obj is None else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: CallBatch, form: Any, change: bool) -> None:
        """Nothing left to do: the add form's validation created the campaign through the service."""

    def response_add(self, request: HttpRequest, obj: CallBatch, post_url_continue: str | None = None) -> HttpResponse:
        """On to the new campaign's page (its recipients), with what was made."""
        count = CallBatchRecipient.objects.filter(batch=obj).count()
        self.message_user(
            request,
            f"The campaign “{obj.name}” was added with {count} recipient{'s' if count != 1 else ''}; it is scheduled.",
            messages.SUCCESS,
        )
        return HttpResponseRedirect(reverse("admin:telephony_callbatch_change", args=[obj.pk]))

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a campaign changes through the actions only

    def has_control_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("telephony.change_callbatch"))

    @admin.display(description="Progress")
    def progress(self, obj: CallBatch) -> str:
        return f"{obj.n_done}/{obj.n_total}"  # type: ignore[attr-defined]  # annotated above

    @admin.display(description="Outcomes")
    def outcomes(self, obj: CallBatch) -> str:
        parts = [
            f"{o.value} {getattr(obj, f'n_{o.name.lower()}')}"
            for o in RecipientOutcome
            if getattr(obj, f"n_{o.name.lower()}", 0)
        ]
        return " · ".join(parts) or "-"

    @admin.display(description="Latest calls")
    def batch_calls(self, obj: CallBatch) -> SafeString:
        calls = Call.objects.filter(outbound__recipient__batch=obj).order_by("-started_at", "-id")
        rows = format_html_join(
            "",
            '<tr><td><a href="{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td></tr>',
            (
                (
                    reverse("admin:calls_call_change", args=[c.pk]),
                    c.started_at.strftime("%Y-%m-%d %H:%M:%S"),
                    c.to_number,
                    c.status,
                    c.ended_reason or "",
                )
                for c in calls[:CALLS_SHOWN]
            ),
        )
        return format_html(
            "<table><tr><th>Queued</th><th>To</th><th>Status</th><th>Ended reason</th></tr>{}</table><p>{} calls in all</p>",
            rows,
            calls.count(),
        )

    @admin.display(description="Recipients")
    def recipient_table(self, obj: CallBatch) -> SafeString:
        rows = CallBatchRecipient.objects.filter(batch=obj).order_by("position")
        shown = list(rows[:RECIPIENTS_SHOWN])
        table = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    r.position + 1,
                    r.to_number,
                    r.state,
                    r.outcome or "",
                    r.attempts,
                    r.next_attempt_at.strftime("%Y-%m-%d %H:%M:%S") if r.next_attempt_at else "",
                    ", ".join(f"{k}={v}" for k, v in (r.variables or {}).items())[:200],
                )
                for r in shown
            ),
        )
        total = obj.n_total if hasattr(obj, "n_total") else rows.count()
        more = f"… and {total - len(shown)} more" if total > len(shown) else ""
        return format_html(
            "<table><tr><th>#</th><th>To</th><th>State</th><th>Outcome</th><th>Attempts</th><th>Next attempt</th>"
            "<th>Variables</th></tr>{}</table><p>{}</p>",
            table,
            more,
        )

    def _act(self, request: HttpRequest, queryset: QuerySet[CallBatch], action: Any, done: str) -> None:
        changed, refused = 0, []
        for batch in CallBatch.objects.filter(pk__in=queryset.values("pk")):
            try:
                action(batch=batch)
            except ApiError as error:
                refused.append(f"{batch.name}: {error.message}")
            else:
                changed += 1
        if changed:
            self.message_user(request, f"{changed} campaign{'s' if changed != 1 else ''} {done}.", messages.SUCCESS)
        for message in refused:
            self.message_user(request, message, messages.WARNING)

    @admin.action(description="Pause the selected campaigns", permissions=["control"])
    def pause(self, request: HttpRequest, queryset: QuerySet[CallBatch]) -> None:
        self._act(request, queryset, services.batch_pause, "paused")

    @admin.action(description="Resume the selected campaigns", permissions=["control"])
    def resume(self, request: HttpRequest, queryset: QuerySet[CallBatch]) -> None:
        self._act(request, queryset, services.batch_resume, "resumed")

    @admin.action(description="Cancel the selected campaigns", permissions=["control"])
    def cancel(self, request: HttpRequest, queryset: QuerySet[CallBatch]) -> None:
        self._act(request, queryset, services.batch_cancel, "canceled")
