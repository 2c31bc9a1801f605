"""The dashboard: Django's admin site with a home page for staff and a navigation without internal tables.

Installed as the default admin site (voiceagent.apps.DashboardAdminConfig), so every app's
`@admin.register` lands here. The home page (the admin index) shows calls today, failed calls of the last
24 hours, live calls (refreshed by a small script from `live-calls.json` under the admin), minutes of the
current billing period against each organization's plan and the newest calls; all of it is read through
calls.selectors. Only staff who may view calls see those figures.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast
from urllib.parse import urlencode

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, URLResolver, path, reverse
from django.utils import timezone

from calls.selectors import (
    FAILURE_WINDOW,
    busiest_organizations,
    call_counts,
    day_start,
    live_calls,
    newest_calls,
)
from calls.timeline import clock
from kit.errors import ApiError
from kit.fields import iso
from kit.parsers import refuse_unstorable_request

# Tables the service keeps for itself: left out of the navigation (their pages still answer, linked from
# the home page's "Internal tables" line).
INTERNAL_TABLES = ("knowledge.knowledgechunk", "knowledge.agentknowledgeindex", "realtime.usedsessiontoken")
CALLS_PERMISSION = "calls.view_call"
HOME_USAGE_ROWS = 8
HOME_NEWEST_CALLS = 10
LIVE_CALLS_SHOWN = 10
# How often the home page asks live-calls.json again (milliseconds, read by its script).
LIVE_REFRESH_MS = 5000


def _call_url(call_id: Any) -> str:
    return reverse("admin:calls_call_change", args=[call_id])


def live_payload(*, at: Any = None) -> dict[str, Any]:
    """The home page's refreshing figures: the counts and the newest live calls."""
    at = at or timezone.now()
    return {
        "counts": call_counts(at=at),
        "live": [
            {
                "id": str(call["id"]),
                "agentName": call["agent_name"],
                "organization": call["organization__name"],
                "channel": call["channel"],
                "from": call["from_number"],
                "startedAt": iso(call["started_at"]),
                "started": timezone.localtime(call["started_at"]).strftime("%H:%M:%S"),
                "duration": clock(max(0.0, (at - call["started_at"]).total_seconds())),
                "url": _call_url(call["id"]),
            }
            for call in live_calls(limit=LIVE_CALLS_SHOWN)
        ],
        "at": iso(at),
    }


def _calls_list(**filters: Any) -> str:
    return f"{reverse('admin:calls_call_changelist')}?{urlencode(filters)}"


def _home_links(at: datetime) -> dict[str, str]:
    """The calls list narrowed to what each figure counts (the date filter's own parameters)."""
    today = day_start(at)
    return {
        "today": _calls_list(started_at__gte=str(today), started_at__lt=str(today + timedelta(days=1))),
        "failures": _calls_list(status__exact="failed", started_at__gte=str(at - FAILURE_WINDOW)),
        "live": _calls_list(status__exact="active"),
    }


View = TypeVar("View", bound=Callable[..., Any])


class DashboardSite(admin.AdminSite):
    site_header = "Voice Agent Service: dashboard"
    site_title = "Voice Agent dashboard"
    index_title = "Home"
    index_template = "admin/dashboard_home.html"

    def get_app_list(self, request: HttpRequest, app_label: str | None = None) -> list[dict[str, Any]]:
        apps = super().get_app_list(request, app_label)
        for app in apps:
            app["models"] = [m for m in app["models"] if m["model"]._meta.label_lower not in INTERNAL_TABLES]
        return [app for app in apps if app["models"]]

    def admin_view(self, view: View, cacheable: bool = False) -> View:
        """Every page of the dashboard (each model's too): a query string or URL part with text that cannot
        be stored or searched for (NUL: `?q=%00` made PostgreSQL refuse the search, a 500) is a 400."""
        guarded = super().admin_view(view, cacheable)

        @functools.wraps(guarded)
        def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            try:
                refuse_unstorable_request(request.GET, kwargs)
            except ApiError as error:
                return HttpResponseBadRequest(error.message, content_type="text/plain; charset=utf-8")
            return guarded(request, *args, **kwargs)

        return cast("View", checked)

    def get_urls(self) -> list[URLResolver | URLPattern]:
        live = path("live-calls.json", self.admin_view(self.live_calls_view), name="live_calls")
        return [live, *super().get_urls()]

    def live_calls_view(self, request: HttpRequest) -> HttpResponse:
        if not request.user.has_perm(CALLS_PERMISSION):
            return JsonResponse({"error": "You may not view calls."}, status=403)
        return JsonResponse(live_payload())  # admin_view: never cached

    def _internal_tables(self, request: HttpRequest) -> list[dict[str, str]]:
        links = []
        for model, model_admin in self._registry.items():
            if model._meta.label_lower in INTERNAL_TABLES and model_admin.has_view_permission(request):
                url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
                links.append({"name": str(model._meta.verbose_name_plural).capitalize(), "url": url})
        return sorted(links, key=lambda link: link["name"])

    def index(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> TemplateResponse:
        context: dict[str, Any] = {"internal_tables": self._internal_tables(request)}
        if request.user.has_perm(CALLS_PERMISSION):
            at = timezone.now()
            context["home"] = {
                **live_payload(at=at),
                "links": _home_links(at),
                "usage": busiest_organizations(at=at, limit=HOME_USAGE_ROWS),
                "newest": newest_calls(limit=HOME_NEWEST_CALLS),
                "refresh_seconds": LIVE_REFRESH_MS // 1000,
                "live_shown": LIVE_CALLS_SHOWN,
                "script": {"url": reverse("admin:live_calls"), "refreshMs": LIVE_REFRESH_MS},
            }
        return super().index(request, {**context, **(extra_context or {})})
