"""When an organization's agent list changes: database triggers count every change to the rows the list is
made of (AgentListVersion), so that a list rendered earlier is served again only while nothing it shows
has changed (api/agents/selectors.py).

The triggers see every write, whoever makes it: the API, the dashboard, a bulk update, a cascade, another
server process. What the list shows of calls (callsToday, successRate) changes with every call and with
the clock, so it is read afresh for each request and not counted here.

PostgreSQL: constraint triggers deferred to commit, so that the counter's row is locked at the very end of
a transaction, after every lock it takes on its own (no lock-order deadlock with another writer), and
a transaction that rolls back counts nothing. SQLite has one writer at a time: plain triggers.

The triggers are (re)installed after every `migrate` (post_migrate, telephony/apps.py), not by a migration:
on SQLite a later migration that alters one of these tables rebuilds it and drops its triggers.
"""

from __future__ import annotations

from typing import Any

from django.db import connection, connections

from telephony.models import AgentListVersion

VERSION_TABLE = AgentListVersion._meta.db_table
# The triggers' name: a new one when what they do changes, so that a database migrated earlier gets them.
TRIGGER = "agent_list_v1"

# (table, the columns whose change the list shows or None for every column, how the row names its organization)
WATCHED: tuple[tuple[str, tuple[str, ...] | None, str], ...] = (
    ("agents_agent", None, "{row}.organization_id"),
    ("agents_agenttool", ("agent_id",), "(SELECT organization_id FROM agents_agent WHERE id = {row}.agent_id)"),
    ("knowledge_document", ("agent_id", "organization_id"), "{row}.organization_id"),
    (
        "telephony_phonenumber",
        ("assigned_agent_id", "assigned_at", "phone_number", "organization_id"),
        "{row}.organization_id",
    ),
)

_POSTGRES_BUMP = f"""
CREATE OR REPLACE FUNCTION agent_list_bump(org uuid) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF org IS NOT NULL THEN
        INSERT INTO {VERSION_TABLE} (organization_id, version) VALUES (org, 1)
        ON CONFLICT (organization_id) DO UPDATE SET version = {VERSION_TABLE}.version + 1;
    END IF;
END $$"""  # noqa: S608 - built from this module's constants, no input


def _postgres_statements() -> list[str]:
    statements = [_POSTGRES_BUMP]
    for table, columns, organization in WATCHED:
        function = f"agent_list_changed_{table}"
        old, new = organization.format(row="OLD"), organization.format(row="NEW")
        statements += [
            f"""CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN PERFORM agent_list_bump({old}); END IF;
    IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND {new} IS DISTINCT FROM {old}) THEN
        PERFORM agent_list_bump({new});
    END IF;
    RETURN NULL;
END $$""",
            f"DROP TRIGGER IF EXISTS {TRIGGER} ON {table}",
            f"CREATE CONSTRAINT TRIGGER {TRIGGER} AFTER INSERT OR DELETE OR UPDATE"
            f"{' OF ' + ', '.join(columns) if columns else ''} ON {table} "
            f"DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {function}()",
        ]
    return statements


def _sqlite_bump(organization: str, unless: str = "") -> str:
    # INSERT ... SELECT: no row when the organization is unknown (a tool whose agent is being deleted);
    # the WHERE also keeps SQLite from reading ON CONFLICT as part of the SELECT.
    also = f" AND org IS NOT ({unless})" if unless else ""
    return (
        f"INSERT INTO {VERSION_TABLE} (organization_id, version) SELECT org, 1 FROM (SELECT {organization} AS org) "  # noqa: S608 - this module's constants
        f"WHERE org IS NOT NULL{also} ON CONFLICT (organization_id) DO UPDATE SET version = version + 1;"
    )


def _sqlite_statements() -> list[str]:
    statements = []
    for table, columns, organization in WATCHED:
        old, new = organization.format(row="old"), organization.format(row="new")
        of = f" OF {', '.join(columns)}" if columns else ""
        for event, body in (
            ("INSERT", _sqlite_bump(new)),
            ("DELETE", _sqlite_bump(old)),
            (f"UPDATE{of}", _sqlite_bump(old) + " " + _sqlite_bump(new, unless=old)),
        ):
            name = _sqlite_trigger(table, event)
            statements += [
                f"DROP TRIGGER IF EXISTS {name}",
                f"CREATE TRIGGER {name} AFTER {event} ON {table} BEGIN {body} END",
            ]
    return statements


def _sqlite_trigger(table: str, event: str) -> str:
    return f"{TRIGGER}_{table}_{event.split()[0].lower()}"


def _installed(cursor: Any, vendor: str) -> bool:
    """Whether every trigger is already there (a `flush`, which every transactional test ends with, sends
    post_migrate too: it should not take the tables' locks to install them again)."""
    if vendor == "postgresql":
        cursor.execute("SELECT tgrelid::regclass::text FROM pg_trigger WHERE tgname = %s", [TRIGGER])
        return {table for table, _, _ in WATCHED} <= {row[0] for row in cursor.fetchall()}
    cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE %s", [f"{TRIGGER}_%"])
    expected = {_sqlite_trigger(table, event) for table, _, _ in WATCHED for event in ("INSERT", "DELETE", "UPDATE")}
    return expected <= {row[0] for row in cursor.fetchall()}


def install_triggers(**kwargs: Any) -> None:
    """post_migrate: install the triggers on the database just migrated, unless they are all there."""
    target = connections[kwargs.get("using", "default")]
    statements = {"postgresql": _postgres_statements, "sqlite": _sqlite_statements}.get(target.vendor)
    if statements is None:
        return
    with target.cursor() as cursor:
        if _installed(cursor, target.vendor):
            return
        for statement in statements():
            cursor.execute(statement)


def list_version(organization_id: Any) -> int | None:
    """How many changes the organization's agent list has counted, or None inside an open transaction:
    its own changes are counted only when it commits (PostgreSQL), so a list read there is made afresh."""
    if connection.in_atomic_block:
        return None
    version = AgentListVersion.objects.filter(pk=organization_id).values_list("version", flat=True).first()
    return version or 0
