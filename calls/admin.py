"""Dashboard: call history (transcripts for staff with the transcript permission only), per-organization
usage of the current billing period, CSV export of calls, agent runtime logs. Everything is read-only:
calls are written by the realtime engine through calls.services."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.template.response import TemplateResponse
from django.urls import path

from calls.models import AgentLog, Call, CallMessage, LlmUsage, ToolInvocation
from calls.selectors import usage_by_organization
from voiceagent.fields import iso

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


class _ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class CallMessageInline(_ReadOnlyInline):
    model = CallMessage
    fields = ("occurred_at", "role", "content")
    readonly_fields = fields


class ToolInvocationInline(_ReadOnlyInline):
    model = ToolInvocation
    fields = ("created_at", "tool_name", "agent_tool_id", "status", "duration_ms", "request", "response")
    readonly_fields = fields


class LlmUsageInline(_ReadOnlyInline):
    model = LlmUsage
    fields = (
        "created_at",
        "provider",
        "model",
        "input_tokens",
        "output_tokens",
        "input_audio_seconds",
        "output_audio_seconds",
    )
    readonly_fields = fields


def can_view_transcripts(request: HttpRequest) -> bool:
    user = request.user
    return bool(user.is_active and user.is_staff and user.has_perm(TRANSCRIPT_PERMISSION))


@admin.register(Call)
class CallAdmin(admin.ModelAdmin):
    list_display = (
        "started_at",
        "organization",
        "agent_name",
        "channel",
        "status",
        "duration_seconds",
        "billable_minutes_display",
        "included_minutes_display",
        "overage_minutes_display",
        "usage_classification",
    )
    list_filter = ("status", "channel", "usage_classification", "organization__plan")
    search_fields = ("=id", "agent_name", "organization__name", "=organization__id", "from_number", "to_number")
    date_hierarchy = "started_at"
    list_select_related = ("organization",)
    show_full_result_count = False
    actions = ["export_csv"]
    base_fields = (
        "id",
        "organization",
        "agent",
        "agent_name",
        "channel",
        "from_number",
        "to_number",
        "status",
        "started_at",
        "ended_at",
        "duration_seconds",
        "tool_invocation_count",
        "billable_seconds",
        "included_seconds",
        "overage_seconds",
        "usage_classification",
        "billing_period_start",
    )

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # The summary is an extract of the transcript: same restriction as the transcript.
        return (*self.base_fields, "summary") if can_view_transcripts(request) else self.base_fields

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.get_fields(request, obj)

    def get_inlines(self, request: HttpRequest, obj: Any = None) -> Any:
        # Tool requests and responses carry what the caller said, so they go with the transcript.
        if can_view_transcripts(request):
            return [CallMessageInline, ToolInvocationInline, LlmUsageInline]
        return [LlmUsageInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

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
    def export_csv(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse:
        response = StreamingHttpResponse(calls_csv_rows(queryset), content_type="text/csv")
        response["Content-Disposition"] = 'attachment; filename="calls.csv"'
        return response

    def get_urls(self) -> list:
        usage = path("usage/", self.admin_site.admin_view(self.usage_view), name="calls_usage")
        return [usage, *super().get_urls()]

    def usage_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            return HttpResponse(status=403)
        context = {
            **self.admin_site.each_context(request),
            "title": "Usage this period",
            "opts": self.model._meta,
            "usage": usage_by_organization(),
        }
        return TemplateResponse(request, "admin/calls/usage.html", context)


@admin.register(AgentLog)
class AgentLogAdmin(admin.ModelAdmin):
    list_display = ("timestamp", "severity", "session_id", "agent", "organization", "message")
    list_filter = ("severity",)
    search_fields = ("=session_id", "=agent__id", "agent__name", "organization__name")
    date_hierarchy = "timestamp"
    list_select_related = ("agent", "organization")
    show_full_result_count = False
    fields = ("id", "organization", "agent", "session_id", "timestamp", "severity", "content")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="Message")
    def message(self, obj: AgentLog) -> str:
        text = str((obj.content or {}).get("message", ""))
        return text if len(text) <= 120 else text[:119] + "…"
