"""Transcript search of the dashboard's calls list (calls.selectors.call_search), per backend.

PostgreSQL: a GIN index on the expression Django's SearchVector("content", config="simple") compiles to,
so that a word search reads the index instead of every message. SQLite: an FTS5 table with the trigram
tokenizer over the message text (external content, keyed by the message table's rowid), kept in step by
triggers: substring search through an index. Django's models do not know these objects; only
calls/selectors.py reads them. A later migration that alters calls_callmessage on SQLite rebuilds the
table (new rowids, no triggers): such a migration must run this one's forward step again.
"""

from django.db import migrations

POSTGRES_FORWARD = [
    "CREATE INDEX IF NOT EXISTS callmessage_content_search ON calls_callmessage "
    "USING gin (to_tsvector('simple'::regconfig, COALESCE(content, '')))",
]
POSTGRES_BACKWARD = ["DROP INDEX IF EXISTS callmessage_content_search"]
SQLITE_FORWARD = [
    "CREATE VIRTUAL TABLE calls_callmessage_fts USING fts5("
    "content, content='calls_callmessage', content_rowid='rowid', tokenize='trigram')",
    "CREATE TRIGGER calls_callmessage_fts_ai AFTER INSERT ON calls_callmessage BEGIN "
    "INSERT INTO calls_callmessage_fts(rowid, content) VALUES (new.rowid, new.content); END",
    "CREATE TRIGGER calls_callmessage_fts_ad AFTER DELETE ON calls_callmessage BEGIN "
    "INSERT INTO calls_callmessage_fts(calls_callmessage_fts, rowid, content) "
    "VALUES ('delete', old.rowid, old.content); END",
    "CREATE TRIGGER calls_callmessage_fts_au AFTER UPDATE ON calls_callmessage BEGIN "
    "INSERT INTO calls_callmessage_fts(calls_callmessage_fts, rowid, content) "
    "VALUES ('delete', old.rowid, old.content); "
    "INSERT INTO calls_callmessage_fts(rowid, content) VALUES (new.rowid, new.content); END",
    "INSERT INTO calls_callmessage_fts(calls_callmessage_fts) VALUES ('rebuild')",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS calls_callmessage_fts_ai",
    "DROP TRIGGER IF EXISTS calls_callmessage_fts_ad",
    "DROP TRIGGER IF EXISTS calls_callmessage_fts_au",
    "DROP TABLE IF EXISTS calls_callmessage_fts",
]


def _run(statements: dict[str, list[str]]):
    def run(apps, schema_editor) -> None:
        for statement in statements.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("calls", "0004_heartbeat")]

    operations = [
        migrations.RunPython(
            _run({"postgresql": POSTGRES_FORWARD, "sqlite": SQLITE_FORWARD}),
            _run({"postgresql": POSTGRES_BACKWARD, "sqlite": SQLITE_BACKWARD}),
        )
    ]
