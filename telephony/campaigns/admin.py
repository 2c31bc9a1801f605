"""Dashboard pages of call batches (campaigns): the list with progress and outcomes, a batch's page with
its recipients, and the pause/resume/cancel actions, through the same services as the API
(telephony/campaigns/services.py). Batches are created through the API (JSON or CSV)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from calls.models import Call
from kit.errors import ApiError
from telephony.campaigns import services
from telephony.models import CallBatch, CallBatchRecipient, RecipientOutcome, RecipientState

RECIPIENTS_SHOWN = 500
CALLS_SHOWN = 50


@admin.register(CallBatch)
class CallBatchAdmin(admin.ModelAdmin):
    list_display = ("name", "organization", "agent", "status", "progress", "outcomes", "concurrency", "created_at")
    list_filter = ("status", ("organization", admin.RelatedOnlyFieldListFilter))
    search_fields = ("name", "organization__name", "agent__name", "id")
    list_select_related = ("organization", "agent")
    show_full_result_count = False
    actions = ["pause", "resume", "cancel"]
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

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # through the API (a list of recipients or a CSV)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a batch changes through the actions only

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
            self.message_user(request, f"{changed} batch{'es' if changed != 1 else ''} {done}.", messages.SUCCESS)
        for message in refused:
            self.message_user(request, message, messages.WARNING)

    @admin.action(description="Pause the selected batches", permissions=["control"])
    def pause(self, request: HttpRequest, queryset: QuerySet[CallBatch]) -> None:
        self._act(request, queryset, services.batch_pause, "paused")

    @admin.action(description="Resume the selected batches", permissions=["control"])
    def resume(self, request: HttpRequest, queryset: QuerySet[CallBatch]) -> None:
        self._act(request, queryset, services.batch_resume, "resumed")

    @admin.action(description="Cancel the selected batches", permissions=["control"])
    def cancel(self, request: HttpRequest, queryset: QuerySet[CallBatch]) -> None:
        self._act(request, queryset, services.batch_cancel, "canceled")
