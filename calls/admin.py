"""Dashboard: call history (transcripts for staff with the transcript permission only), per-organization
usage of the current billing period, CSV export of calls, agent runtime logs. Everything is read-only:
calls are written by the voice engine (realtime/engine/) through calls.services. The organization page (accounts/admin.py)
gets its usage chart from here: calls depend on accounts, so this app extends that page, not the reverse."""

from __future__ import annotations

import csv
import re
import uuid
from collections.abc import Iterator
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.db.models import Exists, OuterRef, QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.template.response import TemplateResponse
from django.urls import path
from django.utils.html import format_html
from django.utils.safestring import SafeString

from accounts.admin import OrganizationAdmin
from accounts.models import Organization
from agents.models import Agent
from calls.analytics.selectors import organization_costs
from calls.budgets import admin as budgets_admin  # noqa: F401 (registers the budgets' page)
from calls.costs import admin as costs_admin  # noqa: F401 (registers the price books' pages)
from calls.dashboard import call_record, usage_chart_svg, usage_cost
from calls.models import AgentLog, Call
from calls.selectors import call_log_lines, call_search, daily_minutes, usage_by_organization
from calls.timeline import clock
from calls.webhooks.admin import CallDeliveryInline
from kit.fields import iso

USAGE_CHART_DAYS = 30

TRANSCRIPT_PERMISSION = "calls.view_callmessage"

CSV_COLUMNS = (
    ("id", "id"),
    ("organization", "organization_id"),
    ("agentId", "agent_id"),
    ("agentName", "agent_name"),
    ("channel", "channel"),
    ("fromNumber", "from_number"),
    ("toNumber", "to_number"),
    ("status", "status"),
    ("startedAt", "started_at"),
    ("endedAt", "ended_at"),
    ("durationSeconds", "duration_seconds"),
    ("toolInvocations", "tool_invocation_count"),
    ("billableMinutes", "billable_minutes"),
    ("includedMinutes", "included_minutes"),
    ("overageMinutes", "overage_minutes"),
    ("usageClassification", "usage_classification"),
    ("endedReason", "ended_reason"),
    ("endedMessage", "ended_message_text"),
)
_PHONE = re.compile(r"^\+\d{2,15}$")


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if hasattr(value, "isoformat"):
        return iso(value) or ""
    text = str(value)
    # Spreadsheets run cells starting with these as formulas; E.164 numbers are harmless.
    if text[:1] in ("=", "+", "-", "@", "\t", "\r") and not _PHONE.match(text):
        return "'" + text
    return text


class _Echo:
    def write(self, value: str) -> str:
        return value


def calls_csv_rows(queryset: QuerySet) -> Iterator[str]:
    writer = csv.writer(_Echo())
    yield writer.writerow([title for title, _ in CSV_COLUMNS])
    for call in queryset.order_by("-started_at", "-id").iterator(chunk_size=2000):
        yield writer.writerow([_csv_cell(getattr(call, attr)) for _, attr in CSV_COLUMNS])


def can_view_transcripts(request: HttpRequest) -> bool:
    user = request.user
    return bool(user.is_active and user.is_staff and user.has_perm(TRANSCRIPT_PERMISSION))


def _uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value.strip())
    except ValueError:
        return None


def _call_of(value: str) -> Call | None:
    """The call whose id `value` is (None: not an id, or no such call)."""
    call_id = _uuid(value)
    return Call.objects.filter(pk=call_id).first() if call_id else None


class AgentFilter(admin.SimpleListFilter):
    """Agents that have rows in the list (calls, log lines), named with their organization (names repeat
    across organizations); only the chosen organization's agents once the list is narrowed to one."""

    title = "agent"
    parameter_name = "agent"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        rows = model_admin.model.objects.filter(agent=OuterRef("pk"))
        agents = Agent.objects.filter(Exists(rows)).select_related("organization")
        organization = request.GET.get("organization__id__exact")
        if organization:
            agents = agents.filter(organization_id=organization)
        return [
            (str(agent.pk), f"{agent.name} ({agent.organization.name})")
            for agent in agents.order_by("organization__name", "name", "pk")
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if not value:
            return queryset
        agent_id = _uuid(value)  # a mistyped id in the address narrows to nothing
        return queryset.filter(agent_id=agent_id) if agent_id else queryset.none()


class CallLogFilter(admin.SimpleListFilter):
    """The log lines of one call's session (?call=<call id>, linked from the call's page)."""

    title = "call"
    parameter_name = "call"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        value = self.value()
        if not value:
            return []  # shown only while narrowed to a call
        call = _call_of(value)
        return [(value, str(call) if call else "no such call")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if not value:
            return queryset
        call = _call_of(value)
        return queryset.filter(pk__in=call_log_lines(call=call).values("pk")) if call else queryset.none()


@admin.register(Call)
class CallAdmin(admin.ModelAdmin):
    change_form_template = "admin/calls/call/change_form.html"
    list_display = (
        "started_at",
        "organization",
        "agent_name",
        "channel",
        "status",
        "duration",
        "billable_minutes_display",
        "usage",
    )
    list_filter = (
        AgentFilter,
        "status",
        "ended_reason",
        "channel",
        "usage_classification",
        ("organization", admin.RelatedOnlyFieldListFilter),
        "organization__plan",
        ("started_at", admin.DateFieldListFilter),
    )
    # What calls.selectors.call_search matches word by word; it also finds transcript words and call ids.
    search_fields = ("agent_name", "organization__name", "from_number", "to_number")
    search_help_text = (
        "Words of the agent's or organization's name or a phone number; words said in the call (staff who may "
        "read transcripts); or the start of a call id (6 characters or more)."
    )
    date_hierarchy = "started_at"
    list_select_related = ("organization",)
    show_full_result_count = False
    actions = ["export_csv"]
    inlines = [CallDeliveryInline]  # the deliveries of the call's events (calls/webhooks/admin.py)
    call_fields = (
        "id",
        "organization",
        "agent",
        "agent_name",
        "channel",
        "from_number",
        "to_number",
        "status",
        "ended_reason",
        "ended_message_display",
        "started_at",
        "ended_at",
        "duration_seconds",
        "tool_invocation_count",
    )
    billing_fields = (
        "usage_classification",
        "billable_minutes_display",
        "included_minutes_display",
        "overage_minutes_display",
        "billing_period_start",
    )
    base_fields = (*call_fields, *billing_fields)

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        fieldsets = [
            (None, {"fields": self.call_fields}),
            (
                "Billing",
                {
                    "fields": self.billing_fields,
                    "description": "Minutes are billed in 10-second intervals: included from the plan's allowance "
                    "of the billing period, overage beyond it (trial calls keep the split but are classed trial).",
                },
            ),
        ]
        if can_view_transcripts(request):
            # The summary is an extract of the transcript: same restriction as the transcript.
            fieldsets.append(("Summary", {"fields": ("summary",)}))
            # What the API client gave with the call (docs/guides/variables.md): may name the caller.
            fieldsets.append(("Per-call variables", {"fields": ("variables", "metadata")}))
        return fieldsets

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return (*self.base_fields, "summary", "variables", "metadata")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).select_related("organization", "agent")

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str) -> tuple[QuerySet, bool]:
        return call_search(calls=queryset, text=search_term, transcripts=can_view_transcripts(request)), False

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        changelist = super().get_changelist_instance(request)
        if changelist.query:
            # The date drill-down above the list reads every match twice more (first and last date, then
            # each date); a search result keeps the date filter of the side panel instead.
            changelist.date_hierarchy = None
        return changelist

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict | None = None
    ) -> HttpResponse:
        call = self.get_object(request, unquote(object_id))
        if call is not None and self.has_view_permission(request, call):
            extra_context = {
                **(extra_context or {}),
                "record": call_record(call, with_transcript=can_view_transcripts(request)),
            }
        return super().change_view(request, object_id, form_url, extra_context)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="Why it ended")
    def ended_message_display(self, obj: Call) -> str:
        return obj.ended_message_text or "-"

    @admin.display(description="Duration", ordering="duration_seconds")
    def duration(self, obj: Call) -> str:
        return clock(obj.duration_seconds)

    @admin.display(description="Usage", ordering="usage_classification")
    def usage(self, obj: Call) -> str:
        """The classification, with the minutes on each side of the allowance when the call was split."""
        if obj.usage_classification == "split":
            return f"split: {obj.included_minutes:.2f} included + {obj.overage_minutes:.2f} overage"
        return obj.usage_classification or "-"

    @admin.display(description="Billable min", ordering="billable_seconds")
    def billable_minutes_display(self, obj: Call) -> str:
        return f"{obj.billable_minutes:.2f}"

    @admin.display(description="Included min", ordering="included_seconds")
    def included_minutes_display(self, obj: Call) -> str:
        return f"{obj.included_minutes:.2f}"

    @admin.display(description="Overage min", ordering="overage_seconds")
    def overage_minutes_display(self, obj: Call) -> str:
        return f"{obj.overage_minutes:.2f}"

    @admin.action(description="Export selected calls as CSV (no transcripts)")
    def export_csv(self, request: HttpRequest, queryset: QuerySet) -> StreamingHttpResponse:
        response = StreamingHttpResponse(calls_csv_rows(queryset), content_type="text/csv")
        response["Content-Disposition"] = 'attachment; filename="calls.csv"'
        return response

    def get_urls(self) -> list:
        usage = path("usage/", self.admin_site.admin_view(self.usage_view), name="calls_usage")
        return [usage, *super().get_urls()]

    def usage_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            return HttpResponse(status=403)
        usage = usage_by_organization()
        days = daily_minutes(organization_ids=[row["organization"].pk for row in usage], days=USAGE_CHART_DAYS)
        costs = organization_costs(organization_ids=[row["organization"].pk for row in usage], days=USAGE_CHART_DAYS)
        for row in usage:
            row["chart"] = usage_chart_svg(
                days[row["organization"].pk], organization_id=row["organization"].pk, width=180, height=36, labels=False
            )
            row["cost"] = usage_cost(costs[row["organization"].pk], organization_id=row["organization"].pk)
        context = {
            **self.admin_site.each_context(request),
            "title": "Usage in the current billing period",
            "opts": self.model._meta,
            "usage": usage,
            "chart_days": USAGE_CHART_DAYS,
        }
        return TemplateResponse(request, "admin/calls/usage.html", context)


@admin.register(AgentLog)
class AgentLogAdmin(admin.ModelAdmin):
    # The organization is in the agent filter (and the search): not a column, so that messages have room.
    list_display = ("timestamp", "severity", "session_id", "agent", "message")
    list_filter = (AgentFilter, CallLogFilter, "severity")
    search_fields = ("=session_id", "=agent__id", "agent__name", "organization__name")
    search_help_text = "A session id, an agent's id or name, an organization's name, or a call id (its session)."
    date_hierarchy = "timestamp"
    list_select_related = ("agent",)
    show_full_result_count = False
    fields = ("id", "organization", "agent", "session_id", "timestamp", "severity", "content")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str) -> tuple[QuerySet, bool]:
        found, duplicates = super().get_search_results(request, queryset, search_term)
        call = _call_of(search_term)
        if call is not None:
            found |= queryset.filter(pk__in=call_log_lines(call=call).values("pk"))
        return found, duplicates

    @admin.display(description="Message")
    def message(self, obj: AgentLog) -> str:
        text = str((obj.content or {}).get("message", ""))
        return text if len(text) <= 120 else text[:119] + "…"


class OrganizationUsageAdmin(OrganizationAdmin):
    """Accounts' organization page with the organization's usage chart (minutes per day) at the end."""

    readonly_fields = (*OrganizationAdmin.readonly_fields, "usage_chart")

    @admin.display(description=f"Minutes per day (last {USAGE_CHART_DAYS} days)")
    def usage_chart(self, obj: Organization) -> SafeString | str:
        if obj._state.adding:
            return "-"
        days = daily_minutes(organization_ids=[obj.pk], days=USAGE_CHART_DAYS)[obj.pk]
        included = sum(day["included_seconds"] for day in days) / 60
        overage = sum(day["overage_seconds"] for day in days) / 60
        return format_html(
            "{}<div>{} included + {} overage minutes in these {} days. Each bar opens that day's calls.</div>",
            usage_chart_svg(days, organization_id=obj.pk),
            f"{included:.1f}",
            f"{overage:.1f}",
            USAGE_CHART_DAYS,
        )


# accounts/admin.py registered the page first (accounts comes before calls in INSTALLED_APPS).
admin.site.unregister(Organization)
admin.site.register(Organization, OrganizationUsageAdmin)
