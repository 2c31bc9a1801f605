"""Keyword side of the hybrid search: database full-text over chunk text, per backend.

PostgreSQL: a stored generated tsvector column with a GIN index. SQLite: an FTS5 table over the chunk
table (external content) kept in step by triggers. Django's models do not know these objects; only
knowledge/search.py reads them. A later migration that alters knowledge_chunk on SQLite rebuilds the
table and drops the triggers: such a migration must run this one's forward step again.
"""

from django.db import migrations

POSTGRES_FORWARD = [
    "ALTER TABLE knowledge_chunk ADD COLUMN search_vector tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english', text)) STORED",
    "CREATE INDEX knowledge_chunk_search_gin ON knowledge_chunk USING gin (search_vector)",
]
POSTGRES_BACKWARD = [
    "DROP INDEX IF EXISTS knowledge_chunk_search_gin",
    "ALTER TABLE knowledge_chunk DROP COLUMN IF EXISTS search_vector",
]
SQLITE_FORWARD = [
    "CREATE VIRTUAL TABLE knowledge_chunk_fts USING fts5("
    "text, content='knowledge_chunk', content_rowid='id', tokenize='porter unicode61')",
    "CREATE TRIGGER knowledge_chunk_fts_ai AFTER INSERT ON knowledge_chunk BEGIN "
    "INSERT INTO knowledge_chunk_fts(rowid, text) VALUES (new.id, new.text); END",
    "CREATE TRIGGER knowledge_chunk_fts_ad AFTER DELETE ON knowledge_chunk BEGIN "
    "INSERT INTO knowledge_chunk_fts(knowledge_chunk_fts, rowid, text) VALUES ('delete', old.id, old.text); END",
    "CREATE TRIGGER knowledge_chunk_fts_au AFTER UPDATE ON knowledge_chunk BEGIN "
    "INSERT INTO knowledge_chunk_fts(knowledge_chunk_fts, rowid, text) VALUES ('delete', old.id, old.text); "
    "INSERT INTO knowledge_chunk_fts(rowid, text) VALUES (new.id, new.text); END",
    "INSERT INTO knowledge_chunk_fts(knowledge_chunk_fts) VALUES ('rebuild')",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS knowledge_chunk_fts_ai",
    "DROP TRIGGER IF EXISTS knowledge_chunk_fts_ad",
    "DROP TRIGGER IF EXISTS knowledge_chunk_fts_au",
    "DROP TABLE IF EXISTS knowledge_chunk_fts",
]


def _run(statements: dict[str, list[str]]):
    def run(apps, schema_editor) -> None:
        for statement in statements.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0001_initial")]

    operations = [
        migrations.RunPython(
            _run({"postgresql": POSTGRES_FORWARD, "sqlite": SQLITE_FORWARD}),
            _run({"postgresql": POSTGRES_BACKWARD, "sqlite": SQLITE_BACKWARD}),
        )
    ]
