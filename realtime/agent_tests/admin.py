"""Dashboard: an agent's tests (listed, created and edited through the same services as the API, so the page
refuses what the API refuses) and its test runs (status and counts; a run's page with each test's verdicts
and reasons), with a *Run* button on the tests of one agent and a "run the selected tests" action.

A run is made by realtime.agent_tests.runs.test_run_create (imported where it is used)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.views.decorators.http import require_POST

from agents.models import Agent
from kit.errors import ApiError
from realtime.agent_tests import services
from realtime.agent_tests.runs import test_run_create
from realtime.agent_tests.selectors import test_run_results
from realtime.models import AgentTest, TestRun

# The form's JSON parts and their API names (an error on `toolMocks.0.tool` goes on the tool_mocks box).
JSON_PARTS = {
    "turns": "turns",
    "caller": "caller",
    "variables": "variables",
    "tool_mocks": "toolMocks",
    "expect": "expect",
    "tags": "tags",
}
FIELD_OF = {
    "name": "name",
    "kind": "kind",
    "allowRealTools": "allow_real_tools",
    "agent": "agent",
    **{wire: form for form, wire in JSON_PARTS.items()},
}
JSON_HELP = {
    "turns": 'What the caller says, in order: [{"user": "Where is my order 42?"}] (conversation tests: may be [] '
    "with a simulated caller).",
    "caller": 'conversation tests: {"persona": "...", "goal": "...", "maxTurns": 6}; null for the others.',
    "variables": 'The call\'s variables: {"customer_name": "Ann"}.',
    "tool_mocks": 'Mocked tools: [{"tool": "lookup_order", "when": {"argumentsInclude": {"order": "42"}}, '
    '"result": {"status": "shipped"}}] or {"tool": ..., "error": "timeout"}.',
    "expect": 'What must happen: {"toolCalls": [{"name": "lookup_order"}], "replyContains": ["shipped"], '
    '"replyMatches": "regex", "noToolCalls": false, "transferred": false, "ended": false, "criteria": ["..."]}.',
    "tags": '["smoke", "orders"]',
}


class AgentTestForm(forms.ModelForm):
    """The test as the API takes it; validating the form is asking the service (nothing is saved until the
    form is valid, and a valid form saves exactly what the API would)."""

    class Meta:
        model = AgentTest
        fields = ("agent", "name", "kind", *JSON_PARTS, "allow_real_tools")
        help_texts = JSON_HELP
        widgets = {name: forms.Textarea(attrs={"rows": 4, "cols": 90}) for name in JSON_PARTS}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in JSON_PARTS:
            self.fields[name].required = False
        if not self.instance._state.adding:
            self.fields["agent"].disabled = True  # a test belongs to its agent

    def wire_body(self) -> dict[str, Any]:
        data = self.cleaned_data
        body: dict[str, Any] = {"name": data.get("name"), "kind": data.get("kind")}
        for name, wire in JSON_PARTS.items():
            body[wire] = data.get(name)
        body["allowRealTools"] = bool(data.get("allow_real_tools"))
        return body

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        agent = cleaned.get("agent") if self.instance._state.adding else self.instance.agent
        if agent is None or self.errors:
            return cleaned
        try:
            services.agent_test_clean(agent=agent, body=self.wire_body())
        except ApiError as error:
            placed = False
            for key, texts in (error.issues or {}).items():
                field = FIELD_OF.get(key.split(".", 1)[0])
                if field in self.fields:
                    for text in texts:
                        self.add_error(field, f"{key}: {text}" if "." in key else text)
                    placed = True
            if not placed:
                self.add_error(None, error.message)
        return cleaned


@admin.register(AgentTest)
class AgentTestAdmin(admin.ModelAdmin):
    form = AgentTestForm
    list_display = ("name", "agent", "kind", "tags_display", "updated_at")
    list_filter = ("kind", ("agent", admin.RelatedOnlyFieldListFilter))
    search_fields = ("name", "agent__name")
    list_select_related = ("agent",)
    actions = ["run_selected"]
    change_list_template = "admin/realtime/agenttest/change_list.html"

    @admin.display(description="Tags")
    def tags_display(self, obj: AgentTest) -> str:
        return ", ".join(obj.tags or [])

    def save_model(self, request: HttpRequest, obj: AgentTest, form: Any, change: bool) -> None:
        """Through the services (form.clean already asked them, so this does not refuse)."""
        body = form.wire_body()
        if change:
            stored = AgentTest.objects.get(pk=obj.pk)
            saved = services.agent_test_update_for(test=stored, body=body)
        else:
            saved = services.agent_test_create_for(agent=form.cleaned_data["agent"], body=body)
        obj.pk = saved.pk
        obj.organization_id = saved.organization_id
        obj._state.adding = False
        obj.refresh_from_db()

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        agent_id = request.GET.get("agent__id__exact") or ""
        agent = Agent.objects.filter(pk=agent_id).first() if _is_uuid(agent_id) else None
        extra = {
            "run_agent": agent,
            "run_url": reverse("admin:realtime_agenttest_run", args=[agent.pk]) if agent else None,
        }
        return super().changelist_view(request, {**extra, **(extra_context or {})})

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view
        return [
            path("run/<uuid:agent_id>/", view(require_POST(self.run_view)), name="realtime_agenttest_run"),
            *super().get_urls(),
        ]

    def run_view(self, request: HttpRequest, agent_id: Any) -> HttpResponse:
        """The *Run* button: every test of the agent, once."""
        agent = Agent.objects.filter(pk=agent_id).first()
        if agent is None:
            raise Http404("Agent not found")
        if not self.has_view_permission(request) or not request.user.has_perm("realtime.add_testrun"):
            raise PermissionDenied
        run = _start_run(request, self, agent=agent, test_ids=None)
        if run is None:
            return HttpResponseRedirect(f"{reverse('admin:realtime_agenttest_changelist')}?agent__id__exact={agent.pk}")
        return HttpResponseRedirect(reverse("admin:realtime_testrun_change", args=[run.pk]))

    @admin.action(description="Run the selected tests (one run per agent)")
    def run_selected(self, request: HttpRequest, queryset: QuerySet[AgentTest]) -> HttpResponse | None:
        if not request.user.has_perm("realtime.add_testrun"):
            self.message_user(request, "You may not start test runs.", messages.ERROR)
            return None
        by_agent: dict[Any, list[str]] = {}
        for test in queryset.select_related("agent").order_by("created_at", "id"):
            by_agent.setdefault(test.agent, []).append(str(test.pk))
        runs = [
            run
            for agent, ids in by_agent.items()
            if (run := _start_run(request, self, agent=agent, test_ids=ids)) is not None
        ]
        if len(runs) == 1:
            return HttpResponseRedirect(reverse("admin:realtime_testrun_change", args=[runs[0].pk]))
        return None


def _is_uuid(value: Any) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


def _start_run(request: HttpRequest, model_admin: admin.ModelAdmin, *, agent: Agent, test_ids: list[str] | None) -> Any:
    try:
        run = test_run_create(agent=agent, test_ids=test_ids, tag="", repeat=1)
    except ApiError as error:
        model_admin.message_user(request, f"{agent.name}: not run: {error.message}", messages.ERROR)
        return None
    model_admin.message_user(request, f"{agent.name}: test run queued.", messages.SUCCESS)
    return run


# Colours in voiceagent/static/voiceagent/dashboard.css (no inline style: the Content-Security-Policy refuses it).
VERDICT_CLASSES = {verdict: f"test-verdict-{verdict}" for verdict in ("pass", "fail", "error", "skipped")}


@admin.register(TestRun)
class TestRunAdmin(admin.ModelAdmin):
    """Runs are made by the *Run* button, the action on tests, the API and `manage.py agenttest`."""

    list_display = ("created_at", "agent", "status", "passed", "failed", "errored", "finished_at")
    list_filter = ("status", ("agent", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("agent",)
    fields = (
        "id",
        "agent",
        "status",
        "tag",
        "repeat",
        "passed",
        "failed",
        "errored",
        "error",
        "created_at",
        "started_at",
        "finished_at",
        "verdicts",
    )
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="Verdicts")
    def verdicts(self, obj: TestRun) -> SafeString:
        """Each test with its pass rate, and each attempt's verdict with the reasons (failed expectations by
        name), the transcript and the tool calls."""
        results = test_run_results(obj)
        if not results:
            return format_html("<p>{}</p>", "No results yet." if obj.status in ("queued", "running") else "No results.")
        rows = []
        for result in results:
            attempts = result.get("attempts") or []
            for number, attempt in enumerate(attempts, start=1):
                verdict = str(attempt.get("verdict", ""))
                reasons = attempt.get("reasons") or []
                transcript = attempt.get("transcript") or []
                rows.append(
                    (
                        str(result.get("name", result.get("testId", ""))),
                        f"{number}/{len(attempts)}",
                        VERDICT_CLASSES.get(verdict, ""),
                        verdict,
                        _rate(result.get("passRate")),
                        "; ".join(_reason(reason) for reason in reasons) or "—",
                        " | ".join(_line(line) for line in transcript),
                        json.dumps(attempt.get("toolCalls") or [], ensure_ascii=False)[:2000],
                    )
                )
        body = format_html_join(
            "",
            '<tr><td>{}</td><td>{}</td><td><strong class="{}">{}</strong></td><td>{}</td><td>{}</td>'
            "<td><small>{}</small></td><td><small><code>{}</code></small></td></tr>",
            rows,
        )
        return format_html(
            '<table class="test-verdicts"><thead><tr><th>Test</th><th>Attempt</th><th>Verdict</th><th>Pass rate</th>'
            "<th>Reasons</th><th>Transcript</th><th>Tool calls</th></tr></thead><tbody>{}</tbody></table>",
            body,
        )


def _rate(value: Any) -> str:
    return f"{value:.0%}" if isinstance(value, int | float) else "—"


def _reason(reason: Any) -> str:
    if isinstance(reason, dict):
        name = reason.get("expectation") or reason.get("name") or ""
        text = reason.get("reason") or reason.get("message") or ""
        return f"{name}: {text}" if name else str(text)
    return str(reason)


def _line(line: Any) -> str:
    if isinstance(line, dict):
        return f"{line.get('role', '')}: {line.get('text', line.get('content', ''))}"
    return str(line)
