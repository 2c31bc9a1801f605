"""Mend text stored before the edge refused what cannot be stored (kit/text.py): a lone UTF-16 surrogate
(JSON's `\\ud800` escape, kept as such in a JSON column) becomes U+FFFD and NUL is dropped, in the text
and JSON fields of calls, messages, tool invocations, agent logs, webhook attempts, call batches and
their recipients, session variables, agent tests and runs, agents, tools and knowledge documents. Such a
row made every read of its list a 500 and stopped the upkeep of every organization.

Batched (keyset pages of BATCH rows by primary key, one bulk_update per page, so a large table is never
loaded whole nor read while it is written) and idempotent (mended text is left as it is: a second run
changes nothing). PostgreSQL refuses both in text and jsonb columns, so no such row can exist there: the
pass is skipped. A field another migration has removed is skipped too. Nothing to undo."""

from __future__ import annotations

from typing import Any

from django.db import migrations

from kit.text import storable_value

BATCH = 500

# (app label, model) -> its fields that hold text from outside (choice fields and secrets left out).
FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("calls", "Call"): ("agent_name", "summary", "variables", "metadata", "analysis"),
    ("calls", "CallMessage"): ("content",),
    ("calls", "ToolInvocation"): ("tool_name", "request", "response"),
    ("calls", "AgentLog"): ("content",),
    ("calls", "WebhookDelivery"): ("last_error",),
    ("calls", "WebhookAttempt"): ("error", "response_snippet"),
    ("telephony", "CallBatch"): ("name", "window", "retry"),
    ("telephony", "CallBatchRecipient"): ("to_number", "variables", "metadata"),
    ("realtime", "SessionVariables"): ("variables", "metadata"),
    ("realtime", "AgentTest"): ("name", "turns", "caller", "variables", "tool_mocks", "expect", "tags"),
    ("realtime", "TestRun"): ("error",),
    ("realtime", "TestAttempt"): ("name", "result"),
    ("agents", "Agent"): (
        "name",
        "identity",
        "instructions",
        "static_greeting",
        "server_headers",
        "redact_pii",
        "analysis_plan",
        "voicemail",
        "keypad",
    ),
    ("agents", "AgentTool"): ("name", "description", "parameter_schema", "response_schema", "tool_headers"),
    ("agents", "McpServer"): ("tools", "last_error"),
    ("knowledge", "KnowledgeDocument"): ("name", "description", "error", "pages"),
    ("knowledge", "KnowledgeChunk"): ("text", "heading_path"),
}


def mend_model(model: Any, fields: tuple[str, ...], using: str) -> int:
    """Mend `fields` of every row of `model`; returns how many rows changed."""
    present = {field.name for field in model._meta.concrete_fields}
    fields = tuple(name for name in fields if name in present)
    if not fields:
        return 0
    changed_rows = 0
    last = None
    while True:
        page = model._default_manager.using(using).only("pk", *fields).order_by("pk")
        if last is not None:
            page = page.filter(pk__gt=last)
        rows = list(page[:BATCH])
        if not rows:
            return changed_rows
        last = rows[-1].pk
        changed = []
        for row in rows:
            dirty = False
            for name in fields:
                value = getattr(row, name)
                fixed = storable_value(value)
                if fixed != value:
                    setattr(row, name, fixed)
                    dirty = True
            if dirty:
                changed.append(row)
        if changed:
            model._default_manager.using(using).bulk_update(changed, fields, batch_size=BATCH)
            changed_rows += len(changed)


def mend(apps: Any, schema_editor: Any) -> int:
    """Mend every table of FIELDS; returns how many rows changed."""
    connection = schema_editor.connection
    if connection.vendor == "postgresql":
        return 0  # PostgreSQL stores neither: nothing to mend
    total = 0
    for (app_label, model_name), fields in FIELDS.items():
        try:
            model = apps.get_model(app_label, model_name)
        except LookupError:
            continue  # removed by a later migration of its app
        total += mend_model(model, fields, connection.alias)
    return total


class Migration(migrations.Migration):
    dependencies = [
        ("calls", "0012_delivery_cancelled"),
        ("telephony", "0004_agent_list_version"),
        ("realtime", "0005_test_attempt_rows"),
        ("agents", "0008_outbound"),
        ("knowledge", "0004_heartbeat"),
    ]

    operations = [migrations.RunPython(mend, migrations.RunPython.noop, elidable=True)]
