"""Transcript search of the dashboard's calls list (calls.selectors.call_search).

PostgreSQL: a GIN index on the expression Django's SearchVector("content", config="simple") compiles to,
so that a word search reads the index instead of every message. Other databases search by substring and
need nothing here.
"""

from django.db import migrations

FORWARD = (
    "CREATE INDEX IF NOT EXISTS callmessage_content_search ON calls_callmessage "
    "USING gin (to_tsvector('simple'::regconfig, COALESCE(content, '')))"
)
BACKWARD = "DROP INDEX IF EXISTS callmessage_content_search"


def _on_postgresql(statement: str):
    def run(apps, schema_editor) -> None:
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("calls", "0004_heartbeat")]

    operations = [migrations.RunPython(_on_postgresql(FORWARD), _on_postgresql(BACKWARD))]
