"""Dashboard pages of call events: organization webhooks, deliveries with every attempt, a redeliver action
and a cancel action (a pending delivery that must never be sent), and the deliveries of a call on the call
page (calls/admin.py).

A webhook is added through the API's service (calls.webhooks.services.webhook_create: the API's request
checks, the egress guard, the organization's limit; a refusal is shown on the form and nothing is saved).
Its signing secret is shown once, on the page that answers the add (and on the page that answers a
rotation): never stored anywhere else, never on the webhook's page, in a list or in the admin's log. The
webhook's page rotates the secret (calls.webhooks.services.webhook_rotate_secret) and sends a signed test
event (calls.webhooks.events.webhook_test_send), showing what the receiver answered.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from agents.dashboard import ServiceModelForm
from agents.models import Agent
from calls.models import EventType, WebhookAttempt, WebhookDelivery, WebhookEndpoint
from calls.webhooks import events, services
from calls.webhooks.serializers import WebhookCreateSerializer
from kit.errors import ApiError
from kit.fields import parse

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


class AgentChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return f"{obj.name} ({obj.organization.name})"


class WebhookAddForm(ServiceModelForm):
    """A new webhook, as POST /public/v1/webhooks takes it: validating the form is the service call (a
    valid form is a saved webhook, whose `secret` is shown once; an invalid one saved nothing)."""

    url = forms.CharField(
        label="URL",
        max_length=2048,
        widget=forms.URLInput(attrs={"size": 70}),
        help_text="Where events are POSTed (http or https; the egress guard refuses private and loopback addresses).",
    )
    events = forms.MultipleChoiceField(
        label="Events",
        choices=EventType.choices,
        widget=forms.CheckboxSelectMultiple,
        initial=EventType.values,
        required=False,  # none checked: the API's message
        help_text="The event types it receives (docs/reference/webhooks.md).",
    )
    agent = AgentChoiceField(
        queryset=Agent.objects.select_related("organization").order_by("organization__name", "name"),
        required=False,
        empty_label="Every agent of the organization",
        help_text="Only the calls of this agent (one of the organization's agents).",
    )
    issue_fields = {"url": "url", "events": "events", "agentId": "agent", "enabled": "enabled"}
    issue_codes = {"TOO_MANY_WEBHOOKS": "organization"}

    class Meta:
        model = WebhookEndpoint
        fields = ("organization", "url", "events", "agent", "enabled")

    def save_through_service(self) -> WebhookEndpoint:
        data = self.cleaned_data
        body = {
            "url": data["url"],
            "events": list(data.get("events") or []),
            "agentId": str(data["agent"].pk) if data.get("agent") else None,
            "enabled": bool(data.get("enabled")),
        }
        try:
            endpoint, _ = services.webhook_create(
                organization=data["organization"], data=parse(WebhookCreateSerializer, body)
            )
        except ApiError as error:
            if error.status_code == 404:  # another organization's agent: not found, as in the API
                raise ApiError(error.message, status_code=404, issues={"agentId": [error.message]}) from None
            raise
        return endpoint


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    """Staff add a webhook (its secret shown once), turn one off or on, rotate its secret and send it a
    test event."""

    list_display = ("url", "organization", "events_display", "agent", "enabled", "disabled_reason", "created_at")
    list_filter = ("enabled", ("organization", admin.RelatedOnlyFieldListFilter))
    search_fields = ("url", "organization__name")
    list_select_related = ("organization", "agent")
    autocomplete_fields = ("organization",)
    add_form = WebhookAddForm
    add_fields = ("organization", "url", "events", "agent", "enabled")
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

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        if obj is None:
            kwargs.update(form=self.add_form, fields=self.add_fields)
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.add_fields if obj is None else self.fields

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return () if obj is None else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: WebhookEndpoint, form: Any, change: bool) -> None:
        if not change:
            return  # the form's validation created it through the service
        if obj.enabled:
            obj.disabled_reason = ""
        obj.updated_at = timezone.now()
        super().save_model(request, obj, form, change)

    def response_add(self, request: HttpRequest, obj: WebhookEndpoint, post_url_continue: str | None = None) -> Any:
        """The one page that shows the new webhook's signing secret (nothing stores it for a later page)."""
        return self._secret_page(
            request,
            obj,
            obj.secret,  # made by webhook_create in this request
            title="Webhook added: its signing secret",
            note="Copy the signing secret now: it is shown only on this page. Every event to this webhook is "
            "signed with it (x-service-signature, docs/reference/webhooks.md).",
        )

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        hours = int(services.ROTATION_OVERLAP.total_seconds() // 3600)
        return super().change_view(request, object_id, form_url, {"rotation_hours": hours, **(extra_context or {})})

    def get_urls(self) -> list[Any]:
        extra = [
            path(
                "<path:object_id>/rotate-secret/",
                self.admin_site.admin_view(self.rotate_secret_view),
                name="calls_webhookendpoint_rotate_secret",
            ),
            path(
                "<path:object_id>/send-test-event/",
                self.admin_site.admin_view(self.send_test_event_view),
                name="calls_webhookendpoint_send_test_event",
            ),
        ]
        return extra + super().get_urls()

    def _changeable(self, request: HttpRequest, object_id: str) -> WebhookEndpoint:
        endpoint = self.get_object(request, unquote(object_id))
        if endpoint is None:
            raise Http404("No such webhook.")
        if not self.has_change_permission(request, endpoint):
            raise PermissionDenied
        return endpoint

    def _page_url(self, endpoint: WebhookEndpoint) -> str:
        return reverse("admin:calls_webhookendpoint_change", args=[endpoint.pk])

    def rotate_secret_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        endpoint = self._changeable(request, object_id)
        endpoint, secret = services.webhook_rotate_secret(
            organization=endpoint.organization, webhook_id=str(endpoint.pk)
        )
        self.log_change(request, endpoint, "Rotated the signing secret.")
        until = timezone.localtime(endpoint.previous_secret_expires_at)
        hours = int(services.ROTATION_OVERLAP.total_seconds() // 3600)
        return self._secret_page(
            request,
            endpoint,
            secret,
            title="Signing secret rotated",
            note=f"Events are signed with this new secret from now on; it is shown only on this page. The previous "
            f"secret stays valid for {hours} hours, until {until:%Y-%m-%d %H:%M} ({until:%Z}): accept signatures "
            "made with either secret until then, then drop the old one.",
        )

    def send_test_event_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        endpoint = self._changeable(request, object_id)
        outcome = events.webhook_test_send(endpoint=endpoint)
        took = f"in {outcome.duration_ms} ms"
        if outcome.succeeded:
            self.message_user(
                request,
                f"Test event {outcome.event_id} delivered: the receiver answered HTTP {outcome.status_code} {took}.",
                messages.SUCCESS,
            )
        else:
            if outcome.status_code is not None and outcome.error == f"HTTP {outcome.status_code}":
                why = f"the receiver answered HTTP {outcome.status_code}, not a 2xx"
            else:
                why = outcome.error  # a refused address, a timeout, a redirect not followed...
            self.message_user(request, f"Test event {outcome.event_id} not delivered ({took}): {why}", messages.ERROR)
        return HttpResponseRedirect(self._page_url(endpoint))

    def _secret_page(
        self, request: HttpRequest, endpoint: WebhookEndpoint, secret: str, *, title: str, note: str
    ) -> TemplateResponse:
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": title,
            "original": endpoint,
            "secret": secret,
            "note": note,
            "webhook_url": self._page_url(endpoint),
        }
        response = TemplateResponse(request, "admin/calls/webhookendpoint/secret.html", context)
        response["Cache-Control"] = "no-store"  # the secret must not be kept by the browser's cache
        return response

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
