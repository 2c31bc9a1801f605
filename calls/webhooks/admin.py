"""Dashboard pages of call events: organization webhooks (their secrets never shown), deliveries with every
attempt, a redeliver action and a cancel action (a pending delivery that must never be sent), and the deliveries of a call on the call page (calls/admin.py)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from calls.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint
from calls.webhooks import events
from kit.errors import ApiError

RECENT_DELIVERIES = 20


def _deliveries_url(**filters: Any) -> str:
    query = "&".join(f"{key}={value}" for key, value in filters.items())
    return f"{reverse('admin:calls_webhookdelivery_changelist')}?{query}"


class WebhookAttemptInline(admin.TabularInline):
    model = WebhookAttempt
    extra = 0
    can_delete = False
    fields = ("number", "started_at", "duration_ms", "status_code", "succeeded", "error", "response_snippet")
    readonly_fields = fields
    verbose_name_plural = "attempts"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class CallDeliveryInline(admin.TabularInline):
    """The call page's deliveries of its events (to the agent's serverUrl and the organization's webhooks)."""

    model = WebhookDelivery
    fk_name = "call"
    extra = 0
    can_delete = False
    fields = ("event_type", "url", "status", "attempts", "last_status_code", "last_error", "delivery_link")
    readonly_fields = fields
    ordering = ("created_at", "rank")
    verbose_name_plural = "event deliveries"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="Attempts and redelivery")
    def delivery_link(self, obj: WebhookDelivery) -> SafeString:
        return format_html(
            '<a href="{}">attempts</a> · <a href="{}">redeliver from the list</a>',
            reverse("admin:calls_webhookdelivery_change", args=[obj.pk]),
            _deliveries_url(call__id__exact=obj.call_id),
        )


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    """Endpoints are made through the API (the secret is shown once there); staff may turn one off or on."""

    list_display = ("url", "organization", "events_display", "agent", "enabled", "disabled_reason", "created_at")
    list_filter = ("enabled", ("organization", admin.RelatedOnlyFieldListFilter))
    search_fields = ("url", "organization__name")
    list_select_related = ("organization", "agent")
    fields = (
        "id",
        "organization",
        "url",
        "events",
        "agent",
        "enabled",
        "disabled_reason",
        "previous_secret_expires_at",
        "created_at",
        "updated_at",
        "recent_deliveries",
    )
    readonly_fields = tuple(f for f in fields if f != "enabled")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: WebhookEndpoint, form: Any, change: bool) -> None:
        from django.utils import timezone

        if obj.enabled:
            obj.disabled_reason = ""
        obj.updated_at = timezone.now()
        super().save_model(request, obj, form, change)

    @admin.display(description="Events")
    def events_display(self, obj: WebhookEndpoint) -> str:
        return ", ".join(obj.events or [])

    @admin.display(description="Recent deliveries")
    def recent_deliveries(self, obj: WebhookEndpoint) -> SafeString:
        rows = WebhookDelivery.objects.filter(endpoint=obj).order_by("-created_at")[:RECENT_DELIVERIES]
        table = format_html_join(
            "",
            '<tr><td><a href="{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>',
            (
                (
                    reverse("admin:calls_webhookdelivery_change", args=[d.pk]),
                    d.created_at.strftime("%Y-%m-%d %H:%M:%S"),
                    d.event_type,
                    d.status,
                    d.attempts,
                    d.last_error or "",
                )
                for d in rows
            ),
        )
        return format_html(
            "<table><tr><th>Created</th><th>Event</th><th>Status</th><th>Attempts</th><th>Last error</th></tr>{}"
            '</table><p><a href="{}">All deliveries of this webhook</a></p>',
            table,
            _deliveries_url(endpoint__id__exact=obj.pk),
        )


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = ("created_at", "event_type", "organization", "url", "status", "attempts", "last_status_code")
    list_filter = ("status", "event_type", ("organization", admin.RelatedOnlyFieldListFilter))
    search_fields = ("url", "call__id", "event__id")
    list_select_related = ("organization",)
    show_full_result_count = False
    actions = ["redeliver", "cancel"]
    inlines = [WebhookAttemptInline]
    fields = (
        "id",
        "organization",
        "call",
        "event",
        "event_type",
        "endpoint",
        "agent",
        "url",
        "status",
        "attempts",
        "max_attempts",
        "next_attempt_at",
        "last_status_code",
        "last_error",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a delivery is a record: it is sent again (the action), never edited

    def has_redeliver_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("calls.change_webhookdelivery"))

    @admin.action(description="Redeliver the selected deliveries", permissions=["redeliver"])
    def redeliver(self, request: HttpRequest, queryset: QuerySet[WebhookDelivery]) -> None:
        done, refused = 0, 0
        for delivery in queryset:
            try:
                events.delivery_redeliver(delivery=delivery)
            except ApiError:
                refused += 1
            else:
                done += 1
        if done:
            self.message_user(request, f"{done} deliver{'y' if done == 1 else 'ies'} queued again.", messages.SUCCESS)
        if refused:
            self.message_user(request, f"{refused} skipped: their webhook is disabled.", messages.WARNING)

    @admin.action(description="Cancel the selected pending deliveries (never send them)", permissions=["redeliver"])
    def cancel(self, request: HttpRequest, queryset: QuerySet[WebhookDelivery]) -> None:
        by = request.user.get_username() or "staff"
        done = sum(events.delivery_cancel(delivery=delivery, by=by) for delivery in queryset)
        skipped = queryset.count() - done
        if done:
            self.message_user(request, f"{done} deliver{'y' if done == 1 else 'ies'} cancelled.", messages.SUCCESS)
        if skipped:
            self.message_user(request, f"{skipped} skipped: no longer pending.", messages.WARNING)
