"""The dashboard's structured editors of an agent's JSON settings (agents/admin.py) and of agent tests
(realtime/agent_tests/admin.py): real fields (checkboxes, selects, numbers, small tables of rows) that
compose the same JSON the API takes, so that saving goes through the same service and serializer as the
API and a refusal is shown on the field it names. The JSON stays available: each part has an editor
choice ("form" or "json"), and a form posted without it (an older page, a script) is read as JSON.

- `RowsField` / `RowsWidget`: a table of rows (a structured-data field, a caller turn, a mocked tool), one
  input per column named `<field>-<row>-<column>`; blank rows are left out, and the page's script
  (agents/static/agents/structured-forms.js) adds and removes rows (without it, one blank row is offered).
- the four agent parts: `analysis_plan`, `voicemail`, `interruption`, `transfer`: each with its form fields, the
  value they compose (`compose`), the values they show for a stored setting (`decompose`) and where
  the API's messages about it go (`field_of_message`, `field_of_issue`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django import forms

from agents.analysis_plan import SCALES
from agents.interruption import MIN_WORDS_RANGE, MODES, RESUME_AFTER_MS_RANGE
from agents.transfer import BRIEFINGS, RING_TIMEOUT_SECONDS_RANGE
from agents.transfer import MAX_MESSAGE_CHARS as MAX_TRANSFER_MESSAGE_CHARS
from agents.transfer import MODES as TRANSFER_MODES
from agents.voicemail import ACTIONS, DETECTIONS, MAX_MESSAGE_CHARS

FORM = "form"
JSON = "json"
EDITORS = ((FORM, "Form"), (JSON, "JSON"))
SCRIPT = "agents/structured-forms.js"
STYLE = "agents/structured-forms.css"


# --- rows -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """One column of a rows table: `kind` text, textarea, number, select or checkbox."""

    key: str
    label: str
    kind: str = "text"
    choices: Sequence[tuple[str, str]] = ()
    placeholder: str = ""
    size: int = 20


@dataclass
class Cell:
    column: Column
    name: str
    value: Any


@dataclass
class Row:
    index: str
    cells: list[Cell] = field(default_factory=list)


class RowsWidget(forms.Widget):
    """A table of rows; its value is a list of {column: text} (checkbox columns: True/False)."""

    template_name = "admin/agents/widgets/rows.html"

    def __init__(self, columns: Sequence[Column], *, add_label: str = "Add a row", attrs: Any = None) -> None:
        super().__init__(attrs)
        self.columns = list(columns)
        self.add_label = add_label

    def _row(self, name: str, index: str, values: Mapping[str, Any]) -> Row:
        return Row(
            index=index,
            cells=[Cell(column, f"{name}-{index}-{column.key}", values.get(column.key, "")) for column in self.columns],
        )

    def get_context(self, name: str, value: Any, attrs: Any) -> dict[str, Any]:
        context = super().get_context(name, value, attrs)
        rows = [row for row in (value if isinstance(value, list) else []) if isinstance(row, dict)]
        shown = [self._row(name, str(index), row) for index, row in enumerate(rows)]
        shown.append(self._row(name, str(len(rows)), {}))  # a blank row to fill (the script adds more)
        context["widget"].update(
            columns=self.columns,
            rows=shown,
            template_row=self._row(name, "__index__", {}),
            add_label=self.add_label,
        )
        return context

    def value_from_datadict(self, data: Any, files: Any, name: str) -> list[dict[str, Any]]:
        pattern = re.compile(rf"{re.escape(name)}-(\d+)-(\w+)")
        indices = sorted({int(match.group(1)) for key in data if (match := pattern.fullmatch(key))})
        rows = []
        for index in indices:
            row: dict[str, Any] = {}
            for column in self.columns:
                raw = data.get(f"{name}-{index}-{column.key}")
                row[column.key] = bool(raw) if column.kind == "checkbox" else str(raw or "").strip()
            # A row is blank when its typed cells are (a select and a checkbox always hold a value).
            if any(row[column.key] for column in self.columns if column.kind in ("text", "textarea", "number")):
                rows.append(row)
        return rows

    def value_omitted_from_data(self, data: Any, files: Any, name: str) -> bool:
        return False  # no row is a value too: an empty table


class RowsField(forms.Field):
    widget = RowsWidget

    def __init__(self, *, columns: Sequence[Column], add_label: str = "Add a row", **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        super().__init__(widget=RowsWidget(columns, add_label=add_label), **kwargs)

    def to_python(self, value: Any) -> list[dict[str, Any]]:
        return list(value) if isinstance(value, list) else []

    def has_changed(self, initial: Any, data: Any) -> bool:
        return bool(initial != data)


def json_or_text(text: str) -> Any:
    """A cell holding a JSON value: parsed when it is JSON, else the text itself (a plain word is a string)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def shown_json(value: Any) -> str:
    """A JSON value in a cell: a string as itself, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def lines_of(text: str) -> list[str]:
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


class TriState(forms.ChoiceField):
    """A yes/no expectation that may also be left unchecked: "" (not checked), "yes" or "no"."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        super().__init__(choices=[("", "not checked"), ("yes", "yes"), ("no", "no")], **kwargs)


def tri_state(value: Any) -> str:
    return "" if value is None else ("yes" if value else "no")


def tri_value(text: str) -> bool | None:
    return {"yes": True, "no": False}.get(text or "")


def editor_field(part: str, label: str) -> forms.ChoiceField:
    return forms.ChoiceField(
        label=f"Edit {label} as",
        choices=EDITORS,
        required=False,
        initial=FORM,
        widget=forms.RadioSelect(attrs={"class": "editor-choice", "data-part": part}),
        help_text="The form below, or the JSON the API takes (power users; what the other shows is the saved value).",
    )


def editor_of(form: forms.BaseForm, part: str) -> str:
    """Which editor a posted form used for `part`: JSON unless the page said form."""
    return FORM if form.data.get(f"{part}_editor") == FORM else JSON


# --- the analysis plan ------------------------------------------------------------------------------

SCHEMA_TYPES = ("string", "number", "integer", "boolean")
SCHEMA_COLUMNS = (
    Column("name", "Field name", placeholder="appointment_date", size=18),
    Column("type", "Type", kind="select", choices=[(kind, kind) for kind in SCHEMA_TYPES]),
    Column("description", "What to extract", placeholder="The date the caller asked for", size=40),
    Column("required", "Required", kind="checkbox"),
)


class AnalysisPlanFields(forms.Form):
    """The form fields of the agent's analysis plan (a mixin of the agent form)."""

    analysis_plan_editor = editor_field("analysis_plan", "the analysis plan")
    plan_summary_enabled = forms.BooleanField(label="Write a summary of each call", required=False)
    plan_summary_prompt = forms.CharField(
        label="Summary prompt",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 80}),
        help_text="Optional: how to summarize (blank: the default).",
    )
    plan_structured_enabled = forms.BooleanField(label="Extract structured data", required=False)
    plan_structured_fields = RowsField(
        label="Fields to extract",
        columns=SCHEMA_COLUMNS,
        add_label="Add a field",
        help_text="Each field the call's data holds, with what to look for (it tells the model, or the "
        "embedded extractor). A schema with nested objects or lists is edited as JSON.",
    )
    plan_structured_prompt = forms.CharField(
        label="Extraction prompt",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 80}),
    )
    plan_success_enabled = forms.BooleanField(label="Evaluate whether the call succeeded", required=False)
    plan_success_rubric = forms.CharField(
        label="Rubric",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 80}),
        help_text="What a successful call achieves (required to evaluate).",
    )
    plan_success_scale = forms.ChoiceField(
        label="Scale", required=False, choices=[(scale, scale) for scale in SCALES], initial=SCALES[0]
    )


PLAN_PLACES = {
    "summary.prompt": "plan_summary_prompt",
    "summary": "plan_summary_enabled",
    "structuredData.schema": "plan_structured_fields",
    "structuredData.prompt": "plan_structured_prompt",
    "structuredData": "plan_structured_enabled",
    "successEvaluation.rubric": "plan_success_rubric",
    "successEvaluation.scale": "plan_success_scale",
    "successEvaluation": "plan_success_enabled",
}


def schema_rows(schema: Any) -> list[dict[str, Any]] | None:
    """The table's rows for a stored schema, or None when the table cannot show all of it."""
    if schema is None:
        return []
    if not isinstance(schema, dict) or set(schema) - {"type", "properties", "required"}:
        return None
    properties = schema.get("properties")
    required = schema.get("required", [])
    if schema.get("type") != "object" or not isinstance(properties, dict) or not isinstance(required, list):
        return None
    rows = []
    for name, prop in properties.items():
        if not isinstance(prop, dict) or set(prop) - {"type", "description"} or prop.get("type") not in SCHEMA_TYPES:
            return None
        rows.append(
            {
                "name": name,
                "type": prop["type"],
                "description": prop.get("description", ""),
                "required": name in required,
            }
        )
    if set(required) - set(properties):
        return None
    return rows


def schema_of(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not rows:
        return None
    properties = {
        row["name"]: {"type": row.get("type") or "string", "description": row.get("description", "")} for row in rows
    }
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = [row["name"] for row in rows if row.get("required")]
    if required:
        schema["required"] = required
    return schema


def plan_compose(data: Mapping[str, Any], stored: Mapping[str, Any]) -> dict[str, Any]:
    """The plan the form's fields say (a schema the table cannot show stays as stored while no row is given)."""
    rows = data.get("plan_structured_fields") or []
    stored_schema = (stored.get("structuredData") or {}).get("schema")
    schema = schema_of(rows) if rows or schema_rows(stored_schema) is not None else stored_schema
    return {
        "summary": {
            "enabled": bool(data.get("plan_summary_enabled")),
            "prompt": data.get("plan_summary_prompt") or None,
        },
        "structuredData": {
            "enabled": bool(data.get("plan_structured_enabled")),
            "schema": schema,
            "prompt": data.get("plan_structured_prompt") or None,
        },
        "successEvaluation": {
            "enabled": bool(data.get("plan_success_enabled")),
            "rubric": data.get("plan_success_rubric") or None,
            "scale": data.get("plan_success_scale") or SCALES[0],
        },
    }


def plan_decompose(plan: Mapping[str, Any]) -> dict[str, Any]:
    summary = plan.get("summary") or {}
    structured = plan.get("structuredData") or {}
    success = plan.get("successEvaluation") or {}
    return {
        "plan_summary_enabled": bool(summary.get("enabled")),
        "plan_summary_prompt": summary.get("prompt") or "",
        "plan_structured_enabled": bool(structured.get("enabled")),
        "plan_structured_fields": schema_rows(structured.get("schema")) or [],
        "plan_structured_prompt": structured.get("prompt") or "",
        "plan_success_enabled": bool(success.get("enabled")),
        "plan_success_rubric": success.get("rubric") or "",
        "plan_success_scale": success.get("scale") or SCALES[0],
    }


# --- voicemail --------------------------------------------------------------------------------------


class VoicemailFields(forms.Form):
    """The form fields of the agent's voicemail setting (a mixin of the agent form)."""

    voicemail_editor = editor_field("voicemail", "the voicemail setting")
    voicemail_detection = forms.ChoiceField(
        label="Answering-machine detection",
        required=False,
        choices=[("off", "off: the agent greets whoever answers"), ("provider", "provider: the carrier's")],
        initial=DETECTIONS[0],
    )
    voicemail_action = forms.ChoiceField(
        label="On a machine",
        required=False,
        choices=[("hang-up", "hang up"), ("leave-message", "leave a message after the beep")],
        initial=ACTIONS[0],
    )
    voicemail_message = forms.CharField(
        label="Voicemail message",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 80}),
        help_text=f"What the agent leaves on the machine ({{{{variables}}}} filled in; at most "
        f"{MAX_MESSAGE_CHARS} characters); required to leave a message.",
    )


VOICEMAIL_PLACES = {"detection": "voicemail_detection", "action": "voicemail_action", "message": "voicemail_message"}


def voicemail_compose(data: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "detection": data.get("voicemail_detection") or DETECTIONS[0],
        "action": data.get("voicemail_action") or ACTIONS[0],
        "message": data.get("voicemail_message") or "",
    }


def voicemail_decompose(setting: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "voicemail_detection": setting.get("detection") or DETECTIONS[0],
        "voicemail_action": setting.get("action") or ACTIONS[0],
        "voicemail_message": setting.get("message") or "",
    }


# --- interruptions ----------------------------------------------------------------------------------


class InterruptionFields(forms.Form):
    """The form fields of the agent's interruption setting (a mixin of the agent form)."""

    interruption_editor = editor_field("interruption", "the interruption setting")
    interruption_mode = forms.ChoiceField(
        label="Interruption mode",
        required=False,
        choices=[
            ("adaptive", "adaptive: real words cut the agent; a cough or an okay does not"),
            ("vad", "vad: any speech cuts the agent"),
            ("off", "off: the caller cannot cut the agent"),
        ],
        initial=MODES[0],
    )
    interruption_min_words = forms.IntegerField(
        label="Words that make an interruption",
        required=False,
        initial=1,
        widget=forms.NumberInput(attrs={"min": MIN_WORDS_RANGE[0], "max": MIN_WORDS_RANGE[1]}),
        help_text=f"From {MIN_WORDS_RANGE[0]} to {MIN_WORDS_RANGE[1]} (adaptive): words that are not a backchannel.",
    )
    interruption_default_backchannels = forms.BooleanField(
        label="Use the language's backchannels", required=False, initial=True
    )
    interruption_backchannels = forms.CharField(
        label="Backchannels",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 40}),
        help_text="One phrase a line (\u201cokay\u201d, \u201cmm-hmm\u201d) that acknowledges without taking the "
        "turn; used when the language's list is unchecked (none given: no backchannels).",
    )
    interruption_resume_after_ms = forms.IntegerField(
        label="Resume after (ms)",
        required=False,
        initial=400,
        widget=forms.NumberInput(attrs={"min": RESUME_AFTER_MS_RANGE[0], "max": RESUME_AFTER_MS_RANGE[1]}),
        help_text=f"From {RESUME_AFTER_MS_RANGE[0]} to {RESUME_AFTER_MS_RANGE[1]} (vad): how long after a "
        "false interruption the agent resumes its sentence.",
    )


INTERRUPTION_PLACES = {
    "mode": "interruption_mode",
    "minWords": "interruption_min_words",
    "backchannels": "interruption_backchannels",
    "resumeAfterMs": "interruption_resume_after_ms",
}


def interruption_compose(data: Mapping[str, Any]) -> dict[str, Any]:
    """A number left blank is left out (its default); so is nothing."""
    setting: dict[str, Any] = {"mode": data.get("interruption_mode") or MODES[0]}
    for key, name in (("minWords", "interruption_min_words"), ("resumeAfterMs", "interruption_resume_after_ms")):
        if data.get(name) is not None:
            setting[key] = data[name]
    default_list = data.get("interruption_default_backchannels")
    setting["backchannels"] = None if default_list else lines_of(data.get("interruption_backchannels") or "")
    return setting


def interruption_decompose(setting: Mapping[str, Any]) -> dict[str, Any]:
    backchannels = setting.get("backchannels")
    return {
        "interruption_mode": setting.get("mode") or MODES[0],
        "interruption_min_words": setting.get("minWords"),
        "interruption_default_backchannels": backchannels is None,
        "interruption_backchannels": "\n".join(backchannels or []),
        "interruption_resume_after_ms": setting.get("resumeAfterMs"),
    }


# --- transfer to a person --------------------------------------------------------------------------


class TransferFields(forms.Form):
    """The form fields of the agent's transfer setting (a mixin of the agent form)."""

    transfer_editor = editor_field("transfer", "the transfer setting")
    transfer_mode = forms.ChoiceField(
        label="Transfer mode",
        required=False,
        choices=[
            ("cold", "cold: hand the call to the number at once"),
            ("warm", "warm: call the person first and brief them; they press 1 to take the call"),
        ],
        initial=TRANSFER_MODES[0],
    )
    transfer_briefing = forms.ChoiceField(
        label="Briefing (warm)",
        required=False,
        choices=[
            ("summary", "summary: the agent's brain sums up the call so far"),
            ("static", "static: the message below"),
        ],
        initial=BRIEFINGS[0],
    )
    transfer_message = forms.CharField(
        label="Briefing message",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 80}),
        help_text=f"What the person hears before taking the call ({{{{variables}}}} filled in; at most "
        f"{MAX_TRANSFER_MESSAGE_CHARS} characters); required with the static briefing.",
    )
    transfer_ring_timeout_seconds = forms.IntegerField(
        label="Ring time (seconds)",
        required=False,
        initial=30,
        widget=forms.NumberInput(attrs={"min": RING_TIMEOUT_SECONDS_RANGE[0], "max": RING_TIMEOUT_SECONDS_RANGE[1]}),
        help_text=f"From {RING_TIMEOUT_SECONDS_RANGE[0]} to {RING_TIMEOUT_SECONDS_RANGE[1]} (warm): how long the "
        "person's phone rings before the caller is back with the agent.",
    )


TRANSFER_PLACES = {
    "mode": "transfer_mode",
    "briefing": "transfer_briefing",
    "message": "transfer_message",
    "ringTimeoutSeconds": "transfer_ring_timeout_seconds",
}


def transfer_compose(data: Mapping[str, Any]) -> dict[str, Any]:
    """A ring time left blank is left out (its default)."""
    setting: dict[str, Any] = {
        "mode": data.get("transfer_mode") or TRANSFER_MODES[0],
        "briefing": data.get("transfer_briefing") or BRIEFINGS[0],
        "message": data.get("transfer_message") or "",
    }
    if data.get("transfer_ring_timeout_seconds") is not None:
        setting["ringTimeoutSeconds"] = data["transfer_ring_timeout_seconds"]
    return setting


def transfer_decompose(setting: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "transfer_mode": setting.get("mode") or TRANSFER_MODES[0],
        "transfer_briefing": setting.get("briefing") or BRIEFINGS[0],
        "transfer_message": setting.get("message") or "",
        "transfer_ring_timeout_seconds": setting.get("ringTimeoutSeconds"),
    }


# --- where a message goes ---------------------------------------------------------------------------

PLACES = {
    "analysis_plan": PLAN_PLACES,
    "voicemail": VOICEMAIL_PLACES,
    "interruption": INTERRUPTION_PLACES,
    "transfer": TRANSFER_PLACES,
}


def field_of_message(part: str, message: str) -> str | None:
    """The form field a message of the API about `part` concerns, by the key it starts with
    ("structuredData.schema: ...", "action: ..."); None when it names none."""
    places = PLACES[part]
    key = message.split(":", 1)[0].strip() if ":" in message else ""
    while key:
        if key in places:
            return places[key]
        key = key.rsplit(".", 1)[0] if "." in key else ""
    return None


def field_of_issue(part: str, key: str) -> str | None:
    """The form field an issue keyed inside `part` concerns (`interruption.backchannels.2`)."""
    places = PLACES[part]
    inner = key.split(".", 1)[1] if "." in key else ""
    while inner:
        if inner in places:
            return places[inner]
        inner = inner.rsplit(".", 1)[0] if "." in inner else ""
    return None


def as_post_data(values: Mapping[str, Any]) -> dict[str, Any]:
    """Field values as a browser posts them (for a form shown again with other values)."""
    data: dict[str, Any] = {}
    for name, value in values.items():
        if isinstance(value, bool):
            if value:
                data[name] = "on"
        elif isinstance(value, list):
            for index, row in enumerate(value):
                for key, cell in row.items():
                    if cell is True:
                        data[f"{name}-{index}-{key}"] = "on"
                    elif cell not in (False, None):
                        data[f"{name}-{index}-{key}"] = cell
        elif value is not None:
            data[name] = value
    return data
