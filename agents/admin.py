"""Dashboard: agents, and through agents/tools/admin.py MCP servers, custom tools and MCP tool selections.
Django's admin autodiscovery imports only `agents.admin`, so this module imports the tools pages: without
it they are not registered.

Agents are created, edited and deleted through the same services and request serializers as the public API
(agents.services.agent_create / agent_patch / agent_delete): every rule, the plan allowances and the optimistic
concurrency check apply, and a refusal is shown on the form with nothing saved (agents/dashboard.py).
The agent page also lists the agent's tools and MCP tool selections, with a page to choose MCP tools.
Its phone numbers, knowledge documents and latest calls come from apps a floor up: telephony/admin.py
registers the page with them (AgentPageAdmin), as calls/admin.py extends the organization page.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.options import IS_POPUP_VAR
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator
from rest_framework.exceptions import ValidationError as DrfValidationError

import agents.tools.admin  # noqa: F401 - registers the MCP server, custom tool and tool selection pages
from agents import dashboard_forms as structured
from agents.dashboard import ServiceModelForm, header_lines, through_service, warn_destination, wire_sources
from agents.dashboard_forms import AnalysisPlanFields, InterruptionFields, TransferFields, VoicemailFields
from agents.disclosure import disclosure_for
from agents.flows import flow_of, next_steps, steps_in_order
from agents.keypad import TERMINATORS, TIMEOUT_MS_RANGE, keypad_of
from agents.models import (
    BUILTIN_VOICES,
    Agent,
    AgentStatus,
    AmbientSound,
    McpServer,
    McpServerStatus,
    default_analysis_plan,
)
from agents.selectors import agent_get
from agents.serializers import AgentPatchSerializer, AgentWriteSerializer
from agents.services import agent_create, agent_delete, agent_patch, ambient_sound_playable
from agents.tools.selectors import mcp_tool_selection_list, tool_list
from agents.tools.serializers import parse_header_lines, parse_selections
from agents.tools.services import mcp_tools_replace
from kit import redaction
from kit.admin_forms import StorableJSONField
from kit.errors import ApiError, validation_error
from kit.fields import iso, parse

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldsetSpec

# The agent's own settings, in the order the form shows them (status only once the agent exists).
SETTINGS = (
    "name",
    "status",
    "agent_type",
    "prompt_type",
    "identity",
    "instructions",
    "greeting_type",
    "static_greeting",
    "language",
    "voice_name",
    "ai_identity_disclosure_template_id",
    "background_sound",
    "ambient_sound",
    "ambient_sound_volume",
    "ambient_sound_ducking",
    "server_url",
    "handoff_phone_number",
    "analysis_plan",
    "end_call_enabled",
    "max_duration_seconds",
    "recording_enabled",
    "time_zone",
    "voicemail",
    "interruption",
    "transfer",
    "handoffs",
    "flow",
)
LABELS = {
    "agent_type": "Agent type",
    "prompt_type": "Prompt type",
    "instructions": "Instructions (prompt)",
    "greeting_type": "Greeting type",
    "static_greeting": "Greeting",
    "voice_name": "Voice",
    "ai_identity_disclosure_template_id": "AI identity disclosure",
    "background_sound": "Background sound",
    "ambient_sound": "Ambient sound",
    "ambient_sound_volume": "Ambient sound volume",
    "ambient_sound_ducking": "Duck the ambient sound while the agent speaks",
    "server_url": "Server URL",
    "handoff_phone_number": "Handoff phone number",
    "analysis_plan": "Analysis plan (JSON)",
    "end_call_enabled": "The agent may end the call (end_call)",
    "max_duration_seconds": "Maximum call duration (seconds)",
    "recording_enabled": "Record calls",
    "time_zone": "Time zone",
    "voicemail": "Voicemail (JSON)",
    "interruption": "Interruptions (JSON)",
    "transfer": "Transfer to a person (JSON)",
    "handoffs": "Handoffs to other agents (JSON)",
    "flow": "Flow (JSON)",
}
HELP = {
    "status": "Active agents take calls and count against the plan's allowance of active agents.",
    "agent_type": "webhook: custom tools (and a dynamic prompt) go to the server URL; http: each tool has "
    "its own URL; static: no custom tools.",
    "prompt_type": "static: the instructions below; dynamic: the server URL is asked at the start of each call.",
    "identity": "Who the agent is, in a sentence (optional).",
    "instructions": "What the agent does and how: required when the prompt type is static.",
    "static_greeting": "Spoken after the AI identity disclosure when the greeting type is static.",
    "language": "A language tag such as en-US, es-ES, es-US or it-IT.",
    "ai_identity_disclosure_template_id": "The approved sentence every call starts with (wording below, once saved).",
    "ambient_sound": "Office ambience under the call (Studio and Agency plans).",
    "ambient_sound_volume": "From 0 to 1.",
    "server_url": "Webhook agents only: receives tool calls and, for a dynamic prompt, the assistant request.",
    "handoff_phone_number": "E.164, for example +14155550123: where transfer_call sends the caller "
    "(a number's own handoff number, set when assigning it, wins).",
    "analysis_plan": "The whole plan as the API takes it: summary {enabled, prompt}, structuredData {enabled, schema, prompt}, successEvaluation "
    "{enabled, rubric, scale: pass-fail or 1-10}; run after every call (docs/guides/post-call-analysis.md). "
    "Used when the plan is edited as JSON; left blank, the stored plan stays.",
    "end_call_enabled": "Offers the end_call tool: the agent says goodbye and ends the call when the caller is done.",
    "max_duration_seconds": "From 30 to 14400: the agent then says a short closing line and ends the call.",
    "recording_enabled": "Record every call in stereo (caller left, agent right); played on the call's page.",
    "time_zone": "An IANA name such as Europe/Madrid: the time {{now}} gives in the prompt and greeting.",
    "voicemail": 'As the API takes it: {"detection": "off" or "provider", "action": "hang-up" or "leave-message", "message": '
    '"..."}: answering machines on outbound calls (docs/guides/voicemail.md). Used when edited as JSON; left blank, the '
    "stored setting stays.",
    "interruption": 'As the API takes it: {"mode": "adaptive", "vad" or "off", "minWords": 0 to 5, "backchannels": ["okay", ...] or '
    "null for the language's list, \"resumeAfterMs\": 0 to 5000}: what the caller's speech does while the agent "
    "speaks (docs/guides/conversation.md). Used when edited as JSON; left blank, the stored setting stays.",
    "transfer": 'As the API takes it: {"mode": "cold" or "warm", "briefing": "summary" or "static", "message": '
    '"what the person hears (required with static)", "ringTimeoutSeconds": 5 to 120}: how transfer_call passes the '
    "caller to a person (docs/guides/phone-calls.md). Used when edited as JSON; left blank, the stored setting "
    "stays.",
    "handoffs": 'As the API takes it: a list of at most 20 {"agentId": "<the id of an active agent of this '
    'organization>", "description": "when to hand off (the model reads it)", "context": "all", "lastN", "summary" or '
    '"none", "lastN": 1 to 50 with "lastN", else null}: the agents a call may be handed to, each once, not this one. '
    "[] for none; left blank, the stored list stays.",
    "flow": 'As the API takes it: {"start": "<step id>", "nodes": {"<step id>": {"type": "say", "text": "...", '
    '"next": "<step id>"}, ...}} with say, collect, tool, branch, conversation, handoff, transfer and end steps '
    "(docs/guides/flows.md). A tool step names an enabled custom tool of this agent (add the tools first). "
    "null for no flow; left blank, the stored flow stays.",
}
# Wire name of an issue -> form field (the serializer's sources, and the write-only fields below).
FORM_FIELD_OF = {
    **wire_sources(AgentPatchSerializer),
    "serverHeaders": "new_server_headers",
    "headers": "new_server_headers",
    "serverSecret": "new_server_secret",
    "expectedUpdatedAt": "",
    "redactPii": "redact_pii_categories",
    "keypad": "keypad_timeout_ms",
}
# Refusals without issues, on the field they concern.
CODE_FIELDS = {"FEATURE_NOT_AVAILABLE": "ambient_sound", "AGENT_LIMIT_EXCEEDED": "status"}


class StaleEdit(Exception):
    """The agent changed after the form was opened (the service's optimistic-concurrency refusal)."""


class _IssuePlaces(dict[str, str]):
    """FORM_FIELD_OF, and the structured fields of the parts edited with the form (`interruption.mode` goes on
    the mode's select, not on the JSON box)."""

    def __init__(self, base: dict[str, str], form_parts: set[str]) -> None:
        super().__init__(base)
        self.form_parts = form_parts

    def get(self, key: str, default: Any = None) -> Any:
        wire, _, inner = key.partition(".")
        part = STRUCTURED_WIRE.get(wire)
        if inner and part in self.form_parts and (place := structured.field_of_issue(part, key)):
            return place
        return super().get(key, default)


# The agent's JSON settings that also have a structured editor: form field -> its wire name.
STRUCTURED = {
    "analysis_plan": "analysisPlan",
    "voicemail": "voicemail",
    "interruption": "interruption",
    "transfer": "transfer",
}
STRUCTURED_WIRE = {wire: part for part, wire in STRUCTURED.items()}


class AgentForm(ServiceModelForm, AnalysisPlanFields, VoicemailFields, InterruptionFields, TransferFields):
    """The agent's settings. Validating the form is the service call itself: a valid form is a saved
    agent, an invalid one changed nothing. serverHeaders and serverSecret are write-only.

    The analysis plan, voicemail, interruption and transfer settings have a structured editor each (real
    fields, agents/dashboard_forms.py) beside their JSON box; `<part>_editor` says which one the page used,
    and a form posted without it is read as JSON. Either way the API's value is composed and saved through the
    same service, and the API's messages go on the field they name."""

    new_server_headers = forms.CharField(
        label="New server headers",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One 'Name: value' per line, sent with every request to the server URL. Values are never "
        "shown again; leave blank to keep the stored headers.",
    )
    clear_server_headers = forms.BooleanField(label="Remove the stored server headers", required=False)
    new_server_secret = forms.CharField(
        label="New server secret",
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Signs webhook requests (x-service-signature). Never shown again; leave blank to keep it.",
    )
    clear_server_secret = forms.BooleanField(label="Remove the stored server secret", required=False)
    redact_pii_categories = forms.MultipleChoiceField(
        label="Redact personal data",
        required=False,
        choices=[(c, c.replace("_", " ")) for c in redaction.ALLOWED_LIST],
        widget=forms.CheckboxSelectMultiple,
        help_text="Replaced by placeholders such as [EMAIL] in the stored transcript, summary, tool calls and "
        "logs of this agent's calls (none checked: off). The live call and the tools get the real values; "
        "recordings are not redacted.",
    )
    # The agent's keypad (agents/keypad.py), as three fields composing the API's `keypad`.
    keypad_enabled = forms.BooleanField(
        label="Gather the caller's keys into one turn",
        required=False,
        initial=True,
        help_text='Phone calls: keys pressed one after another reach the agent as one turn ("the caller entered '
        '4 5 6 7"); unchecked, each key is a turn of its own.',
    )
    keypad_timeout_ms = forms.IntegerField(
        label="Keypad timeout (ms)",
        required=False,
        initial=2000,
        help_text=f"From {TIMEOUT_MS_RANGE[0]} to {TIMEOUT_MS_RANGE[1]}: how long without a key ends the turn.",
    )
    keypad_terminator = forms.ChoiceField(
        label="Keypad terminator",
        required=False,
        initial="#",
        choices=[(key, key or "none") for key in TERMINATORS],
        help_text="The key that ends the turn at once (not part of the digits).",
    )
    expected_updated_at = forms.CharField(required=False, widget=forms.HiddenInput)
    issue_codes = CODE_FIELDS

    class Media:
        js = (structured.SCRIPT,)
        css = {"all": (structured.STYLE,)}

    @property
    def issue_fields(self) -> dict[str, str]:  # type: ignore[override]
        return _IssuePlaces(FORM_FIELD_OF, {part for part in STRUCTURED if self._editor(part) == structured.FORM})

    class Meta:
        model = Agent
        fields = ("organization", *SETTINGS)
        labels = LABELS
        help_texts = HELP
        field_classes = {"handoffs": StorableJSONField, "flow": StorableJSONField}
        widgets = {
            "voice_name": forms.Select(choices=[(voice, voice) for voice in BUILTIN_VOICES]),
            "language": forms.TextInput(attrs={"size": 10}),
            "server_url": forms.URLInput(attrs={"size": 60}),
            "handoff_phone_number": forms.TextInput(attrs={"size": 16}),
            "static_greeting": forms.Textarea(attrs={"rows": 2}),
            "identity": forms.Textarea(attrs={"rows": 2}),
            **{
                part: forms.Textarea(
                    attrs={"rows": 8 if part == "analysis_plan" else 3, "cols": 80, "class": "json-editor"}
                )
                for part in STRUCTURED
            },
            "handoffs": forms.Textarea(attrs={"rows": 4, "cols": 80}),
            "flow": forms.Textarea(attrs={"rows": 10, "cols": 80}),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "static_greeting" in self.fields:
            static_greeting = self.fields["static_greeting"]
            assert isinstance(static_greeting, forms.CharField)  # a TextField's form field
            static_greeting.empty_value = None  # blank reads back as null, as the model keeps it
        if not self.instance._state.adding:
            self.fields["expected_updated_at"].initial = iso(self.instance.updated_at)
            self.fields["redact_pii_categories"].initial = sorted(redaction.categories_of(self.instance.redact_pii))
            keypad = keypad_of(self.instance.keypad)
            self.fields["keypad_enabled"].initial = keypad["enabled"]
            self.fields["keypad_timeout_ms"].initial = keypad["timeoutMs"]
            self.fields["keypad_terminator"].initial = keypad["terminator"]
        self._show_structured(self.instance)

    def _show_structured(self, agent: Agent) -> None:
        """The structured fields show the agent's stored settings (a new agent's: the defaults); a plan
        whose schema the table cannot show opens as JSON."""
        plan = agent.analysis_plan or default_analysis_plan()
        values = {
            **structured.plan_decompose(plan),
            **structured.voicemail_decompose(agent.voicemail or {}),
            **structured.interruption_decompose(agent.interruption or {}),
            **structured.transfer_decompose(agent.transfer or {}),
        }
        schema = (plan.get("structuredData") or {}).get("schema")
        values["analysis_plan_editor"] = (
            structured.FORM if structured.schema_rows(schema) is not None else structured.JSON
        )
        for name, value in values.items():
            if name in self.fields:
                self.fields[name].initial = value

    def _editor(self, part: str) -> str:
        return structured.editor_of(self, part) if self.is_bound else structured.FORM

    def clean(self) -> dict[str, Any]:
        """A part edited with the form: its value is composed from the fields (its JSON box is not read)."""
        cleaned = super().clean() or {}
        stored = self.instance.analysis_plan if not self.instance._state.adding else None
        composers = {
            "analysis_plan": lambda: structured.plan_compose(cleaned, stored or {}),
            "voicemail": lambda: structured.voicemail_compose(cleaned),
            "interruption": lambda: structured.interruption_compose(cleaned),
            "transfer": lambda: structured.transfer_compose(cleaned),
        }
        for part, compose in composers.items():
            if part in self.fields and self._editor(part) == structured.FORM:
                self.errors.pop(part, None)  # the JSON box's own parse error: not what was used
                cleaned[part] = compose()
        return cleaned

    def add_error(self, field: str | None, error: Any) -> None:
        """A message of the API about a part edited with the form goes on the field its key names
        (`structuredData.schema: ...` on the table of fields), else on the part's editor choice."""
        if field in STRUCTURED and self.is_bound and self._editor(field) == structured.FORM:
            for message in [error] if isinstance(error, str) else list(error):
                place = structured.field_of_message(field, str(message)) or f"{field}_editor"
                super().add_error(place if place in self.fields else None, message)
            return
        super().add_error(field, error)

    def _wire(self) -> dict[str, Any]:
        """The form's values as an API request body."""
        data = self.cleaned_data
        body = {wire: data[source] for wire, source in wire_sources(AgentWriteSerializer).items() if source in data}
        if body.get("analysisPlan") is None:
            body.pop("analysisPlan", None)  # left blank: the stored plan stays
        for blank_keeps in ("voicemail", "interruption", "transfer", "handoffs"):
            if body.get(blank_keeps) is None:
                body.pop(blank_keeps, None)  # left blank: the stored setting stays
        if not str(self.data.get(self.add_prefix("flow"), "")).strip():
            body.pop("flow", None)  # left blank (or not on the page): the stored flow stays; null clears it
        if data.get("clear_server_headers"):
            body["serverHeaders"] = {}
        elif data.get("new_server_headers", "").strip():
            body["serverHeaders"] = parse_header_lines(data["new_server_headers"].splitlines())
        if data.get("clear_server_secret"):
            body["serverSecret"] = None
        elif data.get("new_server_secret"):
            body["serverSecret"] = data["new_server_secret"]
        body["redactPii"] = list(data.get("redact_pii_categories") or []) or redaction.OFF
        body.pop("keypad", None)
        if "keypad_timeout_ms" in self.data:  # the keypad fields were on the page (a form without them keeps it)
            timeout = data.get("keypad_timeout_ms")
            body["keypad"] = {
                "enabled": bool(data.get("keypad_enabled")),
                "timeoutMs": 2000 if timeout is None else timeout,
                "terminator": data.get("keypad_terminator") or "",
            }
        return body

    def save_through_service(self) -> Agent:
        """The save; a refusal about an entry of the handoffs list or a place in the flow names it on the
        list's or the flow's box."""
        try:
            return self._save()
        except DrfValidationError as exc:
            raise _places_named(validation_error(exc.detail)) from None
        except ApiError as exc:
            raise _places_named(exc) from None

    def _save(self) -> Agent:
        if self.instance._state.adding:
            organization = self.cleaned_data["organization"]
            return agent_create(organization=organization, data=parse(AgentWriteSerializer, self._wire()))
        body = {**self._wire(), "expectedUpdatedAt": self.cleaned_data.get("expected_updated_at") or ""}
        try:
            return agent_patch(
                organization=self.instance.organization,
                agent_id=str(self.instance.pk),
                data=parse(AgentPatchSerializer, body),
            )
        except ApiError as error:
            if error.status_code == 409 and "updatedAt" in error.extra:
                raise StaleEdit from None
            raise

    def _post_clean(self) -> None:
        submitted = dict(getattr(self, "cleaned_data", {}))
        try:
            super()._post_clean()
        except StaleEdit:
            self._show_current(submitted)

    def _show_current(self, submitted: dict[str, Any]) -> None:
        """Someone saved the agent since the form was opened: the form is shown again with the current
        values (and their updatedAt, so that the next save goes through), naming the fields that differ."""
        current = agent_get(organization=self.instance.organization, agent_id=str(self.instance.pk))
        shown = [name for name in SETTINGS if name in self.fields]
        differing = [
            str(self.fields[name].label)
            for name in shown
            # A blank analysis plan keeps the stored one: it differs from nothing.
            if submitted.get(name) != getattr(current, name)
            and not (
                name in ("analysis_plan", "voicemail", "interruption", "transfer", "handoffs", "flow")
                and not submitted.get(name)
            )
        ]
        self.data = {name: getattr(current, name) for name in shown}
        if "analysis_plan" in self.data:
            self.data["analysis_plan"] = json.dumps(self.data["analysis_plan"])  # the form field reads JSON text
        editors = {f"{part}_editor": self._editor(part) for part in STRUCTURED}
        keypad = keypad_of(current.keypad)
        self.data.update(keypad_timeout_ms=keypad["timeoutMs"], keypad_terminator=keypad["terminator"])
        if keypad["enabled"]:
            self.data["keypad_enabled"] = "on"
        for as_json in ("voicemail", "interruption", "transfer", "handoffs", "flow"):
            if as_json in self.data:
                self.data[as_json] = json.dumps(self.data[as_json])
        self.data.update(editors)
        self.data.update(
            structured.as_post_data(
                {
                    **structured.plan_decompose(current.analysis_plan or default_analysis_plan()),
                    **structured.voicemail_decompose(current.voicemail or {}),
                    **structured.interruption_decompose(current.interruption or {}),
                    **structured.transfer_decompose(current.transfer or {}),
                }
            )
        )
        self.data["expected_updated_at"] = iso(current.updated_at)
        changed = f" Your values differ in: {', '.join(differing)}." if differing else ""
        self.add_error(
            None,
            "Someone else saved this agent after you opened it; nothing was saved. The form now shows the "
            f"current values: make your changes again and save.{changed}",
        )


# The JSON boxes whose issues name a place inside them.
_NAMED_INSIDE = ("handoffs", "flow")


def _places_named(error: ApiError) -> ApiError:
    """The error with each issue inside the handoffs list (`handoffs.1.agentId`) or the flow
    (`flow.nodes.book.next`) on the box itself, its message naming the place (`1.agentId: ...`,
    `nodes.book.next: ...`), as the analysis plan's messages name their part."""
    if not error.issues or not any(key.partition(".")[0] in _NAMED_INSIDE and "." in key for key in error.issues):
        return error
    issues: dict[str, list[str]] = {}
    for key, said in error.issues.items():
        wire, _, inner = key.partition(".")
        if wire in _NAMED_INSIDE and inner:
            issues.setdefault(wire, []).extend(f"{inner}: {message}" for message in said)
        else:
            issues.setdefault(key, []).extend(said)
    return ApiError(error.message, status_code=error.status_code, code=error.code, issues=issues, extra=error.extra)


def _step_summary(node: dict[str, Any]) -> str:
    """What a stored flow step does, in a few words for the agent page."""
    kind = node["type"]
    if kind == "say":
        return f"says “{Truncator(node['text']).chars(80)}”"
    if kind == "collect":
        asked = []
        for field in node["fields"]:
            detail = field["type"]
            if field["type"] == "enum":
                detail += ": " + ", ".join(field["values"])
            elif field["min"] is not None and field["max"] is not None:
                detail += f" {field['min']} to {field['max']}"
            elif field["min"] is not None:
                detail += f" at least {field['min']}"
            elif field["max"] is not None:
                detail += f" at most {field['max']}"
            asked.append(f"{field['name']} ({detail}{'' if field['required'] else ', optional'})")
        return "asks for " + ", ".join(asked)
    if kind == "tool":
        return f"calls the tool {node['tool']}"
    if kind == "branch":
        return f"decides by {len(node['rules'])} rule{'s' if len(node['rules']) != 1 else ''}"
    if kind == "conversation":
        return f"talks freely: “{Truncator(node['instructions']).chars(80)}”"
    if kind == "handoff":
        return f"hands the call to the agent {node['agentId']}"
    if kind == "transfer":
        return f"transfers the call to {node['phoneNumber']} ({node['mode']})"
    return f"says “{Truncator(node['text']).chars(80)}” and ends the call" if node["text"] else "ends the call"


class McpToolsForm(forms.Form):
    tools = forms.MultipleChoiceField(
        label="MCP tools offered to this agent's calls",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="The tools of the organization's active MCP servers (connect servers on the MCP servers page).",
    )


def _selection_key(server_id: Any, tool_name: str) -> str:
    return f"{server_id} {tool_name}"


class AgentAdmin(admin.ModelAdmin):
    """The agent page without what other apps add to it. Registered by telephony/admin.py, the highest app
    the page needs (AgentPageAdmin adds the agent's phone numbers, documents and latest calls, and the
    number assignment pages). Writes and deletions go through agents.services, as the public API's do."""

    form = AgentForm
    list_display = ("name", "organization", "status", "agent_type", "language", "voice_name", "updated_at")
    list_filter = ("status", "agent_type", "language", "prompt_type", "ambient_sound", "organization__plan")
    search_fields = ("name", "id", "organization__name", "organization__id")
    list_select_related = ("organization",)
    autocomplete_fields = ("organization",)
    actions = ("activate", "deactivate")
    readonly_fields = (
        "id",
        "organization",
        "created_at",
        "updated_at",
        "ambient_sound_now",
        "disclosure_spoken",
        "server_header_names",
        "server_secret_set",
        "handoff_candidates",
        "flow_steps",
    )

    def get_readonly_fields(self, request: HttpRequest, obj: Agent | None = None) -> tuple[str, ...]:
        # A new agent's organization is chosen on the form; an agent never moves to another organization.
        return tuple(f for f in self.readonly_fields if f != "organization") if obj is None else self.readonly_fields

    def get_fieldsets(self, request: HttpRequest, obj: Agent | None = None) -> _FieldsetSpec:
        new = obj is None
        return [
            (None, {"fields": ["organization", "name"] if new else ["organization", "name", "status"]}),
            ("Prompt", {"fields": ["prompt_type", "identity", "instructions", "greeting_type", "static_greeting"]}),
            (
                "Voice and language",
                {
                    "fields": [
                        "language",
                        "voice_name",
                        "ai_identity_disclosure_template_id",
                        *([] if new else ["disclosure_spoken"]),
                    ]
                },
            ),
            (
                "Sounds",
                {
                    "fields": [
                        "background_sound",
                        "ambient_sound",
                        "ambient_sound_volume",
                        "ambient_sound_ducking",
                        *([] if new else ["ambient_sound_now"]),
                    ]
                },
            ),
            (
                "Server and tools",
                {
                    "fields": [
                        "agent_type",
                        "server_url",
                        *([] if new else ["server_header_names"]),
                        "new_server_headers",
                        "clear_server_headers",
                        *([] if new else ["server_secret_set"]),
                        "new_server_secret",
                        "clear_server_secret",
                    ]
                },
            ),
            ("Handoff", {"fields": ["handoff_phone_number"]}),
            ("Transfer to a person", {"fields": [*structured.TransferFields.base_fields, "transfer"]}),
            ("Handoffs to other agents", {"fields": ["handoffs", *([] if new else ["handoff_candidates"])]}),
            ("Flow", {"fields": ["flow", *([] if new else ["flow_steps"])]}),
            ("Privacy", {"fields": ["redact_pii_categories"]}),
            ("Post-call analysis", {"fields": [*structured.AnalysisPlanFields.base_fields, "analysis_plan"]}),
            ("Call endings", {"fields": ["end_call_enabled", "max_duration_seconds"]}),
            ("Phone keypad", {"fields": ["keypad_enabled", "keypad_timeout_ms", "keypad_terminator"]}),
            ("Recording", {"fields": ["recording_enabled"]}),
            ("Per-call variables", {"fields": ["time_zone"]}),
            (
                "Voicemail (outbound calls)",
                {"fields": [*structured.VoicemailFields.base_fields, "voicemail"]},
            ),
            ("Interruptions", {"fields": [*structured.InterruptionFields.base_fields, "interruption"]}),
            (
                "Record",
                {
                    "fields": ["expected_updated_at"]
                    if new
                    else ["id", "created_at", "updated_at", "expected_updated_at"]
                },
            ),
        ]

    def save_model(self, request: HttpRequest, obj: Agent, form: AgentForm, change: bool) -> None:
        """Nothing left to do: the form's validation saved the agent through the service."""

    def response_add(self, request: HttpRequest, obj: Agent, post_url_continue: str | None = None) -> HttpResponse:
        response = super().response_add(request, obj, post_url_continue)  # its success message
        if "_addanother" in request.POST or IS_POPUP_VAR in request.POST:
            return response
        # On to the agent's page, where its tools, documents and numbers are added.
        return HttpResponseRedirect(self._agent_url(obj))

    def delete_model(self, request: HttpRequest, obj: Agent) -> None:
        agent_delete(organization=obj.organization, agent_id=str(obj.pk))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Agent]) -> None:
        for agent in queryset.select_related("organization"):
            agent_delete(organization=agent.organization, agent_id=str(agent.pk))

    # --- activation ---------------------------------------------------------------------------------

    @admin.action(description="Activate the selected agents")
    def activate(self, request: HttpRequest, queryset: QuerySet[Agent]) -> None:
        self._set_status(request, queryset, AgentStatus.ACTIVE)

    @admin.action(description="Deactivate the selected agents")
    def deactivate(self, request: HttpRequest, queryset: QuerySet[Agent]) -> None:
        self._set_status(request, queryset, AgentStatus.INACTIVE)

    def _set_status(self, request: HttpRequest, queryset: QuerySet[Agent], status: str) -> None:
        """Each agent through agent_patch, as PATCH {status} does (the plan allowance is checked)."""
        done = []
        for agent in queryset.select_related("organization").order_by("created_at", "id"):
            if agent.status == status:
                continue
            try:
                data = {"status": status, "expected_updated_at": agent.updated_at}
                agent_patch(organization=agent.organization, agent_id=str(agent.pk), data=data)
            except ApiError as error:
                self.message_user(request, f"{agent.name}: not {status}: {error.message}", messages.ERROR)
            else:
                done.append(agent.name)
        if done:
            self.message_user(request, f"Now {status}: {', '.join(done)}.", messages.SUCCESS)

    # --- read-only lines ----------------------------------------------------------------------------

    @admin.display(description="Ambient sound now")
    def ambient_sound_now(self, obj: Agent) -> str:
        """What a call hears with the current plan (a downgrade keeps the selection saved but silent)."""
        if obj.ambient_sound == AmbientSound.NONE:
            return "none"
        if not ambient_sound_playable(obj):
            return f"{obj.ambient_sound} saved but not played: the plan ({obj.organization.plan.name}) has no ambient sounds"
        ducking = "ducked" if obj.ambient_sound_ducking else "not ducked"
        return f"{obj.ambient_sound} at {round(obj.ambient_sound_volume * 100)} %, {ducking}"

    # serverHeaders hold credentials of the customer's server (API keys, basic auth), as tool headers do:
    # staff see which headers are sent, never their values.
    @admin.display(description="Server headers")
    def server_header_names(self, obj: Agent) -> str:
        return header_lines(obj.server_headers)

    @admin.display(description="Server secret")
    def server_secret_set(self, obj: Agent) -> str:
        return "set (hidden)" if obj.server_secret else "none"

    @admin.display(description="Active agents to hand off to")
    def handoff_candidates(self, obj: Agent) -> str:
        """The ids the handoffs list can name: the organization's other active agents."""
        others = (
            Agent.objects.filter(organization_id=obj.organization_id, status=AgentStatus.ACTIVE)
            .exclude(pk=obj.pk)
            .order_by("name", "id")
            .values_list("name", "id")
        )
        return "; ".join(f"{name}: {pk}" for name, pk in others) or "none (activate another agent first)"

    @admin.display(description="Steps from the start")
    def flow_steps(self, obj: Agent) -> str:
        """The saved flow as a table of its steps, from the start (breadth first): id, type, what the step
        does and where it goes."""
        if obj.flow is None:
            return "No flow: the agent's prompt and tools run the conversation."
        flow = flow_of(obj.flow)
        if flow is None:
            return "The saved flow is not valid (written around the API): save a valid flow, or null."
        rows = [
            (
                f"{node_id} (start)" if node_id == flow["start"] else node_id,
                flow["nodes"][node_id]["type"],
                _step_summary(flow["nodes"][node_id]),
                "; ".join(f"{label} → {target}" for label, target in next_steps(flow["nodes"][node_id])) or "—",
            )
            for node_id in steps_in_order(flow)
        ]
        return format_html(
            '<table class="flow-steps"><thead><tr><th>Step</th><th>Type</th><th>What it does</th>'
            "<th>Goes to</th></tr></thead><tbody>{}</tbody></table>",
            format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", rows),
        )

    @admin.display(description="AI identity disclosure spoken")
    def disclosure_spoken(self, obj: Agent) -> str:
        disclosure = disclosure_for(
            template_id=obj.ai_identity_disclosure_template_id, language=obj.language, agent_name=obj.name
        )
        fallback = "" if disclosure.language == obj.language else f"; no {obj.language} templates, English is spoken"
        return f"\u201c{disclosure.text}\u201d (version {disclosure.version}{fallback})"

    # --- the agent page: its tools, documents, numbers and calls ------------------------------------

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        agent = self.get_object(request, unquote(object_id))
        related = self._related(agent) if agent is not None else {}
        if agent is not None:
            warn_destination(request, agent.server_url)
        return super().change_view(request, object_id, form_url, {**related, **(extra_context or {})})

    def _related(self, agent: Agent) -> dict[str, Any]:
        """What the page lists below the form (the registering subclass adds its apps' lists)."""
        return {"agent_tools": tool_list(agent=agent), "mcp_selections": mcp_tool_selection_list(agent=agent)}

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view
        return [
            path("<path:object_id>/mcp-tools/", view(self.mcp_tools_view), name="agents_agent_mcp_tools"),
            *super().get_urls(),
        ]

    def _editable_agent(self, request: HttpRequest, object_id: str) -> Agent:
        agent = self.get_object(request, unquote(object_id))
        if agent is None:
            raise Http404("Agent not found")
        if not self.has_change_permission(request, agent):
            raise PermissionDenied
        return agent

    def _agent_url(self, agent: Agent) -> str:
        return reverse("admin:agents_agent_change", args=[agent.pk])

    def _form_page(
        self, request: HttpRequest, agent: Agent, *, title: str, form: forms.Form, intro: str
    ) -> HttpResponse:
        context = {
            **self.admin_site.each_context(request),
            "title": title,
            "subtitle": agent.name,
            "opts": self.opts,
            "original": agent,
            "form": form,
            "intro": intro,
            "agent_url": self._agent_url(agent),
        }
        return TemplateResponse(request, "admin/agents/agent/form_page.html", context)

    def mcp_tools_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Choose the agent's MCP tools (PUT .../mcp-tools of the API): all or nothing."""
        agent = self._editable_agent(request, object_id)
        selected = {_selection_key(s["mcpServerId"], s["toolName"]): s for s in mcp_tool_selection_list(agent=agent)}
        servers = McpServer.objects.filter(organization_id=agent.organization_id).defer("credentials")
        choices = [
            (_selection_key(server.pk, tool.get("name")), f"{server.name}: {tool.get('name')}")
            for server in servers.filter(status=McpServerStatus.ACTIVE).order_by("name")
            for tool in server.tools
        ]
        offered = {key for key, _ in choices}
        choices += [
            (key, f"{s['serverName']}: {s['toolName']} (not available: server {s['serverStatus']})")
            for key, s in selected.items()
            if key not in offered
        ]
        form = McpToolsForm(request.POST or None, initial={"tools": list(selected)})
        tools_field = form.fields["tools"]
        assert isinstance(tools_field, forms.MultipleChoiceField)  # McpToolsForm.tools
        tools_field.choices = choices
        if request.method == "POST" and form.is_valid():
            chosen = form.cleaned_data["tools"]
            body = [
                {
                    "mcpServerId": key.split(" ", 1)[0],
                    "toolName": key.split(" ", 1)[1],
                    "enabled": selected[key]["enabled"] if key in selected else True,
                }
                for key in chosen
            ]
            saved = through_service(
                form,
                lambda: mcp_tools_replace(
                    organization=agent.organization, agent_id=str(agent.pk), items=parse_selections(body)
                ),
                fields={str(index): "tools" for index in range(len(body))},
            )
            if saved is not None:
                self.message_user(request, f"{agent.name} now has {len(body)} MCP tool(s).", messages.SUCCESS)
                return HttpResponseRedirect(self._agent_url(agent))
        intro = "The selected tools are offered to the model in this agent's calls, with the server's own schemas."
        return self._form_page(request, agent, title="Choose MCP tools", form=form, intro=intro)
