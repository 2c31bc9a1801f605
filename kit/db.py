"""Database expressions shared by list selectors, and the one lookup of a row named by an id in a URL."""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any, TypeVar
from uuid import UUID

import orjson
from django.db import connections
from django.db.models import CharField, Func, Model, QuerySet

from kit.errors import ApiError
from kit.validation import parse_uuid

M = TypeVar("M", bound=Model)


class IsoUtc(Func):
    """A timestamp rendered by the database as ISO 8601 UTC with microseconds, e.g.
    2026-11-22T19:03:11.123456Z: the same text as kit.fields.iso(), without building a Python
    datetime per row (lists of thousands of rows spend most of their time there otherwise)."""

    output_field = CharField()

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        template = "to_char(%(expressions)s AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
        return self.as_sql(compiler, connection, template=template, **extra)

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        # Django stores UTC as 'YYYY-MM-DD HH:MM:SS[.ffffff]'; the fraction is absent when it is zero.
        template = (
            "(CASE WHEN length(%(expressions)s) = 19 THEN replace(%(expressions)s, ' ', 'T') || '.000000Z' "
            "ELSE replace(%(expressions)s, ' ', 'T') || 'Z' END)"
        )
        return self.as_sql(compiler, connection, template=template, **extra)


def raw_rows(queryset: QuerySet[Any], columns: Sequence[str]) -> list[tuple[Any, ...]]:
    """The rows of a `.values(...)` queryset as tuples of what the database driver returns, in the order
    of `columns` (a field's column name, an annotation's name): one SQL statement, compiled by Django for
    the connection's vendor, without Django's per-value converters and without a dict per row (a list of
    1,000 agents spent a third of its time in them). The caller converts what the driver leaves raw: on
    SQLite a UUID is 32 hex digits, a boolean 0/1, JSON and encrypted fields are text."""
    sql, params = queryset.query.sql_with_params()
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(sql, params)
        names = [column[0] for column in cursor.description]
        places = [names.index(column) for column in columns]
        if len(places) == 1:
            return [(row[places[0]],) for row in cursor.fetchall()]
        pick = itemgetter(*places)
        return [pick(row) for row in cursor.fetchall()]


def uuid_text(value: UUID | str) -> str:
    """A UUID column of a raw row as its canonical text (PostgreSQL's driver gives a UUID, SQLite 32 hex
    digits)."""
    if isinstance(value, UUID):
        return str(value)
    return f"{value[:8]}-{value[8:12]}-{value[12:16]}-{value[16:20]}-{value[20:]}"


def json_column(value: Any) -> Any:
    """A JSON column of a raw row as a Python value (SQLite and Django's PostgreSQL setup give its text;
    the empty object, the most common value, is not parsed). Parsed by orjson: a list of 1,000 agents
    has five JSON columns a row, and the standard library's parser took a fifth of its time."""
    if not isinstance(value, str):
        return value
    return {} if value == "{}" else orjson.loads(value)


def row_get(rows: QuerySet[M], row_id: str, *, what: str, missing: str, code: str | None = None) -> M:
    """The row of `rows` (already scoped to its owner: an organization, an agent) whose id is `row_id`.
    A non-UUID id is a 400 that names `what`; an id that is not among `rows` (none, or another owner's:
    the two look the same) is a 404 with the message `missing` (and `code`, else NOT_FOUND)."""
    row = rows.filter(pk=parse_uuid(row_id, what)).first()
    if row is None:
        raise ApiError.not_found(missing, code=code)
    return row
