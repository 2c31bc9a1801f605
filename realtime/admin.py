"""Dashboard: the realtime session token trace, and the custom tool page's test call (the agents app's
tool page, extended here because the test runs through the conversation's tool dispatcher: the agents app
sits a floor below realtime)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path

import realtime.agent_tests.admin  # noqa: F401 - registers the agent test and test run pages
from agents.models import AgentTool
from agents.tools.admin import AgentToolAdmin, JsonTextField
from realtime.models import UsedSessionToken
from realtime.tool_trial import tool_trial


@admin.register(UsedSessionToken)
class UsedSessionTokenAdmin(admin.ModelAdmin):
    """Read-only trace of realtime session tokens that opened a socket (kept a few minutes)."""

    list_display = ("token_id", "agent_id", "organization_id", "used_at", "expires_at")
    search_fields = ("=token_id", "=agent_id")

    def has_add_permission(self, request: object) -> bool:
        return False

    def has_change_permission(self, request: object, obj: object = None) -> bool:
        return False


class ToolTestForm(forms.Form):
    arguments = JsonTextField(
        label="Sample arguments",
        required=False,  # {} counts as empty for a form field, and is a valid arguments object
        widget=forms.Textarea(attrs={"rows": 8, "class": "vLargeTextField"}),
        help_text="The arguments object the model would send, as JSON (blank: {}). They are checked against the parameter "
        "schema first, as in a call.",
    )


class AgentToolTestAdmin(AgentToolAdmin):
    """The custom tool page with its "Test" page: sample arguments through the conversation's own tool
    dispatcher."""

    def get_urls(self) -> list[Any]:
        return [
            path(
                "<path:object_id>/test/", self.admin_site.admin_view(self.test_call_view), name="agents_agenttool_test"
            ),
            *super().get_urls(),
        ]

    def test_call_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Call the tool once with sample arguments, as a call of its agent would, and show the request
        sent, the response received and what the model would get."""
        tool = self.get_object(request, unquote(object_id))
        if tool is None:
            raise Http404("Tool not found")
        if not self.has_change_permission(request, tool):
            raise PermissionDenied
        form = ToolTestForm(request.POST or None, initial={"arguments": {}})
        trial = None
        if request.method == "POST" and form.is_valid():
            arguments = form.cleaned_data["arguments"]
            trial = tool_trial(tool=tool, arguments={} if arguments is None else arguments)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Test the tool {tool.name}",
            "subtitle": tool.agent.name,
            "opts": self.opts,
            "original": tool,
            "form": form,
            "trial": trial,
        }
        return TemplateResponse(request, "admin/agents/agenttool/test_call.html", context)


# agents/admin.py registered the tool page first (agents comes before realtime in INSTALLED_APPS).
admin.site.unregister(AgentTool)
admin.site.register(AgentTool, AgentToolTestAdmin)
