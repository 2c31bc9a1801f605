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

from agents import dashboard_forms as structured
from agents.dashboard_forms import Column, RowsField, TriState
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
    '"replyMatches": "regex", "noToolCalls": false, "transferred": false, "ended": false, "flowPath": ["greet", '
    '"ask"], "collected": {"party_size": 4}, "criteria": ["..."]}.',
    "tags": '["smoke", "orders"]',
}


# The structured form's fields (agents/dashboard_forms.py) and the issues they show, longest key first.
EDITOR = "agent_test_editor"
FORM_PLACES = {
    "turns": "turn_rows",
    "caller.maxTurns": "caller_max_turns",
    "caller.goal": "caller_goal",
    "caller": "caller_persona",
    "variables": "variable_rows",
    "toolMocks": "mock_rows",
    "expect.toolCalls": "expect_tool_calls",
    "expect.noToolCalls": "expect_no_tool_calls",
    "expect.replyContains": "expect_reply_contains",
    "expect.replyMatches": "expect_reply_matches",
    "expect.transferred": "expect_transferred",
    "expect.ended": "expect_ended",
    "expect.flowPath": "expect_flow_path",
    "expect.collected": "expect_collected",
    "expect.criteria": "expect_criteria",
    "expect": "expect_reply_contains",
    "tags": "tag_list",
}
STRUCTURED_FIELDS = (
    "turn_rows",
    "caller_persona",
    "caller_goal",
    "caller_max_turns",
    "variable_rows",
    "mock_rows",
    "expect_tool_calls",
    "expect_no_tool_calls",
    "expect_reply_contains",
    "expect_reply_matches",
    "expect_transferred",
    "expect_ended",
    "expect_flow_path",
    "expect_collected",
    "expect_criteria",
    "tag_list",
)
ARGUMENTS_HELP = 'JSON, for example {"order_number": "42"}'


def _text_area(label: str, help_text: str = "", rows: int = 2) -> forms.CharField:
    return forms.CharField(
        label=label, required=False, widget=forms.Textarea(attrs={"rows": rows, "cols": 80}), help_text=help_text
    )


class AgentTestForm(forms.ModelForm):
    """The test as the API takes it; validating the form is asking the service (nothing is saved until the
    form is valid, and a valid form saves exactly what the API would).

    Two editors of the same body: the structured form (turns as rows, mocked tools as a table,
    expectations as fields) and the JSON parts; `agent_test_editor` says which one the page used (a form
    posted without it is read as JSON)."""

    agent_test_editor = structured.editor_field("agent_test", "this test")
    turn_rows = RowsField(
        label="The caller says",
        columns=[Column("user", "Turn", kind="textarea", placeholder="Where is my order 42?", size=60)],
        add_label="Add a turn",
        help_text="In order, one turn a row (conversation tests may leave them out and describe a caller below).",
    )
    caller_persona = _text_area("Simulated caller: persona", "Conversation tests: who calls (with a goal below).")
    caller_goal = _text_area("Simulated caller: goal")
    caller_max_turns = forms.IntegerField(label="Simulated caller: at most this many turns", required=False)
    variable_rows = RowsField(
        label="Call variables",
        columns=[Column("name", "Name", placeholder="customer_name"), Column("value", "Value", size=30)],
        add_label="Add a variable",
    )
    mock_rows = RowsField(
        label="Mocked tools",
        columns=[
            Column("tool", "Tool", placeholder="lookup_order", size=16),
            Column("arguments", "When the arguments include", placeholder='{"order": "42"}', size=22),
            Column("result", "Result", placeholder='{"status": "shipped"}', size=28),
            Column("error", "Or an error", placeholder="timeout", size=14),
        ],
        add_label="Add a mocked tool",
        help_text="What each tool answers in the test (instead of calling it): a result (JSON, or plain text) or "
        f"an error; optionally only when the call's arguments include some values ({ARGUMENTS_HELP}).",
    )
    expect_tool_calls = RowsField(
        label="Expect tool calls (toolCalls)",
        columns=[
            Column("name", "Tool", placeholder="lookup_order", size=16),
            Column("arguments", "With arguments including", placeholder='{"order": "42"}', size=28),
        ],
        add_label="Add an expected call",
    )
    expect_no_tool_calls = TriState(label="Expect no tool calls (noToolCalls)")
    expect_reply_contains = _text_area("Reply contains (replyContains)", "One phrase a line; each must be said.")
    expect_reply_matches = forms.CharField(
        label="Reply matches (replyMatches)",
        required=False,
        widget=forms.TextInput(attrs={"size": 60}),
        help_text="A regular expression the agent's reply must match.",
    )
    expect_transferred = TriState(label="Transferred (transferred)")
    expect_ended = TriState(label="Call ended by the agent (ended)")
    expect_flow_path = _text_area(
        "Flow path (flowPath)",
        "The ids of the flow's nodes the call must go through, exactly, one a line from the start (agents with a flow).",
        rows=3,
    )
    expect_collected = RowsField(
        label="Collected values (collected)",
        columns=[
            Column("name", "Name", placeholder="party_size", size=16),
            Column("value", "Value", placeholder="4", size=28),
        ],
        add_label="Add a collected value",
        help_text="Values the flow must have collected: a number or true/false is compared as one, text without "
        'case (write "4" in quotes for the text 4).',
    )
    expect_criteria = _text_area(
        "Criteria (criteria)", "One a line: judged by the language model (skipped with the embedded brain)."
    )
    tag_list = forms.CharField(
        label="Tags",
        required=False,
        widget=forms.TextInput(attrs={"size": 40}),
        help_text="Separated by commas: smoke, orders",
    )

    class Meta:
        model = AgentTest
        fields = ("agent", "name", "kind", *JSON_PARTS, "allow_real_tools")
        help_texts = JSON_HELP
        widgets = {name: forms.Textarea(attrs={"rows": 4, "cols": 90, "class": "json-editor"}) for name in JSON_PARTS}

    class Media:
        js = (structured.SCRIPT,)
        css = {"all": (structured.STYLE,)}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in JSON_PARTS:
            self.fields[name].required = False
            self.fields[name].label = f"{self.fields[name].label} (JSON)"
        if not self.instance._state.adding:
            self.fields["agent"].disabled = True  # a test belongs to its agent
        for name, value in _structured_values(self.instance).items():
            if name in self.fields:
                self.fields[name].initial = value

    def _editor(self) -> str:
        return structured.editor_of(self, "agent_test") if self.is_bound else structured.FORM

    def wire_body(self) -> dict[str, Any]:
        data = self.cleaned_data
        body: dict[str, Any] = {"name": data.get("name"), "kind": data.get("kind")}
        if self._editor() == structured.FORM:
            body.update(_composed(data))
        else:
            for name, wire in JSON_PARTS.items():
                body[wire] = data.get(name)
        body["allowRealTools"] = bool(data.get("allow_real_tools"))
        return body

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self._editor() == structured.FORM:
            for name in JSON_PARTS:
                self.errors.pop(name, None)  # the JSON boxes are not what was used
        agent = cleaned.get("agent") if self.instance._state.adding else self.instance.agent
        if agent is None or self.errors:
            return cleaned
        try:
            services.agent_test_clean(agent=agent, body=self.wire_body())
        except ApiError as error:
            placed = False
            for key, texts in (error.issues or {}).items():
                field = self._place(key)
                if field in self.fields:
                    for text in texts:
                        self.add_error(field, f"{key}: {text}" if "." in key else text)
                    placed = True
            if not placed:
                self.add_error(None, error.message)
        return cleaned

    def _place(self, key: str) -> str | None:
        """The field an issue goes on: in the structured form, the one showing that part of the body."""
        if self._editor() == structured.FORM:
            prefix = key
            while prefix:
                if prefix in FORM_PLACES:
                    return FORM_PLACES[prefix]
                prefix = prefix.rsplit(".", 1)[0] if "." in prefix else ""
        return FIELD_OF.get(key.split(".", 1)[0])


def _composed(data: dict[str, Any]) -> dict[str, Any]:
    """The body's parts from the structured form's fields (what the JSON boxes would hold)."""
    expect: dict[str, Any] = {}
    calls = [
        {
            "name": row["name"],
            **({"argumentsInclude": structured.json_or_text(row["arguments"])} if row["arguments"] else {}),
        }
        for row in data.get("expect_tool_calls") or []
    ]
    if calls:
        expect["toolCalls"] = calls
    for key, name in (
        ("noToolCalls", "expect_no_tool_calls"),
        ("transferred", "expect_transferred"),
        ("ended", "expect_ended"),
    ):
        flag = structured.tri_value(data.get(name) or "")
        if flag is not None:
            expect[key] = flag
    if contains := structured.lines_of(data.get("expect_reply_contains") or ""):
        expect["replyContains"] = contains
    if matches := (data.get("expect_reply_matches") or "").strip():
        expect["replyMatches"] = matches
    if path := structured.lines_of(data.get("expect_flow_path") or ""):
        expect["flowPath"] = path
    if collected := data.get("expect_collected") or []:
        expect["collected"] = {row["name"]: structured.json_or_text(row["value"]) for row in collected}
    if criteria := structured.lines_of(data.get("expect_criteria") or ""):
        expect["criteria"] = criteria
    mocks = []
    for row in data.get("mock_rows") or []:
        mock: dict[str, Any] = {"tool": row["tool"]}
        if row["arguments"]:
            mock["when"] = {"argumentsInclude": structured.json_or_text(row["arguments"])}
        if row["error"]:
            mock["error"] = row["error"]
        else:
            mock["result"] = structured.json_or_text(row["result"])
        mocks.append(mock)
    persona, goal = (data.get("caller_persona") or "").strip(), (data.get("caller_goal") or "").strip()
    caller: dict[str, Any] | None = None
    if persona or goal or data.get("caller_max_turns") is not None:
        caller = {"persona": persona, "goal": goal}
        if data.get("caller_max_turns") is not None:
            caller["maxTurns"] = data["caller_max_turns"]
    return {
        "turns": [{"user": row["user"]} for row in data.get("turn_rows") or []],
        "caller": caller,
        "variables": {row["name"]: row["value"] for row in data.get("variable_rows") or []},
        "toolMocks": mocks,
        "expect": expect,
        "tags": [tag.strip() for tag in (data.get("tag_list") or "").split(",") if tag.strip()],
    }


def _collected_cell(value: Any) -> str:
    """An expected collected value in its cell: text as itself, unless it would read as JSON ("4", "true": then
    quoted, as the cell is read back); a number or true/false as JSON."""
    if isinstance(value, str) and structured.json_or_text(value) == value:
        return value
    return json.dumps(value, ensure_ascii=False)


def _structured_values(test: AgentTest) -> dict[str, Any]:
    """What the structured form shows of a stored test (a new test: empty rows)."""
    expect = test.expect or {}
    caller = test.caller or {}
    return {
        "turn_rows": [{"user": turn.get("user", "")} for turn in test.turns or []],
        "caller_persona": caller.get("persona", ""),
        "caller_goal": caller.get("goal", ""),
        "caller_max_turns": caller.get("maxTurns"),
        "variable_rows": [
            {"name": name, "value": structured.shown_json(value)} for name, value in (test.variables or {}).items()
        ],
        "mock_rows": [
            {
                "tool": mock.get("tool", ""),
                "arguments": structured.shown_json((mock.get("when") or {}).get("argumentsInclude"))
                if mock.get("when")
                else "",
                "result": structured.shown_json(mock["result"]) if "result" in mock else "",
                "error": mock.get("error", ""),
            }
            for mock in test.tool_mocks or []
        ],
        "expect_tool_calls": [
            {
                "name": call.get("name", ""),
                "arguments": structured.shown_json(call["argumentsInclude"]) if call.get("argumentsInclude") else "",
            }
            for call in expect.get("toolCalls") or []
        ],
        "expect_no_tool_calls": structured.tri_state(expect.get("noToolCalls")),
        "expect_reply_contains": "\n".join(expect.get("replyContains") or []),
        "expect_reply_matches": expect.get("replyMatches") or "",
        "expect_transferred": structured.tri_state(expect.get("transferred")),
        "expect_ended": structured.tri_state(expect.get("ended")),
        "expect_flow_path": "\n".join(expect.get("flowPath") or []),
        "expect_collected": [
            {"name": name, "value": _collected_cell(value)} for name, value in (expect.get("collected") or {}).items()
        ],
        "expect_criteria": "\n".join(expect.get("criteria") or []),
        "tag_list": ", ".join(test.tags or []),
    }


@admin.register(AgentTest)
class AgentTestAdmin(admin.ModelAdmin):
    form = AgentTestForm
    list_display = ("name", "agent", "kind", "tags_display", "updated_at")
    list_filter = ("kind", ("agent", admin.RelatedOnlyFieldListFilter))
    search_fields = ("name", "agent__name")
    list_select_related = ("agent",)
    actions = ["run_selected"]
    change_list_template = "admin/realtime/agenttest/change_list.html"
    change_form_template = "admin/realtime/agenttest/change_form.html"
    fieldsets = (
        (None, {"fields": ("agent", "name", "kind", "tag_list", "allow_real_tools", EDITOR)}),
        (
            "What the caller says",
            {"fields": ("turn_rows", "variable_rows", "caller_persona", "caller_goal", "caller_max_turns")},
        ),
        ("Mocked tools", {"fields": ("mock_rows",)}),
        (
            "Expectations",
            {
                "fields": (
                    "expect_tool_calls",
                    "expect_no_tool_calls",
                    "expect_reply_contains",
                    "expect_reply_matches",
                    "expect_transferred",
                    "expect_ended",
                    "expect_flow_path",
                    "expect_collected",
                    "expect_criteria",
                )
            },
        ),
        ("As JSON", {"fields": tuple(JSON_PARTS)}),
    )

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
            path("<uuid:test_id>/run/", view(require_POST(self.run_one_view)), name="realtime_agenttest_run_one"),
            *super().get_urls(),
        ]

    def run_one_view(self, request: HttpRequest, test_id: Any) -> HttpResponse:
        """The test page's *Run this test* button: the test, once; on to the run's page."""
        test = AgentTest.objects.select_related("agent").filter(pk=test_id).first()
        if test is None:
            raise Http404("Agent test not found")
        if not self.has_view_permission(request, test) or not request.user.has_perm("realtime.add_testrun"):
            raise PermissionDenied
        run = _start_run(request, self, agent=test.agent, test_ids=[str(test.pk)])
        if run is None:
            return HttpResponseRedirect(reverse("admin:realtime_agenttest_change", args=[test.pk]))
        return HttpResponseRedirect(reverse("admin:realtime_testrun_change", args=[run.pk]))

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
